// `forward . /etc/resolv.conf`: the nameserver lines of a resolv.conf file.

import { canonicalIP } from '../../dns/ip.js';

export interface ResolvConfResult {
  nameservers: string[];
  /** Lines that were not usable, with why (reported as warnings). */
  problems: Array<{ line: number; why: string }>;
}

/** Reads `nameserver ADDR` lines; comments start with # or ;. IPv6 zones (%eth0) are kept. */
export function parseResolvConf(text: string): ResolvConfResult {
  const nameservers: string[] = [];
  const problems: ResolvConfResult['problems'] = [];
  const lines = text.split(/\r?\n/);
  for (let i = 0; i < lines.length; i++) {
    const fields = lines[i]!.replace(/[#;].*$/, '')
      .trim()
      .split(/\s+/);
    if (fields[0] !== 'nameserver') continue;
    const addr = fields[1];
    if (addr === undefined) {
      problems.push({ line: i + 1, why: 'nameserver without an address' });
      continue;
    }
    const pct = addr.indexOf('%');
    const ip = canonicalIP(pct >= 0 ? addr.slice(0, pct) : addr);
    if (ip === null) {
      problems.push({ line: i + 1, why: `"${addr}" is not an IP address` });
      continue;
    }
    nameservers.push(pct >= 0 ? ip + addr.slice(pct) : ip);
  }
  return { nameservers, problems };
}
