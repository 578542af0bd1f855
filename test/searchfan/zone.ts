// A scriptable authoritative zone for FakeUpstream: names with A/AAAA/CNAME records, NXDOMAIN
// (with an SOA) for the rest, and per-name delays, forced rcodes, truncation or silence, so
// tests decide which candidate of a fan-out answers what, and when.

import { QClass, QType, Rcode } from '../../src/dns/constants.js';
import { decodeMessage, encodeMessage, type Message, type ResourceRecord } from '../../src/dns/message.js';
import type { Behaviour, Received } from '../forward/upstreams.js';

export interface ZoneRecord {
  a?: string[];
  aaaa?: string[];
  cname?: string;
  ttl?: number;
}

export interface ZoneOptions {
  /** Lowercase FQDN → records. */
  records: Record<string, ZoneRecord>;
  /** Milliseconds before answering this name (default 0). */
  delayMs?: (name: string, q: Received) => number;
  /** Answer with this rcode instead (SERVFAIL, REFUSED...). */
  rcode?: (name: string) => number | undefined;
  /** Never answer this name. */
  silent?: (name: string) => boolean;
  /** Over UDP, answer this name with TC set and no records. */
  truncate?: (name: string) => boolean;
  /** SOA MINIMUM (and SOA TTL) of negative answers; default 5, as CoreDNS's kubernetes plugin. */
  soaMinimum?: number;
}

function soa(minimum: number): ResourceRecord {
  return {
    name: 'test.',
    type: QType.SOA,
    class: QClass.IN,
    ttl: minimum,
    data: {
      mname: 'ns.test.',
      rname: 'hostmaster.test.',
      serial: 1,
      refresh: 7200,
      retry: 1800,
      expire: 86400,
      minimum,
    },
  };
}

/** The reply the zone gives to `raw` (a query), as the project's codec builds it. */
export function zoneReply(o: ZoneOptions, raw: Buffer, overUdp: boolean): Buffer {
  const q = decodeMessage(raw);
  const question = q.questions[0]!;
  const name = question.name.toLowerCase();
  const m: Message = {
    ...q,
    qr: true,
    ra: true,
    aa: true,
    answers: [],
    authorities: [],
    additionals: [],
    edns: q.edns ? { ...q.edns, options: [] } : null,
  };
  const forced = o.rcode?.(name);
  if (forced !== undefined) {
    m.rcode = forced;
    return encodeMessage(m);
  }
  if (overUdp && o.truncate?.(name)) {
    m.tc = true;
    return encodeMessage(m);
  }
  let owner = question.name;
  let rec = o.records[name];
  if (rec === undefined) {
    m.rcode = Rcode.NXDOMAIN;
    m.authorities.push(soa(o.soaMinimum ?? 5));
    return encodeMessage(m);
  }
  for (let hops = 0; rec !== undefined && hops < 8; hops++) {
    const ttl = rec.ttl ?? 30;
    if (rec.cname !== undefined) {
      m.answers.push({ name: owner, type: QType.CNAME, class: QClass.IN, ttl, data: { target: rec.cname } });
      owner = rec.cname;
      rec = o.records[rec.cname.toLowerCase()];
      continue;
    }
    if (question.type === QType.A)
      for (const a of rec.a ?? [])
        m.answers.push({ name: owner, type: QType.A, class: QClass.IN, ttl, data: { address: a } });
    if (question.type === QType.AAAA)
      for (const a of rec.aaaa ?? [])
        m.answers.push({ name: owner, type: QType.AAAA, class: QClass.IN, ttl, data: { address: a } });
    break;
  }
  if (m.answers.length === 0) m.authorities.push(soa(o.soaMinimum ?? 5));
  return encodeMessage(m);
}

/** A FakeUpstream behaviour serving the zone. */
export function zone(o: ZoneOptions): Behaviour {
  return (q, r) => {
    const name = q.msg.questions[0]!.name.toLowerCase();
    if (o.silent?.(name)) return;
    const reply = zoneReply(o, q.raw, q.proto === 'udp');
    const delay = o.delayMs?.(name, q) ?? 0;
    if (delay <= 0) {
      r.send(reply);
      return;
    }
    const t = setTimeout(() => {
      try {
        r.send(reply);
      } catch {
        // The upstream was closed meanwhile (the test is over).
      }
    }, delay);
    t.unref();
  };
}

/** Names asked of an upstream, lowercased, in arrival order (health checks excluded). */
export function askedNames(received: readonly Received[]): string[] {
  return received.map((x) => x.msg.questions[0]!.name.toLowerCase());
}
