// Reverse-zone helpers: IP <-> in-addr.arpa / ip6.arpa names, and CIDR ->
// reverse zone(s) split on octet (IPv4) or nibble (IPv6) boundaries, the way
// CoreDNS expands a CIDR server-block key.

const V4_SUFFIX = 'in-addr.arpa.';
const V6_SUFFIX = 'ip6.arpa.';

/** Parses a dotted-quad IPv4 address into 4 bytes; null when invalid (leading zeros rejected). */
export function parseIPv4(s: string): Uint8Array | null {
  const parts = s.split('.');
  if (parts.length !== 4) return null;
  const out = new Uint8Array(4);
  for (let i = 0; i < 4; i++) {
    const p = parts[i]!;
    if (!/^(0|[1-9][0-9]{0,2})$/.test(p)) return null;
    const v = Number(p);
    if (v > 255) return null;
    out[i] = v;
  }
  return out;
}

/** Parses an IPv6 address (with optional `::` and trailing dotted IPv4) into 16 bytes; null when invalid. */
export function parseIPv6(s: string): Uint8Array | null {
  if (s.length === 0 || s.includes('%')) return null;
  let head: string[];
  let tail: string[];
  const dbl = s.indexOf('::');
  if (dbl !== -1) {
    if (s.indexOf('::', dbl + 1) !== -1) return null;
    const h = s.slice(0, dbl);
    const t = s.slice(dbl + 2);
    head = h === '' ? [] : h.split(':');
    tail = t === '' ? [] : t.split(':');
  } else {
    head = s.split(':');
    tail = [];
  }
  // Expand a trailing embedded IPv4 address into two 16-bit groups.
  const expandV4 = (groups: string[]): string[] | null => {
    if (groups.length === 0) return groups;
    const last = groups[groups.length - 1]!;
    if (!last.includes('.')) return groups;
    const v4 = parseIPv4(last);
    if (!v4) return null;
    return [...groups.slice(0, -1), ((v4[0]! << 8) | v4[1]!).toString(16), ((v4[2]! << 8) | v4[3]!).toString(16)];
  };
  if (tail.length > 0 || dbl !== -1) {
    const t = expandV4(tail);
    if (!t) return null;
    tail = t;
  } else {
    const h = expandV4(head);
    if (!h) return null;
    head = h;
  }
  for (const g of [...head, ...tail]) {
    if (!/^[0-9a-fA-F]{1,4}$/.test(g)) return null;
  }
  const groups: number[] = [];
  if (dbl !== -1) {
    const missing = 8 - head.length - tail.length;
    if (missing < 1) return null;
    for (const g of head) groups.push(parseInt(g, 16));
    for (let i = 0; i < missing; i++) groups.push(0);
    for (const g of tail) groups.push(parseInt(g, 16));
  } else {
    if (head.length !== 8) return null;
    for (const g of head) groups.push(parseInt(g, 16));
  }
  const out = new Uint8Array(16);
  for (let i = 0; i < 8; i++) {
    out[2 * i] = groups[i]! >> 8;
    out[2 * i + 1] = groups[i]! & 0xff;
  }
  return out;
}

/**
 * Formats 16 bytes in the canonical RFC 5952 form (lowercase, no leading
 * zeros, the first longest run of two or more zero groups compressed), the same
 * text WHATWG URL / Node produce, e.g. `1234:abcd::1`.
 */
export function formatIPv6(b: Uint8Array): string {
  const groups: number[] = [];
  for (let i = 0; i < 8; i++) groups.push((b[2 * i]! << 8) | b[2 * i + 1]!);
  let bestStart = -1;
  let bestLen = 0;
  for (let i = 0; i < 8;) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLen) {
      bestStart = i;
      bestLen = j - i;
    }
    i = j;
  }
  if (bestLen < 2) return groups.map((g) => g.toString(16)).join(':');
  const left = groups
    .slice(0, bestStart)
    .map((g) => g.toString(16))
    .join(':');
  const right = groups
    .slice(bestStart + bestLen)
    .map((g) => g.toString(16))
    .join(':');
  return `${left}::${right}`;
}

function fqdnLower(name: string): string {
  const l = name.toLowerCase();
  return l.endsWith('.') ? l : `${l}.`;
}

/** `1.2.3.4` → `4.3.2.1.in-addr.arpa.`; IPv6 → 32 nibbles + `.ip6.arpa.`. Throws on an invalid address. */
export function ipToReverseName(ip: string): string {
  const v4 = parseIPv4(ip);
  if (v4) return `${v4[3]}.${v4[2]}.${v4[1]}.${v4[0]}.${V4_SUFFIX}`;
  const v6 = parseIPv6(ip);
  if (v6) {
    const nibbles: string[] = [];
    for (let i = 15; i >= 0; i--) {
      nibbles.push((v6[i]! & 0x0f).toString(16), (v6[i]! >> 4).toString(16));
    }
    return `${nibbles.join('.')}.${V6_SUFFIX}`;
  }
  throw new Error(`invalid IP address: '${ip}'`);
}

/**
 * Inverse of ipToReverseName. Returns null unless `name` is a complete reverse
 * name (4 decimal labels under in-addr.arpa, or 32 hex nibbles under ip6.arpa).
 * Case-insensitive; the trailing dot is optional. IPv6 is returned in canonical form.
 */
export function reverseNameToIp(name: string): string | null {
  const n = fqdnLower(name);
  if (n.endsWith(`.${V4_SUFFIX}`)) {
    const labels = n.slice(0, -(V4_SUFFIX.length + 1)).split('.');
    if (labels.length !== 4) return null;
    const ip = labels.reverse().join('.');
    return parseIPv4(ip) ? ip : null;
  }
  if (n.endsWith(`.${V6_SUFFIX}`)) {
    const labels = n.slice(0, -(V6_SUFFIX.length + 1)).split('.');
    if (labels.length !== 32) return null;
    const b = new Uint8Array(16);
    for (let i = 0; i < 32; i++) {
      const l = labels[31 - i]!;
      if (!/^[0-9a-f]$/.test(l)) return null;
      const v = parseInt(l, 16);
      if (i % 2 === 0) b[i >> 1] = v << 4;
      else b[i >> 1]! |= v;
    }
    return formatIPv6(b);
  }
  return null;
}

/** True when `zone` is in-addr.arpa./ip6.arpa. or a name under one of them (case-insensitive, dot optional). */
export function isReverseZone(zone: string): boolean {
  const z = fqdnLower(zone);
  return z === V4_SUFFIX || z.endsWith(`.${V4_SUFFIX}`) || z === V6_SUFFIX || z.endsWith(`.${V6_SUFFIX}`);
}

/**
 * Expands a CIDR into the reverse zones that cover it, split on octet (IPv4)
 * or nibble (IPv6) boundaries: `10.0.0.0/24` → [`0.0.10.in-addr.arpa.`],
 * `10.0.0.0/17` → 128 /24 zones, `fd00::/64` → one 16-nibble zone. Host bits
 * are masked off. Throws on an invalid CIDR.
 */
export function cidrToReverseZones(cidr: string): string[] {
  const slash = cidr.indexOf('/');
  if (slash === -1) throw new Error(`invalid CIDR: '${cidr}'`);
  const addr = cidr.slice(0, slash);
  const bitsText = cidr.slice(slash + 1);
  if (!/^(0|[1-9][0-9]{0,2})$/.test(bitsText)) throw new Error(`invalid CIDR: '${cidr}'`);
  const bits = Number(bitsText);

  const v4 = parseIPv4(addr);
  const bytes = v4 ?? parseIPv6(addr);
  if (!bytes) throw new Error(`invalid CIDR: '${cidr}'`);
  const isV4 = v4 !== null;
  const total = isV4 ? 32 : 128;
  if (bits > total) throw new Error(`invalid CIDR: '${cidr}'`);

  // Units: octets (8 bits) for v4, nibbles (4 bits) for v6.
  const unitBits = isV4 ? 8 : 4;
  const unitCount = total / unitBits;
  const units: number[] = [];
  for (let i = 0; i < unitCount; i++) {
    if (isV4) units.push(bytes[i]!);
    else units.push(i % 2 === 0 ? bytes[i >> 1]! >> 4 : bytes[i >> 1]! & 0x0f);
  }
  // Mask host bits.
  for (let i = 0; i < unitCount; i++) {
    const start = i * unitBits;
    if (start >= bits) units[i] = 0;
    else if (start + unitBits > bits) {
      const keep = bits - start;
      const mask = ((1 << keep) - 1) << (unitBits - keep);
      units[i]! &= mask;
    }
  }
  const roundedUnits = Math.ceil(bits / unitBits);
  const extraBits = roundedUnits * unitBits - bits; // free bits in the last (partial) unit
  const suffix = isV4 ? V4_SUFFIX : V6_SUFFIX;
  const fmt = (v: number): string => (isV4 ? String(v) : v.toString(16));
  const zones: string[] = [];
  const count = 1 << extraBits;
  for (let k = 0; k < count; k++) {
    const labels = units.slice(0, roundedUnits);
    if (roundedUnits > 0) labels[roundedUnits - 1]! += k;
    const prefix = labels.reverse().map(fmt).join('.');
    zones.push(prefix === '' ? suffix : `${prefix}.${suffix}`);
  }
  return zones;
}
