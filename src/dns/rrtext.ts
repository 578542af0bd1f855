// Resource records in master-file presentation form (RFC 1035 5.1), as miekg/dns reads them:
// the RDATA of every type the file plugin and the template plugin know (and RFC 3597's
// `\# LENGTH HEX` for any type), BIND TTL units, class names, and one whole record as
// miekg/dns's NewRR reads it: `NAME [TTL] [CLASS] TYPE RDATA`, TTL and CLASS in either order,
// relative names completed with the origin.

import { QClass, QType, typeFromString } from './constants.js';
import { canonicalIP, parseIPv4, parseIPv6 } from './ip.js';
import type { RecordData, ResourceRecord } from './message.js';
import { nameToLabels } from './name.js';

export class RecordTextError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RecordTextError';
  }
}

/** miekg/dns's default TTL for a record that states none. */
const DEFAULT_TTL = 3600;

/** Splits into fields: blanks separate, "quoted strings" stay one field (quotes kept), `;` starts a comment. */
function fields(text: string): string[] {
  const out: string[] = [];
  let i = 0;
  const n = text.length;
  while (i < n) {
    const c = text[i]!;
    if (c === ' ' || c === '\t' || c === '\n' || c === '\r' || c === '(' || c === ')') {
      i++;
      continue;
    }
    if (c === ';') break;
    let j = i;
    if (c === '"') {
      j++;
      while (j < n && text[j] !== '"') j += text[j] === '\\' ? 2 : 1;
      if (j >= n) throw new RecordTextError('unterminated quoted string');
      j++;
    } else {
      while (j < n && !' \t\n\r;()'.includes(text[j]!)) j += text[j] === '\\' ? 2 : 1;
    }
    out.push(text.slice(i, j));
    i = j;
  }
  return out;
}

function absolute(name: string, origin: string): string {
  if (name === '@') return origin;
  if (name.endsWith('.') && !name.endsWith('\\.')) return name;
  return origin === '.' ? `${name}.` : `${name}.${origin}`;
}

function checkName(name: string): string {
  try {
    nameToLabels(name);
  } catch (e) {
    throw new RecordTextError((e as Error).message);
  }
  return name;
}

const CLASSES: ReadonlyMap<string, number> = new Map([
  ['IN', QClass.IN],
  ['CH', QClass.CH],
  ['CS', 2],
  ['HS', QClass.HS],
  ['NONE', QClass.NONE],
  ['ANY', QClass.ANY],
]);

/** IN, CH, CS, HS, NONE, ANY or CLASS123; undefined when it is not a class. */
export function classFromText(t: string): number | undefined {
  const up = t.toUpperCase();
  const c = CLASSES.get(up);
  if (c !== undefined) return c;
  const m = /^CLASS(\d{1,5})$/.exec(up);
  return m && Number(m[1]) <= 0xffff ? Number(m[1]) : undefined;
}

/** Parses one record. Throws RecordTextError saying what is wrong. */
export function parseRecordText(text: string, origin = '.'): ResourceRecord {
  const f = fields(text);
  if (f.length < 2) throw new RecordTextError(`not a resource record: "${text}"`);
  const name = checkName(absolute(f[0]!, origin));
  let i = 1;
  let ttl = DEFAULT_TTL;
  let klass: number = QClass.IN;
  let type: number | undefined;
  for (let k = 0; k < 2 && i < f.length; k++) {
    const t = f[i]!;
    const asTtl = /^\d/.test(t) ? parseTtl(t) : null;
    if (asTtl !== null) {
      ttl = asTtl;
      i++;
    } else if (classFromText(t) !== undefined && typeFromString(t) === undefined) {
      klass = classFromText(t)!;
      i++;
    }
  }
  if (i < f.length) type = typeFromString(f[i]!);
  if (type === undefined) throw new RecordTextError(`unknown record type "${f[i] ?? ''}"`);
  const rd = f
    .slice(i + 1)
    .map((x): RdataField => (x.startsWith('"') ? { text: x.slice(1, -1), quoted: true } : { text: x, quoted: false }));
  const fail = (what: string): never => {
    throw new RecordTextError(what);
  };
  return { name, type, class: klass, ttl, data: parseRdata(type, rd, (n) => checkName(absolute(n, origin)), fail) };
}

/** BIND-style TTLs: "3600", "1h", "1h30m", "2w", "1d". null when it is not one. */
export function parseTtl(text: string): number | null {
  if (/^\d+$/.test(text)) return Number(text) >>> 0;
  const re = /(\d+)([smhdw])/giy;
  let total = 0;
  let end = 0;
  let m: RegExpExecArray | null;
  while ((m = re.exec(text)) !== null) {
    const mult = { s: 1, m: 60, h: 3600, d: 86400, w: 604800 }[m[2]!.toLowerCase() as 's' | 'm' | 'h' | 'd' | 'w'];
    total += Number(m[1]) * mult;
    end = re.lastIndex;
  }
  return end === text.length && end > 0 ? total >>> 0 : null;
}

/** One RDATA field: its text without the quotes around it (escapes kept), and whether it was quoted. */
export interface RdataField {
  text: string;
  quoted: boolean;
}

/** Resolves `\DDD` and `\X` escapes of a character-string into its bytes (latin1). */
function unescape(s: string): string {
  if (!s.includes('\\')) return s;
  let out = '';
  for (let i = 0; i < s.length; i++) {
    const c = s[i]!;
    if (c !== '\\') {
      out += c;
      continue;
    }
    const d = s.slice(i + 1, i + 4);
    if (/^\d{3}$/.test(d)) {
      out += String.fromCharCode(Number(d) & 0xff);
      i += 3;
    } else if (i + 1 < s.length) {
      out += s[i + 1]!;
      i++;
    }
  }
  return out;
}

/** A TXT field as character-strings: one longer than 255 octets is split, as miekg/dns does. */
function characterStrings(field: string): string[] {
  const s = unescape(field);
  if (s.length <= 255) return [s];
  const out: string[] = [];
  for (let i = 0; i < s.length; i += 255) out.push(s.slice(i, i + 255));
  return out;
}

const NAME_TYPES: ReadonlySet<number> = new Set([QType.CNAME, QType.NS, QType.PTR]);

/**
 * The RDATA of a record of `type` from its fields. `name` completes a domain-name field with the
 * origin; `fail` throws. Messages never quote a field (a zone file may be a secret the user
 * did not mean to show).
 */
export function parseRdata(
  type: number,
  w: readonly RdataField[],
  name: (n: string) => string,
  fail: (what: string) => never,
): RecordData {
  const text = (i: number): string => {
    const x = w[i];
    if (x === undefined) fail(`${typeName(type)} RDATA is missing a field`);
    return x.text;
  };
  const u = (i: number, bits: 16 | 32): number => {
    const s = text(i);
    if (!/^\d+$/.test(s) || Number(s) >= 2 ** bits) fail(`field ${i + 1} is not a ${bits}-bit number`);
    return Number(s);
  };
  const count = (n: number) => {
    if (w.length !== n) fail(`${typeName(type)} RDATA needs ${n} fields, has ${w.length}`);
  };
  if (w[0] !== undefined && !w[0].quoted && w[0].text === '\\#') return { raw: generic(w, fail) };
  switch (type) {
    case QType.A: {
      count(1);
      if (parseIPv4(text(0)) === null) fail('not an IPv4 address');
      return { address: text(0) };
    }
    case QType.AAAA: {
      count(1);
      if (parseIPv6(text(0)) === null) fail('not an IPv6 address');
      return { address: canonicalIP(text(0)) ?? text(0) };
    }
    case QType.MX:
      count(2);
      return { preference: u(0, 16), exchange: name(text(1)) };
    case QType.SRV:
      count(4);
      return { priority: u(0, 16), weight: u(1, 16), port: u(2, 16), target: name(text(3)) };
    case QType.TXT:
      if (w.length === 0) fail('TXT RDATA is empty');
      return { texts: w.flatMap((x) => characterStrings(x.text)) };
    case QType.SOA: {
      count(7);
      // The four timers take TTL units (1h, 1w), as in BIND and miekg/dns; the serial does not.
      const t = (i: number) => {
        const v = parseTtl(text(i));
        if (v === null) fail(`SOA field ${i + 1} is not a number`);
        return v;
      };
      return {
        mname: name(text(0)),
        rname: name(text(1)),
        serial: u(2, 32),
        refresh: t(3),
        retry: t(4),
        expire: t(5),
        minimum: t(6),
      };
    }
    default:
      if (NAME_TYPES.has(type)) {
        count(1);
        return { target: name(text(0)) };
      }
      fail(`type ${typeName(type)} needs the RFC 3597 form "\\# LENGTH HEX"`);
  }
}

function typeName(type: number): string {
  for (const [k, v] of Object.entries(QType)) if (v === type) return k;
  return `TYPE${type}`;
}

function generic(w: readonly RdataField[], fail: (what: string) => never): Buffer {
  const len = w[1] ? Number(w[1].text) : NaN;
  if (!Number.isInteger(len) || len < 0 || len > 65535) fail('\\# needs a length');
  const hex = w
    .slice(2)
    .map((x) => x.text)
    .join('');
  if (!/^[0-9a-fA-F]*$/.test(hex) || hex.length !== len * 2) fail(`\\# ${len}: the data is not ${len} octets of hex`);
  return Buffer.from(hex, 'hex');
}
