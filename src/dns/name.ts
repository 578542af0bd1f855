// Domain names: wire decoding with RFC 1035 pointers (guarded as RFC 9267 asks),
// presentation form with escapes, and label helpers.

export const MAX_NAME_WIRE = 255;
export const MAX_LABEL = 63;

export class NameError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'NameError';
  }
}

export interface DecodedName {
  name: string;
  /** Offset just after the name at its original position (after the first pointer, if any). */
  end: number;
}

/** How a label octet is written in text, as miekg/dns (and so CoreDNS) writes it. */
export const enum NameOctet {
  Plain = 0,
  /** `\` then the character: `. space ' @ ; ( ) " \`. */
  Backslash = 1,
  /** `\DDD`: below 0x20 or above 0x7e. */
  Decimal = 2,
}

/** NameOctet of every octet: the one escaping rule of every name shown as text. */
export const NAME_OCTET: Uint8Array = (() => {
  const t = new Uint8Array(256);
  for (let b = 0; b < 256; b++) if (b < 0x20 || b > 0x7e) t[b] = NameOctet.Decimal;
  for (const c of '. \'@;()"\\') t[c.charCodeAt(0)] = NameOctet.Backslash;
  return t;
})();

const DECIMAL = Array.from({ length: 256 }, (_, b) => '\\' + String(b).padStart(3, '0'));

/** A label's octets in presentation form (miekg/dns's rules, so log lines match CoreDNS's). */
export function labelToString(buf: Buffer, start: number, len: number): string {
  let plain = true;
  for (let i = start; i < start + len; i++) {
    if (NAME_OCTET[buf[i]!] !== NameOctet.Plain) {
      plain = false;
      break;
    }
  }
  if (plain) return buf.latin1Slice(start, start + len);
  let s = '';
  for (let i = start; i < start + len; i++) {
    const b = buf[i]!;
    const how = NAME_OCTET[b];
    if (how === NameOctet.Plain) s += String.fromCharCode(b);
    else if (how === NameOctet.Backslash) s += '\\' + String.fromCharCode(b);
    else s += DECIMAL[b];
  }
  return s;
}

/** A TXT character-string (octets as a latin1 string) quoted as miekg/dns writes it: `"` and `\` escaped, octets outside 0x20-0x7e as \DDD. */
export function quotedCharacterString(s: string): string {
  let out = '"';
  for (let i = 0; i < s.length; i++) {
    const b = s.charCodeAt(i) & 0xff;
    if (b === 0x22 || b === 0x5c) out += '\\' + String.fromCharCode(b);
    else if (b < 0x20 || b > 0x7e) out += DECIMAL[b];
    else out += String.fromCharCode(b);
  }
  return out + '"';
}

/**
 * Reads a possibly compressed name at `offset`. Pointers must point strictly backwards
 * (so loops are impossible) and the expanded name may not exceed 255 octets.
 */
export function decodeName(buf: Buffer, offset: number): DecodedName {
  let pos = offset;
  let end = -1;
  let wireLen = 0;
  let name = '';
  // Any pointer must go below the lowest position visited so far: that bounds the walk.
  let floor = offset;
  for (;;) {
    if (pos >= buf.length) throw new NameError('name runs past the end of the message');
    const len = buf[pos]!;
    if (len === 0) {
      if (end < 0) end = pos + 1;
      break;
    }
    const kind = len & 0xc0;
    if (kind === 0xc0) {
      if (pos + 1 >= buf.length) throw new NameError('compression pointer runs past the end');
      const ptr = ((len & 0x3f) << 8) | buf[pos + 1]!;
      if (end < 0) end = pos + 2;
      if (ptr >= floor) throw new NameError('compression pointer does not point backwards');
      floor = ptr;
      pos = ptr;
      continue;
    }
    if (kind !== 0) throw new NameError('unsupported label type');
    if (pos + 1 + len > buf.length) throw new NameError('label runs past the end of the message');
    wireLen += 1 + len;
    if (wireLen + 1 > MAX_NAME_WIRE) throw new NameError('name longer than 255 octets');
    name += labelToString(buf, pos + 1, len) + '.';
    pos += 1 + len;
  }
  return { name: name === '' ? '.' : name, end };
}

/** Skips a name without building it (same checks on the part at `offset`, pointers not followed). */
export function skipName(buf: Buffer, offset: number): number {
  let pos = offset;
  let wireLen = 0;
  for (;;) {
    if (pos >= buf.length) throw new NameError('name runs past the end of the message');
    const len = buf[pos]!;
    if (len === 0) return pos + 1;
    if ((len & 0xc0) === 0xc0) {
      if (pos + 1 >= buf.length) throw new NameError('compression pointer runs past the end');
      return pos + 2;
    }
    if ((len & 0xc0) !== 0) throw new NameError('unsupported label type');
    wireLen += 1 + len;
    if (wireLen + 1 > MAX_NAME_WIRE) throw new NameError('name longer than 255 octets');
    pos += 1 + len;
  }
}

/**
 * Splits a presentation-form name into wire labels (escapes `\.`, `\\` and `\DDD` honoured).
 * Throws on an empty label, a label over 63 octets or a name over 255.
 */
export function nameToLabels(name: string): Buffer[] {
  if (name === '.' || name === '') return [];
  const labels: Buffer[] = [];
  if (name.indexOf('\\') < 0) {
    const parts = name.endsWith('.') ? name.slice(0, -1).split('.') : name.split('.');
    let total = 1;
    for (const p of parts) {
      const b = Buffer.from(p, 'latin1');
      if (b.length === 0) throw new NameError(`empty label in "${name}"`);
      if (b.length > MAX_LABEL) throw new NameError(`label longer than 63 octets in "${name}"`);
      total += b.length + 1;
      labels.push(b);
    }
    if (total > MAX_NAME_WIRE) throw new NameError(`name longer than 255 octets: "${name.slice(0, 40)}..."`);
    return labels;
  }
  let cur: number[] = [];
  let total = 1;
  const flush = () => {
    if (cur.length === 0) throw new NameError(`empty label in "${name}"`);
    if (cur.length > MAX_LABEL) throw new NameError(`label longer than 63 octets in "${name}"`);
    total += cur.length + 1;
    labels.push(Buffer.from(cur));
    cur = [];
  };
  for (let i = 0; i < name.length; i++) {
    const c = name.charCodeAt(i);
    if (c === 0x5c) {
      const n1 = name.charCodeAt(i + 1);
      if (n1 >= 0x30 && n1 <= 0x39 && i + 3 < name.length) {
        const d = name.slice(i + 1, i + 4);
        if (/^\d{3}$/.test(d)) {
          const v = Number(d);
          if (v > 255) throw new NameError(`bad escape \\${d} in "${name}"`);
          cur.push(v);
          i += 3;
          continue;
        }
      }
      if (i + 1 >= name.length) throw new NameError(`trailing backslash in "${name}"`);
      cur.push(name.charCodeAt(i + 1) & 0xff);
      i += 1;
    } else if (c === 0x2e) {
      flush();
    } else {
      cur.push(c & 0xff);
    }
  }
  if (cur.length > 0) flush();
  if (total > MAX_NAME_WIRE) throw new NameError(`name longer than 255 octets: "${name.slice(0, 40)}..."`);
  return labels;
}

/** Makes a name fully qualified (trailing dot) and lowercased, as zones are stored. */
export function canonicalZone(name: string): string {
  let n = name.trim().toLowerCase();
  if (n === '' || n === '.') return '.';
  if (!n.endsWith('.')) n += '.';
  return n;
}

/** True when `name` equals `zone` or lies under it; both lowercased and fully qualified. */
export function isSubdomain(name: string, zone: string): boolean {
  if (zone === '.') return true;
  if (name.length < zone.length) return false;
  if (name.length === zone.length) return name === zone;
  return name.endsWith(zone) && name.charCodeAt(name.length - zone.length - 1) === 0x2e;
}
