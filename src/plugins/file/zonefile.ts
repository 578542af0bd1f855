// RFC 1035 section 5 master files: $ORIGIN, $TTL, $INCLUDE, `@`, relative names, owner and TTL
// carried from the line before, ( ... ) across lines, quoted strings, comments, and RFC 3597's
// generic `\# LENGTH HEX` RDATA for any type. Errors name the file and line.

import { readFileSync } from 'node:fs';
import { dirname, isAbsolute, resolve } from 'node:path';
import { QClass, QType, typeFromString } from '../../dns/constants.js';
import type { RecordData, ResourceRecord } from '../../dns/message.js';
import { canonicalIP } from '../../dns/ip.js';
import { parseIPv4, parseIPv6 } from '../../dns/ip.js';

export class ZoneFileError extends Error {
  constructor(
    readonly file: string,
    readonly line: number,
    what: string,
  ) {
    super(`${file}:${line} - ${what}`);
    this.name = 'ZoneFileError';
  }
}

interface Word {
  text: string;
  quoted: boolean;
}

interface Entry {
  words: Word[];
  /** The line began with white space: the owner is the previous record's. */
  blankOwner: boolean;
  line: number;
}

/** Splits master-file text into entries (one per record, parentheses joined), words unescaped later. */
function entries(text: string, file: string): Entry[] {
  const out: Entry[] = [];
  let words: Word[] = [];
  let depth = 0;
  let blankOwner = false;
  let startLine = 1;
  let line = 1;
  let i = 0;
  const n = text.length;
  let atLineStart = true;
  const flush = () => {
    if (words.length) out.push({ words, blankOwner, line: startLine });
    words = [];
  };
  while (i < n) {
    const c = text[i]!;
    if (atLineStart && depth === 0) {
      flush();
      blankOwner = c === ' ' || c === '\t';
      startLine = line;
      atLineStart = false;
    }
    if (c === '\n') {
      line++;
      i++;
      atLineStart = true;
      continue;
    }
    if (c === ' ' || c === '\t' || c === '\r') {
      i++;
      continue;
    }
    if (c === ';') {
      while (i < n && text[i] !== '\n') i++;
      continue;
    }
    if (c === '(') {
      depth++;
      i++;
      continue;
    }
    if (c === ')') {
      if (depth === 0) throw new ZoneFileError(file, line, 'unbalanced ")"');
      depth--;
      i++;
      continue;
    }
    if (c === '"') {
      let s = '';
      i++;
      while (i < n && text[i] !== '"') {
        if (text[i] === '\\' && i + 1 < n) {
          s += text[i]! + text[i + 1]!;
          i += 2;
          continue;
        }
        if (text[i] === '\n') line++;
        s += text[i]!;
        i++;
      }
      if (i >= n) throw new ZoneFileError(file, line, 'unterminated quoted string');
      i++;
      words.push({ text: s, quoted: true });
      continue;
    }
    let s = '';
    while (i < n) {
      const d = text[i]!;
      if (d === '\\' && i + 1 < n) {
        s += d + text[i + 1]!;
        i += 2;
        continue;
      }
      if (d === ' ' || d === '\t' || d === '\r' || d === '\n' || d === ';' || d === '(' || d === ')' || d === '"')
        break;
      s += d;
      i++;
    }
    words.push({ text: s, quoted: false });
  }
  if (depth !== 0) throw new ZoneFileError(file, line, 'unbalanced "(": missing ")"');
  flush();
  return out;
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
      out += String.fromCharCode(Number(d));
      i += 3;
    } else if (i + 1 < s.length) {
      out += s[i + 1]!;
      i++;
    }
  }
  return out;
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

export interface ParsedZone {
  origin: string;
  records: ResourceRecord[];
}

interface State {
  origin: string;
  ttl: number | null;
  lastOwner: string | null;
  lastTtl: number | null;
  lastClass: number;
  depth: number;
}

/** Parses a master file for zone `origin` (a lowercase FQDN). Throws ZoneFileError. */
export function parseZoneFile(file: string, origin: string, text = readFileSync(file, 'utf8')): ParsedZone {
  const records: ResourceRecord[] = [];
  const st: State = { origin, ttl: null, lastOwner: null, lastTtl: null, lastClass: QClass.IN, depth: 0 };
  parseInto(file, text, st, records);
  return { origin, records };
}

function parseInto(file: string, text: string, st: State, out: ResourceRecord[]): void {
  const err = (line: number, what: string): never => {
    throw new ZoneFileError(file, line, what);
  };
  const absolute = (name: string, line: number): string => {
    if (name === '@') return st.origin;
    const u = name;
    if (u.endsWith('.') && !u.endsWith('\\.')) return u.toLowerCase() === '.' ? '.' : u;
    if (u === '') err(line, 'empty name');
    return st.origin === '.' ? `${u}.` : `${u}.${st.origin}`;
  };
  for (const e of entries(text, file)) {
    const w = e.words;
    const first = w[0]!.text;
    if (!w[0]!.quoted && first.startsWith('$')) {
      const dir = first.toUpperCase();
      if (dir === '$ORIGIN') {
        if (w.length !== 2) err(e.line, '$ORIGIN needs one name');
        st.origin = absolute(w[1]!.text, e.line).toLowerCase();
      } else if (dir === '$TTL') {
        const t = w[1] ? parseTtl(w[1].text) : null;
        if (t === null) err(e.line, '$TTL: not a TTL');
        st.ttl = t;
      } else if (dir === '$INCLUDE') {
        if (w.length < 2 || w.length > 3) err(e.line, '$INCLUDE needs a file name and an optional origin');
        if (st.depth >= 8) err(e.line, '$INCLUDE nested more than 8 deep');
        const path = isAbsolute(w[1]!.text) ? w[1]!.text : resolve(dirname(file), w[1]!.text);
        let inc: string;
        try {
          inc = readFileSync(path, 'utf8');
        } catch (x) {
          err(e.line, `$INCLUDE: ${(x as NodeJS.ErrnoException).code ?? 'unreadable'}`);
        }
        // The included file gets its own origin (or ours); ours is back after it (RFC 1035 5.1).
        const sub: State = {
          ...st,
          origin: w[2] ? absolute(w[2].text, e.line).toLowerCase() : st.origin,
          depth: st.depth + 1,
        };
        parseInto(path, inc!, sub, out);
        st.lastOwner = sub.lastOwner;
        st.lastTtl = sub.lastTtl;
        st.ttl = sub.ttl;
      } else {
        err(e.line, 'unknown $ directive (not $ORIGIN, $TTL or $INCLUDE)');
      }
      continue;
    }
    let k = 0;
    let owner: string;
    if (e.blankOwner) {
      if (st.lastOwner === null) err(e.line, 'a record without an owner name comes first');
      owner = st.lastOwner!;
    } else {
      owner = absolute(w[k++]!.text, e.line);
    }
    let ttl: number | null = null;
    let cls: number | null = null;
    let type: number | undefined;
    while (k < w.length) {
      const t = w[k]!.text;
      const up = t.toUpperCase();
      if (ttl === null && /^\d/.test(t)) {
        ttl = parseTtl(t);
        if (ttl === null) err(e.line, `field ${k + 1}: not a TTL`);
        k++;
      } else if (cls === null && (up === 'IN' || up === 'CH' || up === 'HS' || /^CLASS\d+$/.test(up))) {
        cls = up === 'IN' ? QClass.IN : up === 'CH' ? QClass.CH : up === 'HS' ? QClass.HS : Number(up.slice(5));
        k++;
      } else {
        type = typeFromString(t);
        if (type === undefined) err(e.line, `field ${k + 1}: not a known type or class`);
        k++;
        break;
      }
    }
    if (type === undefined) err(e.line, 'the record has no type');
    const rdata = w.slice(k);
    const data = parseRdata(
      type!,
      rdata,
      (n) => absolute(n, e.line),
      (what) => err(e.line, what),
    );
    if (type === QType.SOA && ttl === null && st.ttl === null) ttl = (data as { minimum: number }).minimum;
    const finalTtl = ttl ?? st.ttl ?? st.lastTtl;
    if (finalTtl === null) err(e.line, 'the record has no TTL (and there is no $TTL)');
    st.lastOwner = owner;
    st.lastTtl = finalTtl;
    st.lastClass = cls ?? st.lastClass;
    out.push({ name: owner, type: type!, class: cls ?? st.lastClass, ttl: finalTtl!, data });
  }
}

const NAME_TYPES: ReadonlySet<number> = new Set([QType.CNAME, QType.NS, QType.PTR]);

function parseRdata(type: number, w: Word[], name: (n: string) => string, fail: (what: string) => never): RecordData {
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
      return { texts: w.map((x) => unescape(x.text)) };
    case QType.SOA: {
      count(7);
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

function generic(w: Word[], fail: (what: string) => never): Buffer {
  const len = w[1] ? Number(w[1].text) : NaN;
  if (!Number.isInteger(len) || len < 0 || len > 65535) fail('\\# needs a length');
  const hex = w
    .slice(2)
    .map((x) => x.text)
    .join('');
  if (!/^[0-9a-fA-F]*$/.test(hex) || hex.length !== len * 2) fail(`\\# ${len}: the data is not ${len} octets of hex`);
  return Buffer.from(hex, 'hex');
}
