// Answers from Go templates, after CoreDNS's plugin/template: the first template whose zone,
// class, type and regex match renders its records; a regex miss is NXDOMAIN unless the
// template falls through.

import { classToString, QType, Rcode, typeToString } from '../../dns/constants.js';
import { unmappedIP } from '../../dns/ip.js';
import { encodeMessage, type Message, type ResourceRecord } from '../../dns/message.js';
import { skipName } from '../../dns/name.js';
import { recordsReply } from '../../server/reply.js';
import { parseRecordText, RecordTextError } from '../../dns/rrtext.js';
import { Response, type Handler, type HandlerResult, type Next, type Request } from '../../server/request.js';
import { type Fallthrough, matchZone } from '../fallthrough.js';
import { format, goMap, TemplateError, type GoTemplate, type Value, type ValueObject } from './gotemplate.js';
import { labelKey, newTemplateCounters, type TemplateCounters } from './metrics.js';
import { FAST_MAX_MS } from '../../server/fast-answers.js';

export type Section = 'answer' | 'additional' | 'authority';

export interface Template {
  qclass: number;
  qtype: number;
  zones: string[];
  regexes: RegExp[];
  answer: GoTemplate[];
  additional: GoTemplate[];
  authority: GoTemplate[];
  rcode: number;
  fall: Fallthrough;
  upstream: boolean;
  /** Extended DNS Error (RFC 8914) to attach: info code and extra text. */
  ede: { code: number; text: string } | null;
}

const ANY = 255;
const EDE = 15;
const AA = 0x0400;
/** Answers kept per handler before the cache starts over (names are the client's choice). */
const MAX_CACHED = 10_000;
/** What a template may read for its answer to depend on the name, type and class alone. */
const PER_NAME_FIELDS = new Set(['Name', 'Zone', 'Class', 'Type', 'Match', 'Group', 'Regex']);

/** A rendered answer: records as wire bytes after a question at offset 12. */
interface CachedAnswer {
  qtype: number;
  /** The same name's answer for another type. */
  next: CachedAnswer | null;
  rcode: number;
  records: Buffer;
  an: number;
  ns: number;
  ar: number;
  metricKey: string;
}

/** True when the template's answer is a function of the query's name, type and class only. */
export function perNameOnly(t: Template): boolean {
  if (t.upstream || t.ede !== null) return false;
  for (const g of [...t.answer, ...t.additional, ...t.authority]) {
    const r = g.reads();
    if (r.other) return false;
    for (const f of r.fields) if (!PER_NAME_FIELDS.has(f)) return false;
  }
  return true;
}

function clientIp(req: Request): string {
  return unmappedIP(req.client.remoteAddress);
}

function withText(o: ValueObject, text: string): ValueObject {
  Object.defineProperty(o, 'toString', { value: () => text, enumerable: false });
  return o;
}

/** miekg/dns's Question.String(): `;name.\tIN\t A`. */
function questionView(req: Request): ValueObject {
  return withText(
    { Name: req.qname, Qtype: req.qtype, Qclass: req.qclass },
    `;${req.qname}\t${classToString(req.qclass)}\t ${typeToString(req.qtype)}`,
  );
}

/** What `.Message` shows: the query's header and question, as miekg/dns prints a message. */
function messageView(req: Request): ValueObject {
  const flags = [req.rd ? 'rd' : '', req.cd ? 'cd' : ''].filter(Boolean).join(' ');
  const q = questionView(req);
  const text =
    `;; opcode: QUERY, status: NOERROR, id: ${req.id}\n;; flags: ${flags}; QUERY: 1, ANSWER: 0, AUTHORITY: 0, ADDITIONAL: ${req.edns ? 1 : 0}\n\n` +
    `;; QUESTION SECTION:\n${format(q)}\n`;
  return withText({ Id: req.id, Question: [q], Rcode: 0, Opcode: req.opcode }, text);
}

export class TemplateHandler implements Handler {
  readonly name = 'template';
  /** Rendered answers of templates that depend on the name, type and class alone, by name (one Map read a hit). */
  private readonly cache = new Map<string, CachedAnswer>();
  private cached = 0;
  private readonly cacheable: ReadonlySet<Template>;

  constructor(
    private readonly zones: readonly string[],
    private readonly templates: readonly Template[],
    private readonly server: string,
    private readonly resolve: (req: Request) => HandlerResult,
    /** The server's template counters (TEMPLATE_METRICS). */
    private readonly counters: TemplateCounters = newTemplateCounters(),
  ) {
    this.cacheable = new Set(templates.filter(perNameOnly));
  }

  private readonly folds = new Map<string, (n: number) => void>();

  serveDNS(req: Request, next: Next): HandlerResult {
    // Kept by type, then name; only class IN (the others are rare and go the long way).
    const cacheOn = this.cacheable.size !== 0 && req.qclass === 1;
    if (cacheOn) {
      let hit = this.cache.get(req.name) ?? null;
      while (hit !== null && hit.qtype !== req.qtype) hit = hit.next;
      if (hit !== null) {
        this.counters.matches.inc(hit.metricKey);
        const res = Response.wire(recordsReply(req, hit.rcode, AA, hit.records, hit.an, hit.ns, hit.ar), this.name);
        // A function of the question alone (perNameOnly), for as long as the configuration.
        res.fastMs = FAST_MAX_MS;
        res.fastCount = this.foldOf(hit.metricKey);
        return res;
      }
    }
    if (matchZone(this.zones, req.name) === undefined) return next(req);
    for (const t of this.templates) {
      const zone = matchZone(t.zones, req.name);
      if (zone === undefined) continue;
      if (t.qclass !== ANY && req.qclass !== ANY && req.qclass !== t.qclass) continue;
      if (t.qtype !== ANY && req.qtype !== QType.ANY && req.qtype !== t.qtype) continue;
      let m: RegExpExecArray | null = null;
      let regex: RegExp | null = null;
      for (const re of t.regexes) {
        m = re.exec(req.name);
        if (m) {
          regex = re;
          break;
        }
      }
      if (m === null || regex === null) {
        if (t.fall.through(req.name)) continue;
        return Response.rcode(Rcode.NXDOMAIN, this.name);
      }
      return this.answer(req, t, zone, regex, m, cacheOn);
    }
    return next(req);
  }

  private answer(
    req: Request,
    t: Template,
    zone: string,
    regex: RegExp,
    m: RegExpExecArray,
    cacheOn: boolean,
  ): HandlerResult {
    const cls = classToString(req.qclass);
    const type = typeToString(req.qtype);
    const metricKey = labelKey(this.server, zone, '', cls, type);
    this.counters.matches.inc(metricKey);
    if (t.rcode === Rcode.SERVFAIL) return Response.rcode(Rcode.SERVFAIL, this.name);
    const groups: Record<string, Value> = {};
    if (m.groups) for (const [k, v] of Object.entries(m.groups)) groups[k] = v ?? '';
    const data: ValueObject = {
      Zone: zone,
      Name: req.name,
      Regex: regex.source,
      Match: [...m].map((s) => s ?? ''),
      Group: goMap(groups),
      Class: cls,
      Type: type,
      Message: messageView(req),
      Question: questionView(req),
      Remote: clientIp(req),
      Meta: (label: Value) => (typeof label === 'string' ? (req.metadata?.value(label) ?? '') : ''),
    };
    const msg = req.reply(t.rcode);
    msg.aa = true;
    const fail = (section: Section, tpl: GoTemplate, e: unknown): Response => {
      const key = labelKey(this.server, zone, '', cls, type, section, tpl.name);
      (e instanceof TemplateError ? this.counters.templateFailures : this.counters.rrFailures).inc(key);
      return Response.rcode(Rcode.SERVFAIL, this.name, (e as Error).message);
    };
    const cnames: ResourceRecord[] = [];
    const sections: Array<[Section, GoTemplate[], ResourceRecord[]]> = [
      ['answer', t.answer, msg.answers],
      ['additional', t.additional, msg.additionals],
      ['authority', t.authority, msg.authorities],
    ];
    for (const [section, list, out] of sections) {
      for (const tpl of list) {
        let rr: ResourceRecord;
        try {
          rr = parseRecordText(tpl.execute(data));
        } catch (e) {
          if (e instanceof TemplateError || e instanceof RecordTextError) return fail(section, tpl, e);
          throw e;
        }
        out.push(rr);
        if (
          section === 'answer' &&
          t.upstream &&
          (req.qtype === QType.A || req.qtype === QType.AAAA) &&
          rr.type === QType.CNAME
        )
          cnames.push(rr);
      }
    }
    if (t.ede !== null) addEde(msg, req, t.ede);
    if (cacheOn && this.cacheable.has(t)) {
      const c = this.keep(req, msg, metricKey);
      if (c !== null) return Response.wire(recordsReply(req, c.rcode, AA, c.records, c.an, c.ns, c.ar), this.name);
    }
    if (cnames.length === 0) return Response.message(msg, this.name);
    return this.follow(req, msg, cnames);
  }

  /** Encodes `msg` once and keeps its records for the next queries of the same name, type and class. */
  /** What n native repeats of a kept answer count (one function per label set, zones × types). */
  private foldOf(metricKey: string): (n: number) => void {
    let f = this.folds.get(metricKey);
    if (f === undefined) this.folds.set(metricKey, (f = (n: number) => this.counters.matches.inc(metricKey, n)));
    return f;
  }

  private keep(req: Request, msg: Message, metricKey: string): CachedAnswer | null {
    let wire: Buffer;
    try {
      wire = encodeMessage(msg);
    } catch {
      return null;
    }
    const qEnd = skipName(wire, 12) + 4;
    // Memory of its own, not a slice of Node's pool: a kept answer must not pin what short-lived buffers filled.
    const records = Buffer.allocUnsafeSlow(wire.length - qEnd);
    wire.copy(records, 0, qEnd);
    const c: CachedAnswer = {
      qtype: req.qtype,
      next: null,
      rcode: msg.rcode,
      records,
      an: msg.answers.length,
      ns: msg.authorities.length,
      ar: msg.additionals.length,
      metricKey,
    };
    if (this.cached >= MAX_CACHED) {
      this.cache.clear();
      this.cached = 0;
    }
    // Only a miss gets here, so the name holds no answer of this type yet.
    c.next = this.cache.get(req.name) ?? null;
    this.cache.set(req.name, c);
    this.cached++;
    return c;
  }

  /** `upstream`: a CNAME's target resolved through this server block, its answers appended. */
  private async follow(req: Request, msg: Message, cnames: ResourceRecord[]): Promise<Response> {
    for (const c of cnames) {
      if (req.depth >= 8) break;
      try {
        const up = await this.resolve(req.derive((c.data as { target: string }).target, req.qtype));
        msg.answers.push(...up.toMessage(req).answers);
      } catch {
        // CoreDNS ignores a failed upstream lookup: the CNAME alone is the answer.
      }
    }
    return Response.message(msg, this.name);
  }
}

function addEde(msg: Message, req: Request, ede: { code: number; text: string }): void {
  const data = Buffer.alloc(2 + Buffer.byteLength(ede.text));
  data.writeUInt16BE(ede.code, 0);
  data.write(ede.text, 2);
  msg.edns = {
    udpSize: req.edns ? Math.max(512, req.edns.udpSize) : 4096,
    version: 0,
    do: req.do,
    zflags: 0,
    options: [{ code: EDE, data }],
  };
}
