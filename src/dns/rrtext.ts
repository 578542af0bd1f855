// One resource record in master-file presentation form (RFC 1035 5.1), as miekg/dns's NewRR
// reads it: `NAME [TTL] [CLASS] TYPE RDATA`, TTL and CLASS in either order, relative names
// completed with the origin, and RFC 3597's `\# LENGTH HEX` for any type.

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

function u(text: string | undefined, max: number, what: string): number {
  if (text === undefined || !/^\d+$/.test(text) || Number(text) > max)
    throw new RecordTextError(`bad ${what} "${text ?? ''}"`);
  return Number(text);
}

/** A TXT character-string: quotes removed, `\"`, `\\` and `\DDD` decoded. */
function characterString(f: string): string {
  const s = f.startsWith('"') ? f.slice(1, -1) : f;
  let out = '';
  for (let i = 0; i < s.length; i++) {
    if (s[i] !== '\\') {
      out += s[i];
      continue;
    }
    const d = /^\d{3}/.exec(s.slice(i + 1));
    if (d) {
      out += String.fromCharCode(Number(d[0]) & 0xff);
      i += 3;
    } else {
      out += s[i + 1] ?? '';
      i++;
    }
  }
  if (Buffer.byteLength(out, 'latin1') > 255) throw new RecordTextError('TXT string longer than 255 octets');
  return out;
}

const CLASSES: ReadonlyMap<string, number> = new Map([
  ['IN', QClass.IN],
  ['CH', QClass.CH],
  ['CS', 2],
  ['HS', QClass.HS],
  ['NONE', QClass.NONE],
  ['ANY', QClass.ANY],
]);

function classFromText(t: string): number | undefined {
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
    if (/^\d+$/.test(t)) {
      ttl = u(t, 0xffffffff, 'TTL');
      i++;
    } else if (classFromText(t) !== undefined && typeFromString(t) === undefined) {
      klass = classFromText(t)!;
      i++;
    }
  }
  if (i < f.length) type = typeFromString(f[i]!);
  if (type === undefined) throw new RecordTextError(`unknown record type "${f[i] ?? ''}"`);
  const rd = f.slice(i + 1);
  return { name, type, class: klass, ttl, data: rdata(type, rd, origin) };
}

function rdata(type: number, rd: string[], origin: string): RecordData {
  if (rd[0] === '\\#') {
    const len = u(rd[1], 0xffff, 'RDATA length');
    const hex = rd.slice(2).join('');
    if (!/^([0-9a-fA-F]{2})*$/.test(hex) || hex.length / 2 !== len)
      throw new RecordTextError('RFC 3597 RDATA does not match its length');
    return { raw: Buffer.from(hex, 'hex') };
  }
  const want = (n: number) => {
    if (rd.length !== n) throw new RecordTextError(`${rd.length} RDATA fields where ${n} are expected`);
  };
  switch (type) {
    case QType.A: {
      want(1);
      if (!parseIPv4(rd[0]!)) throw new RecordTextError(`bad IPv4 address "${rd[0]}"`);
      return { address: rd[0]! };
    }
    case QType.AAAA: {
      want(1);
      if (!parseIPv6(rd[0]!)) throw new RecordTextError(`bad IPv6 address "${rd[0]}"`);
      return { address: canonicalIP(rd[0]!)! };
    }
    case QType.CNAME:
    case QType.NS:
    case QType.PTR:
      want(1);
      return { target: checkName(absolute(rd[0]!, origin)) };
    case QType.MX:
      want(2);
      return { preference: u(rd[0], 0xffff, 'MX preference'), exchange: checkName(absolute(rd[1]!, origin)) };
    case QType.SRV:
      want(4);
      return {
        priority: u(rd[0], 0xffff, 'SRV priority'),
        weight: u(rd[1], 0xffff, 'SRV weight'),
        port: u(rd[2], 0xffff, 'SRV port'),
        target: checkName(absolute(rd[3]!, origin)),
      };
    case QType.TXT:
      if (rd.length === 0) throw new RecordTextError('TXT record without strings');
      return { texts: rd.map(characterString) };
    case QType.SOA:
      want(7);
      return {
        mname: checkName(absolute(rd[0]!, origin)),
        rname: checkName(absolute(rd[1]!, origin)),
        serial: u(rd[2], 0xffffffff, 'SOA serial'),
        refresh: u(rd[3], 0xffffffff, 'SOA refresh'),
        retry: u(rd[4], 0xffffffff, 'SOA retry'),
        expire: u(rd[5], 0xffffffff, 'SOA expire'),
        minimum: u(rd[6], 0xffffffff, 'SOA minimum'),
      };
    default:
      throw new RecordTextError(`type ${type} needs the RFC 3597 form: \\# LENGTH HEX`);
  }
}
