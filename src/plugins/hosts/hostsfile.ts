// The hosts-format table: names to addresses and addresses to names, plus the answers
// prepared as wire records so a lookup is one Map get and one copy.

import { QClass, QType } from '../../dns/constants.js';
import { WireWriter } from '../../dns/message.js';
import { canonicalIP, parseIPv4, parseIPv6 } from '../../dns/ip.js';
import { ipToReverseName } from '../../dns/reverse.js';
import { isSubdomain } from '../../dns/name.js';

export interface HostsEntry {
  v4: string[];
  v6: string[];
}

/** Records prepared for one owner name: bytes to append after the question, and their count. */
export interface PreparedRecords {
  bytes: Buffer;
  count: number;
}

export interface PreparedName {
  a: PreparedRecords | null;
  aaaa: PreparedRecords | null;
}

export interface ParsedLine {
  ip: string;
  names: string[];
}

/** Parses hosts-format text: "IP name [name...]  # comment". Bad lines are reported, not fatal. */
export function parseHostsText(text: string, onBad?: (line: number, why: string) => void): ParsedLine[] {
  const out: ParsedLine[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    let l = lines[i]!;
    const hash = l.indexOf('#');
    if (hash >= 0) l = l.slice(0, hash);
    const f = l.trim().split(/\s+/).filter(Boolean);
    if (f.length === 0) continue;
    if (f.length < 2) {
      onBad?.(i + 1, 'no name after the address');
      continue;
    }
    const ip = canonicalIP(f[0]!);
    if (!ip) {
      onBad?.(i + 1, 'the first field is not an IP address');
      continue;
    }
    out.push({ ip, names: f.slice(1).map((n) => (n.endsWith('.') ? n : n + '.').toLowerCase()) });
  }
  return out;
}

/** One owner-name-relative record set: owner is the pointer to the question name (c0 0c). */
function prepareAddresses(ips: string[], type: number, ttl: number): PreparedRecords | null {
  if (ips.length === 0) return null;
  const size = type === QType.A ? 4 : 16;
  const buf = Buffer.allocUnsafe(ips.length * (12 + size));
  let p = 0;
  for (const ip of ips) {
    const b = type === QType.A ? parseIPv4(ip) : parseIPv6(ip);
    if (!b) continue;
    buf.writeUInt16BE(0xc00c, p);
    buf.writeUInt16BE(type, p + 2);
    buf.writeUInt16BE(QClass.IN, p + 4);
    buf.writeUInt32BE(ttl, p + 6);
    buf.writeUInt16BE(size, p + 10);
    b.copy(buf, p + 12);
    p += 12 + size;
  }
  return { bytes: buf.subarray(0, p), count: ips.length };
}

function preparePtr(names: string[], ttl: number): PreparedRecords {
  const w = new WireWriter(64 * names.length);
  for (const n of names) {
    w.u16(0xc00c);
    w.u16(QType.PTR);
    w.u16(QClass.IN);
    w.u32(ttl);
    const at = w.pos;
    w.u16(0);
    w.name(n, false);
    w.buf.writeUInt16BE(w.pos - at - 2, at);
  }
  return { bytes: Buffer.from(w.result()), count: names.length };
}

export class HostsTable {
  readonly byName = new Map<string, PreparedName>();
  readonly byReverse = new Map<string, PreparedRecords>();
  size = 0;

  /** Builds the table from entries in order (inline first, as CoreDNS does). */
  static build(lines: ParsedLine[], ttl: number, reverse: boolean, zones: string[]): HostsTable {
    const t = new HostsTable();
    const names = new Map<string, HostsEntry>();
    const addrs = new Map<string, string[]>();
    for (const { ip, names: ns } of lines) {
      const v6 = ip.indexOf(':') >= 0;
      for (const n of ns) {
        if (!zones.some((z) => isSubdomain(n, z))) continue;
        let e = names.get(n);
        if (!e) names.set(n, (e = { v4: [], v6: [] }));
        const list = v6 ? e.v6 : e.v4;
        if (!list.includes(ip)) list.push(ip);
        let a = addrs.get(ip);
        if (!a) addrs.set(ip, (a = []));
        if (!a.includes(n)) a.push(n);
      }
    }
    for (const [n, e] of names) {
      t.byName.set(n, { a: prepareAddresses(e.v4, QType.A, ttl), aaaa: prepareAddresses(e.v6, QType.AAAA, ttl) });
    }
    if (reverse) for (const [ip, ns] of addrs) t.byReverse.set(ipToReverseName(ip), preparePtr(ns, ttl));
    t.size = names.size;
    return t;
  }
}
