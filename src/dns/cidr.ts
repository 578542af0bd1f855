// Address ranges for `net`: an IP or CIDR in either family, matched against a client address.

import { parseIP, unmappedIP } from './ip.js';

export interface Cidr {
  readonly bytes: Buffer;
  readonly bits: number;
}

/** "10.0.0.0/8", "fd00::/8", "192.168.1.1" (a /32): null when it is neither. */
export function parseCidr(text: string): Cidr | null {
  const slash = text.indexOf('/');
  const ip = parseIP(slash < 0 ? text : text.slice(0, slash));
  if (ip === null) return null;
  const max = ip.length * 8;
  if (slash < 0) return { bytes: ip, bits: max };
  const b = text.slice(slash + 1);
  if (!/^\d{1,3}$/.test(b) || Number(b) > max) return null;
  return { bytes: ip, bits: Number(b) };
}

/** The client's address as bytes; an IPv4-mapped IPv6 address counts as IPv4. */
export function clientBytes(address: string): Buffer | null {
  return parseIP(unmappedIP(address));
}

export function cidrContains(c: Cidr, ip: Buffer): boolean {
  if (ip.length !== c.bytes.length) return false;
  const full = c.bits >> 3;
  for (let i = 0; i < full; i++) if (ip[i] !== c.bytes[i]) return false;
  const rest = c.bits & 7;
  if (rest === 0) return true;
  const mask = (0xff << (8 - rest)) & 0xff;
  return (ip[full]! & mask) === (c.bytes[full]! & mask);
}
