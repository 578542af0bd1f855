// Runs the rules on each query; when one rewrote, the next plugins get the rewritten query and
// the answer comes back with the client's own question and the response rules applied.
// Queries no rule touches go on unchanged, at the cost of the rules' tests.

import { QType, Rcode } from '../../dns/constants.js';
import { emptyMessage, encodeMessage, type Message, type ResourceRecord } from '../../dns/message.js';
import { parseQuery } from '../../dns/query.js';
import {
  requestOptions,
  Response,
  type Handler,
  type HandlerResult,
  type Next,
  type Request,
} from '../../server/request.js';
import { isValidName, type NameMatch } from './names.js';
import { AutoAnswerRule, FieldRule, NameRule, ResponseOnlyRule, RewriteState, type Rule } from './rules.js';
import { rebuildQuery, swapQuestion } from './wire.js';
import { KeptAnswers } from './kept.js';
import type { Invalidation } from '../../server/invalidation.js';
import type { PluginInstance } from '../plugin.js';

/** How deep a `cname` rule's own lookups may nest before it stops following targets. */
const MAX_CNAME_DEPTH = 8;

/** `cname [match] FROM TO`: CNAME targets in the answer rewritten, the new target looked up. */
export class CnameRule implements Rule {
  constructor(
    readonly stop: boolean,
    readonly match: NameMatch,
    readonly to: string,
  ) {}

  rewrite(st: RewriteState): boolean {
    (st as CnameState).cnames ??= [];
    (st as CnameState).cnames!.push(this);
    return true;
  }
}

type CnameState = RewriteState & { cnames?: CnameRule[] };

/** The kept answer to `req`, or null (the one read of kept answers: a shared store can take its place). */
function keptReply(kept: KeptAnswers | null, req: Request): Response | null {
  return kept === null ? null : kept.reply(req);
}

/** Keeps the wire path's answer to `req` (the one write of kept answers). */
function keepReply(kept: KeptAnswers | null, req: Request, inner: Request, out: Response): void {
  const wire = out.peekWire();
  if (kept !== null && wire !== null) kept.keep(req, inner, wire, out.plugin, out.prepared);
}

/** The query with the rules' changes, as a Request the next plugins can serve; null if it cannot be. */
function rebuild(req: Request, st: RewriteState): Request | null {
  if (!isValidName(st.qname)) return null;
  const m = emptyMessage(req.id);
  m.opcode = req.opcode;
  m.rd = req.rd;
  m.cd = req.cd;
  m.questions.push({ name: st.qname, type: st.qtype, class: st.qclass });
  const options = st.options;
  if (req.edns !== null || (options !== null && options.length > 0)) {
    // A query without OPT gets one of 4096 octets when a rule adds an option (CoreDNS's SetEdns0).
    m.edns = { udpSize: req.edns?.udpSize ?? 4096, version: 0, do: req.do, zflags: 0, options: options ?? [] };
    if (options === null && req.edns !== null) m.edns.options = requestOptions(req);
  }
  let raw: Buffer;
  try {
    raw = encodeMessage(m);
  } catch {
    return null;
  }
  const q = parseQuery(raw);
  if (typeof q === 'number') return null;
  return req.withQuery(raw, q);
}

function copyRecords(list: ResourceRecord[]): ResourceRecord[] {
  return list.map((rr) => ({ ...rr, data: { ...rr.data } }));
}

/**
 * Plugins that may run after rewrite in a block whose answers are kept: each answers (or passes
 * on) by the question alone, never by who asks. acl and autopath do not: a block with them, or
 * with a plugin not named here, keeps nothing, so every query goes through them.
 */
const SAME_FOR_EVERY_ASKER: ReadonlySet<string> = new Set([
  'cache',
  'header',
  'minimal',
  'template',
  'transfer',
  'hosts',
  'k8s_external',
  'kubernetes',
  'file',
  'etcd',
  'loop',
  'forward',
  'whoami',
  'view',
]);

/** True when what the rules do to a query follows from its name, type and class alone (no edns0 rule). */
function questionOnly(rules: readonly Rule[]): boolean {
  return rules.every(
    (r) => r instanceof NameRule || r instanceof FieldRule || r instanceof ResponseOnlyRule || r instanceof CnameRule,
  );
}

export class RewriteHandler implements Handler {
  readonly name = 'rewrite';
  /** Answers of the wire path by asked name; null when a rule reads more than the question. */
  private readonly kept: KeptAnswers | null;

  constructor(
    private readonly rules: readonly Rule[],
    /** Resolves a name through this server block (the `cname` rule's lookups). */
    private readonly resolve: (req: Request) => HandlerResult,
  ) {
    this.kept = questionOnly(rules) ? new KeptAnswers() : null;
  }

  /**
   * Starts keeping answers, dropped by `invalidation` with the inner plugin's, when every plugin
   * after this one in `block` (the block's instances in execution order) answers alike for every asker.
   */
  open(invalidation: Invalidation, block: readonly PluginInstance[]): void {
    const at = block.findIndex((i) => i.handler === this);
    if (block.slice(at + 1).every((i) => SAME_FOR_EVERY_ASKER.has(i.name))) this.kept?.open(invalidation);
  }

  close(): void {
    this.kept?.close();
  }

  /** How many answers are kept (tests, diagnostics). */
  get keptAnswers(): number {
    return this.kept === null ? 0 : this.kept.size;
  }

  serveDNS(req: Request, next: Next): HandlerResult {
    const hit = keptReply(this.kept, req);
    if (hit !== null) return hit;
    const st = new RewriteState(req);
    let done = false;
    for (const rule of this.rules) {
      if (!rule.rewrite(st)) continue;
      done = true;
      if (rule.stop) break;
    }
    if (!done) return next(req);
    const cnames = (st as CnameState).cnames;
    const inner = !st.changed
      ? req
      : (st.options === null && rebuildQuery(req, st.qname, st.qtype, st.qclass)) || rebuild(req, st);
    if (inner === null) return Response.rcode(Rcode.SERVFAIL, this.name, `invalid name after rewrite: ${st.qname}`);
    if (inner === req && st.responseRules.length === 0 && cnames === undefined) return next(req);
    const r = next(inner);
    if (r instanceof Promise) return r.then((res) => this.answer(req, inner, res, st, cnames, false));
    return this.answer(req, inner, r, st, cnames, true);
  }

  /** The answer to `inner` made an answer to `req`: its question, the response rules, the reverts. */
  private answer(
    req: Request,
    inner: Request,
    res: Response,
    st: RewriteState,
    cnames: CnameRule[] | undefined,
    /** The answer came back in the same turn: nothing can have changed since it was made. */
    sync: boolean,
  ): HandlerResult {
    const wire = res.peekWire();
    const only = st.responseRules.length === 1 ? st.responseRules[0] : undefined;
    if (
      wire !== null &&
      cnames === undefined &&
      st.revertCodes.length === 0 &&
      only instanceof AutoAnswerRule &&
      only.mapsQuestionOnly
    ) {
      const swapped = swapQuestion(req, inner, wire);
      if (swapped !== null) {
        const out = Response.wire(swapped, res.plugin);
        out.error = res.error;
        // The same records after the question: the inner plugin's description (its keys) still holds.
        out.prepared = res.prepared;
        out.fastMs = res.fastMs;
        out.fastCount = res.fastCount;
        if (sync && res.error === undefined) keepReply(this.kept, req, inner, out);
        return out;
      }
    }
    const src = res.toMessage(inner);
    const m: Message = {
      ...src,
      questions: [{ name: req.qname, type: req.qtype, class: req.qclass }],
      answers: copyRecords(src.answers),
      authorities: copyRecords(src.authorities),
      additionals: copyRecords(src.additionals),
      edns: src.edns
        ? { ...src.edns, options: src.edns.options.filter((o) => !st.revertCodes.includes(o.code)) }
        : null,
    };
    // Last rule first: a chain of `continue` rules is undone back to the name the client asked.
    for (let i = st.responseRules.length - 1; i >= 0; i--) st.responseRules[i]!.apply(m, req);
    const done = (): Response => {
      const out = Response.message(m, res.plugin);
      out.error = res.error;
      return out;
    };
    if (cnames === undefined || inner.depth >= MAX_CNAME_DEPTH) return done();
    return this.followCnames(m, inner, cnames).then(done);
  }

  /** CoreDNS's cname target rule: a matching CNAME gets the new target, whose records replace the rest. */
  private async followCnames(m: Message, inner: Request, cnames: CnameRule[]): Promise<void> {
    for (const rule of cnames) {
      const cname = m.answers.find(
        (rr) =>
          rr.type === QType.CNAME &&
          rule.match.rewrite((rr.data as { target: string }).target.toLowerCase(), rule.to) !== null,
      );
      if (cname === undefined) continue;
      const target = rule.match.rewrite((cname.data as { target: string }).target.toLowerCase(), rule.to)!;
      if (!isValidName(target)) continue;
      let found: ResourceRecord[] = [];
      try {
        const up = await this.resolve(inner.derive(target, inner.qtype));
        found = up.toMessage(inner).answers.filter((rr) => rr.name.toLowerCase() === target);
      } catch {
        // A failed lookup leaves the CNAME with its new target and nothing after it.
      }
      const kept = m.answers.filter((rr) => rr.type === QType.CNAME);
      (cname.data as { target: string }).target = target;
      m.answers = [...kept, ...found];
    }
  }
}
