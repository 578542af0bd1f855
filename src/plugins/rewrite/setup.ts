// Parses `rewrite` lines as CoreDNS's setup.go and newRule do: one rule per directive, the
// block form's lines joined into one rule (`rewrite stop { name ...; answer ... }`).

import { directiveError } from '../../corefile/errors.js';
import { goRegExp, groupCount } from '../../corefile/regexp.js';
import type { Directive, Token } from '../../corefile/types.js';
import { classToString, QClass, rcodeFromString, typeFromString } from '../../dns/constants.js';
import type { PluginSetup } from '../plugin.js';
import { Edns0LocalRule, Edns0NsidRule, Edns0SubnetRule, EDNS0_VARIABLES } from './edns0.js';
import { CnameRule, RewriteHandler } from './handler.js';
import { groupsUsed, MATCH_TYPES, NameMatch, normalizeName, type MatchType } from './names.js';
import {
  FieldRule,
  NameRule,
  RcodeResponseRule,
  ResponseOnlyRule,
  TtlResponseRule,
  type AnswerOption,
  type Rule,
} from './rules.js';
import { isMetadataLabel } from '../../server/metadata.js';

class RuleError extends Error {
  constructor(
    message: string,
    readonly at?: Token,
  ) {
    super(message);
  }
}

function regex(tok: Token, replacement: string | null, what: string): RegExp {
  let re: RegExp;
  try {
    re = goRegExp(tok.text);
  } catch {
    throw new RuleError(`invalid regex ${what}pattern: ${tok.text}`, tok);
  }
  if (replacement !== null && groupsUsed(replacement) > groupCount(re)) {
    throw new RuleError(
      `the rewrite regex pattern (${replacement}) uses more subexpressions than its corresponding matching regex pattern (${tok.text})`,
      tok,
    );
  }
  return re;
}

function matchOf(type: MatchType, tok: Token): NameMatch {
  if (type === 'regex') {
    regex(tok, null, '');
    return new NameMatch('regex', tok.text);
  }
  const t = tok.text.toLowerCase();
  return new NameMatch(type, type === 'exact' || type === 'suffix' ? normalizeName(t) : t);
}

/** `[TYPE] NAME REST...` where TYPE is optional (exact) when the arguments say so. */
function splitMatch(args: Token[], restLen: number): { type: MatchType; name: Token; rest: Token[] } {
  if (args.length === restLen + 1) return { type: 'exact', name: args[0]!, rest: args.slice(1) };
  if (args.length !== restLen + 2) throw new RuleError(`wrong number of arguments (${args.length})`);
  const type = args[0]!.text.toLowerCase();
  if (!MATCH_TYPES.has(type))
    throw new RuleError(
      `supports only exact, prefix, suffix, substring, and regex name matching, received: ${args[0]!.text}`,
      args[0],
    );
  return { type: type as MatchType, name: args[1]!, rest: args.slice(2) };
}

function nameRule(stop: boolean, args: Token[]): Rule {
  if (args.length < 2) throw new RuleError('too few arguments for a name rule');
  let type: MatchType = 'exact';
  let rest = args;
  if (args.length >= 3) {
    const t = args[0]!.text.toLowerCase();
    if (!MATCH_TYPES.has(t))
      throw new RuleError(
        `name rule supports only exact, prefix, suffix, substring, and regex name matching, received: ${args[0]!.text}`,
        args[0],
      );
    type = t as MatchType;
    rest = args.slice(1);
  }
  const [fromTok, toTok] = [rest[0]!, rest[1]!];
  let to: string;
  if (type === 'regex') {
    to = normalizeName(toTok.text);
    regex(fromTok, toTok.text, '');
  } else {
    const t = toTok.text.toLowerCase();
    to = type === 'exact' || type === 'suffix' ? normalizeName(t) : t;
  }
  const match = matchOf(type, fromTok);
  const answers: AnswerOption[] = [];
  const opts = rest.slice(2);
  for (let i = 0; i < opts.length;) {
    // `answer` may be left out after the first option (CoreDNS's chained response rewrites).
    if (opts[i]!.text.toLowerCase() === 'answer') i++;
    else if (answers.length === 0) throw new RuleError(`unexpected "${opts[i]!.text}" (expected "answer")`, opts[i]);
    const kind = opts[i]?.text.toLowerCase();
    if (kind === 'auto') {
      answers.push({ kind: 'auto' });
      i++;
    } else if (kind === 'name' || kind === 'value') {
      const f = opts[i + 1];
      const t = opts[i + 2];
      if (!f || !t) throw new RuleError(`answer ${kind} needs FROM and TO`, opts[i]);
      answers.push({ kind, pattern: regex(f, t.text, 'answer '), replacement: normalizeName(t.text) });
      i += 3;
    } else
      throw new RuleError(
        `invalid answer rule "${opts[i]?.text ?? ''}" (auto, name FROM TO or value FROM TO)`,
        opts[i] ?? opts[i - 1],
      );
  }
  return new NameRule(stop, match, to, answers);
}

function ttlRange(tok: Token): [number, number] {
  const m = /^(\d*)(-?)(\d*)$/.exec(tok.text);
  const bad = () => new RuleError(`invalid TTL '${tok.text}' for a ttl rule`, tok);
  if (!m || (m[1] === '' && m[3] === '') || (m[2] === '' && m[3] !== '')) throw bad();
  const max32 = 2147483647;
  const lo = m[1] === '' ? 0 : Number(m[1]);
  const hi = m[2] === '' ? lo : m[3] === '' ? max32 : Number(m[3]);
  if (lo > max32 || hi > max32 || lo > hi) throw bad();
  return [lo, hi];
}

function rcodeOf(tok: Token, what: string): number {
  if (/^\d+$/.test(tok.text) && Number(tok.text) <= 23) return Number(tok.text);
  const r = rcodeFromString(tok.text);
  if (r === undefined) throw new RuleError(`invalid ${what} RCODE '${tok.text}' for a rcode rule`, tok);
  return r;
}

function classOf(tok: Token): number {
  const up = tok.text.toUpperCase();
  for (const c of [QClass.IN, QClass.CH, QClass.HS, QClass.NONE, QClass.ANY]) if (classToString(c) === up) return c;
  throw new RuleError(`invalid class "${tok.text}"`, tok);
}

function edns0Rule(stop: boolean, args: Token[]): Rule {
  if (args.length < 2) throw new RuleError('too few arguments for an EDNS0 rule');
  let revert = false;
  if (args.length > 2 && args[args.length - 1]!.text.toLowerCase() === 'revert') {
    revert = true;
    args = args.slice(0, -1);
  }
  const kind = args[0]!.text.toLowerCase();
  const action = args[1]!.text.toLowerCase();
  if (action !== 'set' && action !== 'replace' && action !== 'append' && action !== 'unset')
    throw new RuleError(`invalid action: "${args[1]!.text}"`, args[1]);
  const a = action;
  switch (kind) {
    case 'local': {
      if (a === 'unset' ? args.length !== 3 : args.length !== 4)
        throw new RuleError(`EDNS0 local rules require exactly ${a === 'unset' ? 'two' : 'three'} args`);
      const codeTok = args[2]!;
      const code = Number(codeTok.text);
      if (!/^(0x[0-9a-f]+|\d+)$/i.test(codeTok.text) || code > 0xffff)
        throw new RuleError(`invalid EDNS0 local code "${codeTok.text}"`, codeTok);
      const dataTok = args[3];
      if (dataTok === undefined) return new Edns0LocalRule(stop, a, code, Buffer.alloc(0), null, revert);
      const d = dataTok.text;
      if (d.startsWith('{') && d.endsWith('}')) {
        if (!EDNS0_VARIABLES.has(d) && !isMetadataLabel(d.slice(1, -1)))
          throw new RuleError(`unsupported variable name "${d}"`, dataTok);
        return new Edns0LocalRule(stop, a, code, null, d, revert);
      }
      let data: Buffer;
      if (d.startsWith('0x')) {
        if (!/^0x([0-9a-f]{2})*$/i.test(d)) throw new RuleError(`invalid hex data "${d}"`, dataTok);
        data = Buffer.from(d.slice(2), 'hex');
      } else data = Buffer.from(d, 'latin1');
      return new Edns0LocalRule(stop, a, code, data, null, revert);
    }
    case 'nsid':
      if (args.length !== 2) throw new RuleError('EDNS0 NSID rules do not accept args');
      return new Edns0NsidRule(stop, a, revert);
    case 'subnet': {
      if (a === 'unset' ? args.length !== 2 : args.length !== 4)
        throw new RuleError('EDNS0 subnet rules require exactly three args');
      if (a === 'unset') return new Edns0SubnetRule(stop, a, 0, 0, revert);
      const v4 = Number(args[2]!.text);
      const v6 = Number(args[3]!.text);
      if (!/^\d+$/.test(args[2]!.text) || v4 > 32)
        throw new RuleError(`invalid IPv4 bit mask length ${args[2]!.text}`, args[2]);
      if (!/^\d+$/.test(args[3]!.text) || v6 > 128)
        throw new RuleError(`invalid IPv6 bit mask length ${args[3]!.text}`, args[3]);
      return new Edns0SubnetRule(stop, a, v4, v6, revert);
    }
    default:
      throw new RuleError(`invalid rule type "${args[0]!.text}"`, args[0]);
  }
}

/** CoreDNS's newRule: `[continue|stop] FIELD ...`. */
export function newRule(args: Token[]): Rule {
  if (args.length === 0) throw new RuleError('no rule type specified for rewrite');
  let stop = true;
  const mode = args[0]!.text.toLowerCase();
  if (mode === 'continue' || mode === 'stop') {
    stop = mode === 'stop';
    args = args.slice(1);
    if (args.length === 0) throw new RuleError('no rule type specified for rewrite');
  }
  const field = args[0]!.text.toLowerCase();
  const rest = args.slice(1);
  switch (field) {
    case 'answer':
      throw new RuleError('response rewrites must begin with a name rule', args[0]);
    case 'name':
      return nameRule(stop, rest);
    case 'type': {
      if (rest.length !== 2) throw new RuleError('type rules must have exactly two arguments');
      const from = typeFromString(rest[0]!.text);
      const to = typeFromString(rest[1]!.text);
      if (from === undefined) throw new RuleError(`invalid type "${rest[0]!.text}"`, rest[0]);
      if (to === undefined) throw new RuleError(`invalid type "${rest[1]!.text}"`, rest[1]);
      return new FieldRule(stop, 'qtype', from, to);
    }
    case 'class': {
      if (rest.length !== 2) throw new RuleError('class rules must have exactly two arguments');
      return new FieldRule(stop, 'qclass', classOf(rest[0]!), classOf(rest[1]!));
    }
    case 'edns0':
      return edns0Rule(stop, rest);
    case 'ttl': {
      if (rest.length < 2) throw new RuleError(`too few (${rest.length}) arguments for a ttl rule`);
      const { type, name, rest: r } = splitMatch(rest, 1);
      const [lo, hi] = ttlRange(r[0]!);
      return new ResponseOnlyRule(stop, matchOf(type, name), new TtlResponseRule(lo, hi));
    }
    case 'rcode': {
      if (rest.length < 3) throw new RuleError(`too few (${rest.length}) arguments for a rcode rule`);
      const { type, name, rest: r } = splitMatch(rest, 2);
      return new ResponseOnlyRule(
        stop,
        matchOf(type, name),
        new RcodeResponseRule(rcodeOf(r[0]!, 'matching'), rcodeOf(r[1]!, 'replacement')),
      );
    }
    case 'cname': {
      if (rest.length < 2) throw new RuleError(`too few (${rest.length}) arguments for a cname rule`);
      const { type, name, rest: r } = splitMatch(rest, 1);
      const to = r[0]!.text.toLowerCase();
      if (type === 'regex') regex(name, to, '');
      return new CnameRule(stop, matchOf(type, name), type === 'exact' || type === 'suffix' ? normalizeName(to) : to);
    }
    default:
      throw new RuleError(`invalid rule type "${args[0]!.text}"`, args[0]);
  }
}

/** The arguments of one `rewrite` directive, with a block's lines joined in (CoreDNS's setup). */
function ruleArgs(d: Directive): Token[] {
  const args = [...d.args];
  if (args.length < 2) {
    for (const p of d.block ?? []) {
      args.push({ text: p.name, file: p.file, line: p.line, quoted: false }, ...p.args);
    }
  } else if (d.block && d.block.length)
    throw directiveError(d.block[0]!, 'rewrite: a block follows only `rewrite [continue|stop]`');
  return args;
}

export const setup: PluginSetup = (ds, ctx) => {
  const rules: Rule[] = [];
  for (const d of ds) {
    try {
      rules.push(newRule(ruleArgs(d)));
    } catch (e) {
      if (!(e instanceof RuleError)) throw e;
      throw directiveError(e.at ?? d, `rewrite: ${e.message}`);
    }
  }
  const h = new RewriteHandler(rules, (req) => ctx.resolve(req));
  return {
    name: 'rewrite',
    handler: h,
    startup: () => h.open(ctx.invalidation, ctx.blockInstances()),
    shutdown: () => h.close(),
  };
};
