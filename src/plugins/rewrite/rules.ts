// rewrite's rules, after CoreDNS's plugin/rewrite: each looks at the query (as earlier rules
// left it), may change it, and may leave response rules that put the answer back into the
// terms the client asked in.

import type { EdnsOption, Message, ResourceRecord } from '../../dns/message.js';
import { QType } from '../../dns/constants.js';
import { requestOptions, type Request } from '../../server/request.js';
import { fillGroups, type NameMatch } from './names.js';

/** The query as the rules have left it so far, and what the response will need. */
export class RewriteState {
  /** The question name, lowercase (CoreDNS's state.Name()). */
  qname: string;
  qtype: number;
  qclass: number;
  /** The OPT options, copied from the query when an edns0 rule first touches them. */
  options: EdnsOption[] | null = null;
  readonly responseRules: ResponseRule[] = [];
  /** Option codes to take out of the response (edns0 ... revert). */
  readonly revertCodes: number[] = [];

  constructor(readonly req: Request) {
    this.qname = req.name;
    this.qtype = req.qtype;
    this.qclass = req.qclass;
  }

  get changed(): boolean {
    const r = this.req;
    return this.options !== null || this.qname !== r.name || this.qtype !== r.qtype || this.qclass !== r.qclass;
  }

  ednsOptions(): EdnsOption[] {
    if (this.options === null) this.options = requestOptions(this.req);
    return this.options;
  }
}

export interface Rule {
  /** `stop` (the default) ends the rule list once this rule has rewritten something. */
  readonly stop: boolean;
  /** Applies the rule; true when it rewrote (CoreDNS's RewriteDone). */
  rewrite(st: RewriteState): boolean;
}

/** Changes an answer on its way back. `original` is the query the client sent. */
export interface ResponseRule {
  apply(m: Message, original: Request): void;
}

// ------------------------------------------------------------------ response rules

function eachRecord(m: Message, f: (rr: ResourceRecord) => void): void {
  for (const rr of m.answers) f(rr);
  for (const rr of m.authorities) f(rr);
  for (const rr of m.additionals) f(rr);
}

/** The names record values carry that `answer value` rewrites (CoreDNS: CNAME, DNAME, SOA, SRV, MX, NAPTR, NS). */
function targetOf(rr: ResourceRecord): string | null {
  const d = rr.data as unknown as Record<string, unknown>;
  switch (rr.type) {
    case QType.CNAME:
    case QType.NS:
      return d.target as string;
    case QType.MX:
      return d.exchange as string;
    case QType.SRV:
      return d.target as string;
    case QType.SOA:
      return d.mname as string;
    default:
      return null;
  }
}

function setTarget(rr: ResourceRecord, name: string): void {
  const d = rr.data as unknown as Record<string, unknown>;
  switch (rr.type) {
    case QType.MX:
      d.exchange = name;
      return;
    case QType.SOA:
      d.mname = name;
      return;
    default:
      d.target = name;
  }
}

/** `answer name FROM TO` / `answer value FROM TO`: a regex with `{N}` groups over owner names or values. */
export class RegexAnswerRule implements ResponseRule {
  constructor(
    private readonly pattern: RegExp,
    private readonly replacement: string,
    private readonly values: boolean,
  ) {}

  apply(m: Message): void {
    eachRecord(m, (rr) => {
      if (this.values) {
        const t = targetOf(rr);
        if (t === null) return;
        const mt = this.pattern.exec(t);
        if (mt) setTarget(rr, fillGroups(this.replacement, mt));
        return;
      }
      const mt = this.pattern.exec(rr.name);
      if (mt) rr.name = fillGroups(this.replacement, mt);
    });
  }
}

/** `answer auto` (and every exact rule): owner names the rewrite produced get the name asked back. */
export class AutoAnswerRule implements ResponseRule {
  /** True when the rule maps exactly the rewritten name back to the asked one (regex and exact). */
  get mapsQuestionOnly(): boolean {
    return this.match.type === 'exact' || this.match.type === 'regex';
  }

  constructor(
    private readonly match: NameMatch,
    private readonly to: string,
    private readonly rewritten: string,
  ) {}

  apply(m: Message, original: Request): void {
    eachRecord(m, (rr) => {
      const n = rr.name.toLowerCase();
      switch (this.match.type) {
        case 'exact':
          if (n === this.to) rr.name = this.match.from;
          return;
        case 'prefix':
          if (n.startsWith(this.to)) rr.name = this.match.from + n.slice(this.to.length);
          return;
        case 'suffix':
          if (n.endsWith(this.to)) rr.name = n.slice(0, n.length - this.to.length) + this.match.from;
          return;
        case 'substring':
          if (n.includes(this.to)) rr.name = n.split(this.to).join(this.match.from);
          return;
        case 'regex':
          if (n === this.rewritten) rr.name = original.qname;
      }
    });
  }
}

/** `ttl`: every record's TTL set, or clamped into [min, max]. */
export class TtlResponseRule implements ResponseRule {
  constructor(
    private readonly min: number,
    private readonly max: number,
  ) {}

  apply(m: Message): void {
    eachRecord(m, (rr) => {
      if (rr.ttl < this.min) rr.ttl = this.min;
      else if (rr.ttl > this.max) rr.ttl = this.max;
    });
  }
}

/** `rcode`: one response code replaced by another. */
export class RcodeResponseRule implements ResponseRule {
  constructor(
    private readonly from: number,
    private readonly to: number,
  ) {}

  apply(m: Message): void {
    if (m.rcode === this.from) m.rcode = this.to;
  }
}

// ------------------------------------------------------------------ request rules

export interface AnswerOption {
  kind: 'auto' | 'name' | 'value';
  pattern?: RegExp;
  replacement?: string;
}

/** `name [exact|prefix|suffix|substring|regex] FROM TO [answer ...]`. */
export class NameRule implements Rule {
  constructor(
    readonly stop: boolean,
    private readonly match: NameMatch,
    private readonly to: string,
    private readonly answers: AnswerOption[],
  ) {}

  rewrite(st: RewriteState): boolean {
    const n = this.match.rewrite(st.qname, this.to);
    if (n === null) return false;
    st.qname = n;
    // An exact rule always maps its answers back (CoreDNS); the others only with `answer auto`.
    if (this.match.type === 'exact') st.responseRules.push(new AutoAnswerRule(this.match, this.to, n));
    for (const a of this.answers) {
      if (a.kind === 'auto') {
        if (this.match.type !== 'exact') st.responseRules.push(new AutoAnswerRule(this.match, this.to, n));
      } else st.responseRules.push(new RegexAnswerRule(a.pattern!, a.replacement!, a.kind === 'value'));
    }
    return true;
  }
}

/** `ttl [match] NAME SECONDS|MIN-MAX` and `rcode [match] NAME FROM TO`: a name test that leaves a response rule. */
export class ResponseOnlyRule implements Rule {
  constructor(
    readonly stop: boolean,
    private readonly match: NameMatch,
    private readonly response: ResponseRule,
  ) {}

  rewrite(st: RewriteState): boolean {
    if (this.match.test(st.qname) === false) return false;
    st.responseRules.push(this.response);
    return true;
  }
}

/** `type FROM TO` and `class FROM TO`. */
export class FieldRule implements Rule {
  constructor(
    readonly stop: boolean,
    private readonly field: 'qtype' | 'qclass',
    private readonly from: number,
    private readonly to: number,
  ) {}

  rewrite(st: RewriteState): boolean {
    if (st[this.field] !== this.from) return false;
    st[this.field] = this.to;
    return true;
  }
}
