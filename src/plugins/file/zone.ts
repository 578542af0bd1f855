// One loaded zone and RFC 1034 4.3.2's lookup over it: exact matches, CNAMEs followed inside the
// zone, delegations with glue, wildcards, empty non-terminals (NODATA, not NXDOMAIN), and the
// apex NS in the authority section of positive answers, as CoreDNS's file plugin answers.

import { QType, Rcode } from '../../dns/constants.js';
import type { ResourceRecord } from '../../dns/message.js';
import { isSubdomain } from '../../dns/name.js';

export interface Lookup {
  rcode: number;
  authoritative: boolean;
  answers: ResourceRecord[];
  authorities: ResourceRecord[];
  additionals: ResourceRecord[];
  /** A CNAME target outside the zone that the answer still needs (resolved by the caller). */
  external: string | null;
}

/** Types whose RDATA names a host whose in-zone addresses go in the additional section. */
function targetOf(rr: ResourceRecord): string | null {
  switch (rr.type) {
    case QType.MX:
      return (rr.data as { exchange: string }).exchange;
    case QType.SRV:
      return (rr.data as { target: string }).target;
    case QType.NS:
      return (rr.data as { target: string }).target;
    default:
      return null;
  }
}

function parent(name: string): string {
  const i = name.indexOf('.');
  return i < 0 || i === name.length - 1 ? '.' : name.slice(i + 1);
}

export class Zone {
  /** Records by lowercase owner. */
  private readonly names = new Map<string, ResourceRecord[]>();
  /** Every owner and each of its ancestors up to the apex (so empty non-terminals exist). */
  private readonly exists = new Set<string>();
  readonly soa: ResourceRecord;
  readonly serial: number;

  constructor(
    readonly origin: string,
    records: readonly ResourceRecord[],
  ) {
    let soa: ResourceRecord | undefined;
    for (const rr of records) {
      const owner = rr.name.toLowerCase();
      if (!isSubdomain(owner, origin)) throw new Error(`record ${rr.name} is outside the zone ${origin}`);
      if (rr.type === QType.SOA) {
        if (owner !== origin) throw new Error(`SOA for ${rr.name} is not at the zone's apex ${origin}`);
        soa ??= rr;
        continue;
      }
      let list = this.names.get(owner);
      if (list === undefined) this.names.set(owner, (list = []));
      list.push(rr);
      for (let n = owner; ; n = parent(n)) {
        this.exists.add(n);
        if (n === origin || n === '.') break;
      }
    }
    if (soa === undefined) throw new Error(`zone ${origin} has no SOA record`);
    this.soa = soa;
    this.serial = (soa.data as { serial: number }).serial;
    this.exists.add(origin);
    const apex = this.names.get(origin) ?? [];
    this.names.set(origin, [soa, ...apex]);
  }

  /** Every record, SOA first (what a transfer would send). */
  all(): ResourceRecord[] {
    const out: ResourceRecord[] = [this.soa];
    for (const rrs of this.names.values()) for (const rr of rrs) if (rr !== this.soa) out.push(rr);
    return out;
  }

  private rrs(name: string, type: number): ResourceRecord[] {
    const list = this.names.get(name);
    if (list === undefined) return [];
    return list.filter((rr) => rr.type === type);
  }

  private apexNs(): ResourceRecord[] {
    return this.rrs(this.origin, QType.NS);
  }

  /** A/AAAA for `target` when it is in the zone (glue and additional data). */
  private addresses(target: string): ResourceRecord[] {
    const t = target.toLowerCase();
    if (!isSubdomain(t, this.origin)) return [];
    return [...this.rrs(t, QType.A), ...this.rrs(t, QType.AAAA)];
  }

  /** The closest delegation point strictly below the apex at or above `name`, if any. */
  private delegation(name: string): string | null {
    let cut: string | null = null;
    for (let n = name; n !== this.origin && n !== '.'; n = parent(n)) {
      if (this.rrs(n, QType.NS).length) cut = n;
    }
    return cut;
  }

  lookup(qname: string, qtype: number): Lookup {
    const out: Lookup = {
      rcode: Rcode.NOERROR,
      authoritative: true,
      answers: [],
      authorities: [],
      additionals: [],
      external: null,
    };
    let name = qname.toLowerCase();
    const seen = new Set<string>();
    // Follow CNAMEs inside the zone; each step adds to the answer.
    for (let hop = 0; hop < 8; hop++) {
      const cut = this.delegation(name);
      if (cut !== null && !(cut === name && qtype === QType.DS)) {
        const ns = this.rrs(cut, QType.NS);
        if (out.answers.length === 0) out.authoritative = false;
        out.authorities.push(...ns);
        for (const rr of ns) out.additionals.push(...this.addresses(targetOf(rr)!));
        return out;
      }
      let owner = name;
      let found = this.names.get(name);
      const wildcard = found === undefined && !this.exists.has(name);
      if (wildcard) {
        // The closest encloser's wildcard, if there is one (RFC 4592).
        let enc = parent(name);
        while (!this.exists.has(enc) && enc !== this.origin && enc !== '.') enc = parent(enc);
        const star = enc === '.' ? '*.' : `*.${enc}`;
        found = this.names.get(star);
        owner = star;
      }
      if (found === undefined) {
        if (!this.exists.has(name)) out.rcode = Rcode.NXDOMAIN;
        out.authorities.push(this.soa);
        return out;
      }
      const synth = (rr: ResourceRecord): ResourceRecord =>
        owner === name ? rr : { ...rr, name: hop === 0 && out.answers.length === 0 ? qname : name };
      const direct = found.filter((rr) => rr.type === qtype);
      if (direct.length) {
        out.answers.push(...direct.map(synth));
        if (qtype !== QType.NS || name !== this.origin) out.authorities.push(...this.apexNs());
        const extra = qtype === QType.NS && name === this.origin ? direct : this.apexNs();
        for (const rr of [...direct, ...extra]) {
          const t = targetOf(rr);
          if (t !== null) for (const a of this.addresses(t)) if (!out.additionals.includes(a)) out.additionals.push(a);
        }
        return out;
      }
      const cname = found.find((rr) => rr.type === QType.CNAME);
      if (cname === undefined || qtype === QType.CNAME) {
        out.authorities.push(this.soa);
        return out;
      }
      out.answers.push(synth(cname));
      seen.add(name);
      const target = (cname.data as { target: string }).target.toLowerCase();
      if (!isSubdomain(target, this.origin)) {
        out.external = target;
        return out;
      }
      if (seen.has(target)) return out;
      name = target;
    }
    return out;
  }
}
