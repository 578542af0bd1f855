// IP address text <-> bytes, without allocation-heavy helpers on the hot path.
import { isIPv4, isIPv6 } from 'node:net';

export function parseIPv4(s: string): Buffer | null {
  if (!isIPv4(s)) return null;
  const b = Buffer.allocUnsafe(4);
  const parts = s.split('.');
  for (let i = 0; i < 4; i++) b[i] = Number(parts[i]);
  return b;
}

/** Parses an IPv6 address (with an optional embedded IPv4 tail); null when invalid. */
export function parseIPv6(input: string): Buffer | null {
  const pct = input.indexOf('%');
  const s = pct >= 0 ? input.slice(0, pct) : input;
  if (!isIPv6(s)) return null;
  const out = Buffer.alloc(16);
  let head = s;
  let v4: Buffer | null = null;
  const lastColon = s.lastIndexOf(':');
  if (s.indexOf('.', lastColon) > 0) {
    v4 = parseIPv4(s.slice(lastColon + 1));
    if (!v4) return null;
    head = s.slice(0, lastColon + 1) + '0:0';
  }
  const dbl = head.indexOf('::');
  let left: string[];
  let right: string[];
  if (dbl >= 0) {
    left = head.slice(0, dbl) === '' ? [] : head.slice(0, dbl).split(':');
    right = head.slice(dbl + 2) === '' ? [] : head.slice(dbl + 2).split(':');
  } else {
    left = head.split(':');
    right = [];
  }
  const groups = new Array<number>(8).fill(0);
  for (let i = 0; i < left.length; i++) groups[i] = parseInt(left[i]!, 16);
  for (let i = 0; i < right.length; i++) groups[8 - right.length + i] = parseInt(right[i]!, 16);
  for (let i = 0; i < 8; i++) out.writeUInt16BE(groups[i]!, i * 2);
  if (v4) v4.copy(out, 12);
  return out;
}

export function parseIP(s: string): Buffer | null {
  return s.indexOf(':') >= 0 ? parseIPv6(s) : parseIPv4(s);
}

export function formatIPv4(b: Buffer, off = 0): string {
  return `${b[off]}.${b[off + 1]}.${b[off + 2]}.${b[off + 3]}`;
}

/** RFC 5952 canonical form: lowercase, longest run of zero groups (length >= 2) as "::". */
export function formatIPv6(b: Buffer, off = 0): string {
  const g: number[] = [];
  for (let i = 0; i < 8; i++) g.push(b.readUInt16BE(off + i * 2));
  let bestStart = -1;
  let bestLen = 0;
  for (let i = 0; i < 8;) {
    if (g[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && g[j] === 0) j++;
    if (j - i > bestLen && j - i >= 2) {
      bestStart = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = (x: number) => x.toString(16);
  if (bestStart < 0) return g.map(hex).join(':');
  const a = g.slice(0, bestStart).map(hex).join(':');
  const z = g
    .slice(bestStart + bestLen)
    .map(hex)
    .join(':');
  return `${a}::${z}`;
}

/** Canonical text form of an address, or null when it is not an IP address. */
export function canonicalIP(s: string): string | null {
  if (s.indexOf(':') >= 0) {
    const b = parseIPv6(s);
    return b ? formatIPv6(b) : null;
  }
  return isIPv4(s) ? s.split('.').map(Number).join('.') : null;
}

/** An IPv4-mapped IPv6 address (`::ffff:10.0.0.1`, how a dual-stack socket names an IPv4 peer) as plain IPv4. */
export function unmappedIP(address: string): string {
  return address.startsWith('::ffff:') && address.indexOf('.') > 0 ? address.slice(7) : address;
}
