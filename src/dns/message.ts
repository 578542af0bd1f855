// RFC 1035 messages as plain objects, and the full decoder/encoder.
// The hot path does not use these: see query.ts (parse the question only) and
// the wire-level helpers in wire.ts. These are for plugins that build or inspect answers.

import { QType } from './constants.js';
import { decodeName, MAX_NAME_WIRE, nameToLabels, NameError } from './name.js';
import { formatIPv4, formatIPv6, parseIPv4, parseIPv6 } from './ip.js';

export interface Question {
  name: string;
  type: number;
  class: number;
}

export interface AddressData {
  address: string;
}
export interface TargetData {
  target: string;
}
export interface MxData {
  preference: number;
  exchange: string;
}
export interface TxtData {
  texts: string[];
}
export interface SrvData {
  priority: number;
  weight: number;
  port: number;
  target: string;
}
export interface SoaData {
  mname: string;
  rname: string;
  serial: number;
  refresh: number;
  retry: number;
  expire: number;
  minimum: number;
}
export interface OpaqueData {
  raw: Buffer;
}
export type RecordData = AddressData | TargetData | MxData | TxtData | SrvData | SoaData | OpaqueData;

export interface ResourceRecord {
  name: string;
  type: number;
  class: number;
  ttl: number;
  data: RecordData;
}

export interface EdnsOption {
  code: number;
  data: Buffer;
}

export interface Edns {
  udpSize: number;
  version: number;
  do: boolean;
  /** The OPT TTL's flag bits other than DO (must be zero, kept as received). */
  zflags: number;
  options: EdnsOption[];
}

export interface Message {
  id: number;
  qr: boolean;
  opcode: number;
  aa: boolean;
  tc: boolean;
  rd: boolean;
  ra: boolean;
  ad: boolean;
  cd: boolean;
  /** Full 12-bit rcode: the low 4 bits live in the header, the rest in the OPT record. */
  rcode: number;
  questions: Question[];
  answers: ResourceRecord[];
  authorities: ResourceRecord[];
  additionals: ResourceRecord[];
  edns: Edns | null;
}

export class DecodeError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'DecodeError';
  }
}

export function emptyMessage(id = 0): Message {
  return {
    id,
    qr: false,
    opcode: 0,
    aa: false,
    tc: false,
    rd: false,
    ra: false,
    ad: false,
    cd: false,
    rcode: 0,
    questions: [],
    answers: [],
    authorities: [],
    additionals: [],
    edns: null,
  };
}

// ---------------------------------------------------------------- decoding

function need(buf: Buffer, pos: number, n: number, what: string): void {
  if (pos + n > buf.length) throw new DecodeError(`${what} runs past the end of the message`);
}

function readName(buf: Buffer, pos: number): { name: string; end: number } {
  try {
    return decodeName(buf, pos);
  } catch (e) {
    if (e instanceof NameError) throw new DecodeError(e.message);
    throw e;
  }
}

function decodeRdata(buf: Buffer, type: number, start: number, len: number): RecordData {
  const end = start + len;
  switch (type) {
    case QType.A:
      if (len !== 4) throw new DecodeError(`A record with ${len} octets`);
      return { address: formatIPv4(buf, start) };
    case QType.AAAA:
      if (len !== 16) throw new DecodeError(`AAAA record with ${len} octets`);
      return { address: formatIPv6(buf, start) };
    case QType.CNAME:
    case QType.NS:
    case QType.PTR: {
      const n = readName(buf, start);
      if (n.end !== end) throw new DecodeError('name does not fill its RDATA');
      return { target: n.name };
    }
    case QType.MX: {
      need(buf, start, 2, 'MX');
      const n = readName(buf, start + 2);
      if (n.end !== end) throw new DecodeError('MX name does not fill its RDATA');
      return { preference: buf.readUInt16BE(start), exchange: n.name };
    }
    case QType.TXT: {
      const texts: string[] = [];
      let p = start;
      while (p < end) {
        const l = buf[p]!;
        if (p + 1 + l > end) throw new DecodeError('TXT string runs past its RDATA');
        texts.push(buf.latin1Slice(p + 1, p + 1 + l));
        p += 1 + l;
      }
      return { texts };
    }
    case QType.SRV: {
      if (len < 7) throw new DecodeError('SRV RDATA too short');
      const n = readName(buf, start + 6);
      if (n.end !== end) throw new DecodeError('SRV target does not fill its RDATA');
      return {
        priority: buf.readUInt16BE(start),
        weight: buf.readUInt16BE(start + 2),
        port: buf.readUInt16BE(start + 4),
        target: n.name,
      };
    }
    case QType.SOA: {
      const m = readName(buf, start);
      const r = readName(buf, m.end);
      if (r.end + 20 !== end) throw new DecodeError('SOA RDATA has the wrong length');
      return {
        mname: m.name,
        rname: r.name,
        serial: buf.readUInt32BE(r.end),
        refresh: buf.readUInt32BE(r.end + 4),
        retry: buf.readUInt32BE(r.end + 8),
        expire: buf.readUInt32BE(r.end + 12),
        minimum: buf.readUInt32BE(r.end + 16),
      };
    }
    default:
      // RFC 3597: unknown types are opaque; copy so the record outlives the packet.
      return { raw: Buffer.from(buf.subarray(start, end)) };
  }
}

/** Decodes a whole message. Throws DecodeError on anything malformed. */
export function decodeMessage(buf: Buffer): Message {
  if (buf.length < 12) throw new DecodeError('message shorter than its 12-octet header');
  const id = buf.readUInt16BE(0);
  const f = buf.readUInt16BE(2);
  const qd = buf.readUInt16BE(4);
  const an = buf.readUInt16BE(6);
  const ns = buf.readUInt16BE(8);
  const ar = buf.readUInt16BE(10);
  const msg: Message = {
    id,
    qr: (f & 0x8000) !== 0,
    opcode: (f >> 11) & 0xf,
    aa: (f & 0x0400) !== 0,
    tc: (f & 0x0200) !== 0,
    rd: (f & 0x0100) !== 0,
    ra: (f & 0x0080) !== 0,
    ad: (f & 0x0020) !== 0,
    cd: (f & 0x0010) !== 0,
    rcode: f & 0xf,
    questions: [],
    answers: [],
    authorities: [],
    additionals: [],
    edns: null,
  };
  let pos = 12;
  for (let i = 0; i < qd; i++) {
    const n = readName(buf, pos);
    need(buf, n.end, 4, 'question');
    msg.questions.push({ name: n.name, type: buf.readUInt16BE(n.end), class: buf.readUInt16BE(n.end + 2) });
    pos = n.end + 4;
  }
  const sections: [ResourceRecord[], number][] = [
    [msg.answers, an],
    [msg.authorities, ns],
    [msg.additionals, ar],
  ];
  for (let s = 0; s < 3; s++) {
    const [list, count] = sections[s]!;
    for (let i = 0; i < count; i++) {
      const n = readName(buf, pos);
      need(buf, n.end, 10, 'resource record');
      const type = buf.readUInt16BE(n.end);
      const klass = buf.readUInt16BE(n.end + 2);
      const ttl = buf.readUInt32BE(n.end + 4);
      const rdlen = buf.readUInt16BE(n.end + 8);
      const rdStart = n.end + 10;
      need(buf, rdStart, rdlen, 'RDATA');
      if (type === QType.OPT) {
        if (s !== 2) throw new DecodeError('OPT record outside the additional section');
        if (msg.edns) throw new DecodeError('more than one OPT record');
        if (n.name !== '.') throw new DecodeError('OPT record not owned by the root');
        const options: EdnsOption[] = [];
        let p = rdStart;
        while (p < rdStart + rdlen) {
          if (p + 4 > rdStart + rdlen) throw new DecodeError('EDNS option header runs past its RDATA');
          const code = buf.readUInt16BE(p);
          const olen = buf.readUInt16BE(p + 2);
          if (p + 4 + olen > rdStart + rdlen) throw new DecodeError('EDNS option runs past its RDATA');
          options.push({ code, data: Buffer.from(buf.subarray(p + 4, p + 4 + olen)) });
          p += 4 + olen;
        }
        msg.edns = {
          udpSize: klass,
          version: (ttl >>> 16) & 0xff,
          do: (ttl & 0x8000) !== 0,
          zflags: ttl & 0x7fff,
          options,
        };
        msg.rcode |= ((ttl >>> 24) & 0xff) << 4;
      } else {
        list.push({ name: n.name, type, class: klass, ttl, data: decodeRdata(buf, type, rdStart, rdlen) });
      }
      pos = rdStart + rdlen;
    }
  }
  return msg;
}

// ---------------------------------------------------------------- encoding

/** The latest WireWriter, held for its hidden class (server/request.ts `latest` says why). */
const latestWriter: { writer: WireWriter | null } = { writer: null };

/**
 * A growable output buffer with a compression table. Names are compressed against
 * every name written before them (RFC 1035 4.1.4); SRV targets and unknown types are
 * written uncompressed (RFC 2782, RFC 3597) but may still be pointed at.
 */
export class WireWriter {
  buf: Buffer;
  pos = 0;
  private readonly table = new Map<string, number>();

  constructor(size = 512) {
    this.buf = Buffer.allocUnsafe(size);
    latestWriter.writer = this; // its hidden class through a quiet spell: server/request.ts `latest`
  }

  ensure(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.pos + n) size *= 2;
    const nb = Buffer.allocUnsafe(size);
    this.buf.copy(nb, 0, 0, this.pos);
    this.buf = nb;
  }

  u8(v: number): void {
    this.ensure(1);
    this.buf[this.pos++] = v & 0xff;
  }

  u16(v: number): void {
    this.ensure(2);
    this.buf.writeUInt16BE(v & 0xffff, this.pos);
    this.pos += 2;
  }

  u32(v: number): void {
    this.ensure(4);
    this.buf.writeUInt32BE(v >>> 0, this.pos);
    this.pos += 4;
  }

  bytes(b: Buffer): void {
    this.ensure(b.length);
    b.copy(this.buf, this.pos);
    this.pos += b.length;
  }

  /** Registers a name already present at `offset` (e.g. a copied question) for compression. */
  remember(name: string, offset: number): void {
    if (plainName(name)) {
      const fq = name.endsWith('.') ? name : `${name}.`;
      // Byte for byte: a suffix spelled in another letter case is another suffix (names keep their case).
      const exact = FAST_KEY + fq;
      for (let start = 0; start < fq.length && offset + start <= 0x3fff; start = fq.indexOf('.', start) + 1) {
        const key = start === 0 ? exact : FAST_KEY + exact.slice(start + 1);
        if (!this.table.has(key)) this.table.set(key, offset + start);
      }
      return;
    }
    const labels = nameToLabels(name);
    let off = offset;
    for (let i = 0; i < labels.length; i++) {
      if (off > 0x3fff) break;
      const key = suffixKey(labels, i);
      if (!this.table.has(key)) this.table.set(key, off);
      off += 1 + labels[i]!.length;
    }
  }

  name(name: string, compress = true): void {
    if (plainName(name)) {
      this.plainName(name, compress);
      return;
    }
    const labels = nameToLabels(name);
    for (let i = 0; i < labels.length; i++) {
      if (this.pointedTo(suffixKey(labels, i), compress)) return;
      const l = labels[i]!;
      this.u8(l.length);
      this.bytes(l);
    }
    this.u8(0);
  }

  result(): Buffer {
    return this.buf.subarray(0, this.pos);
  }

  /**
   * The name suffix `key` starts here: writes a pointer to where it was written before (when
   * compressing) and returns true, or remembers this position for it and returns false.
   */
  private pointedTo(key: string, compress: boolean): boolean {
    if (compress) {
      const ptr = this.table.get(key);
      if (ptr !== undefined) {
        this.u16(0xc000 | ptr);
        return true;
      }
    }
    if (this.pos <= 0x3fff && !this.table.has(key)) this.table.set(key, this.pos);
    return false;
  }

  /** name() for a name without escapes or non-ASCII: suffixes are slices of the name as written. */
  private plainName(name: string, compress: boolean): void {
    const fq = name.endsWith('.') ? name : `${name}.`;
    if (fq.length > MAX_NAME_WIRE - 1) throw new NameError(`name longer than 255 octets: "${name.slice(0, 40)}..."`);
    const exact = FAST_KEY + fq;
    this.ensure(fq.length + 1);
    for (let start = 0; start < fq.length;) {
      if (this.pointedTo(start === 0 ? exact : FAST_KEY + exact.slice(start + 1), compress)) return;
      const dot = fq.indexOf('.', start);
      const len = dot - start;
      if (len === 0) throw new NameError(`empty label in "${name}"`);
      if (len > 63) throw new NameError(`label longer than 63 octets in "${name}"`);
      const b = this.buf;
      let p = this.pos;
      b[p++] = len;
      for (let i = start; i < dot; i++) b[p++] = fq.charCodeAt(i);
      this.pos = p;
      start = dot + 1;
    }
    this.buf[this.pos++] = 0;
  }
}

/** Marks compression keys of plain names (no other key starts with it: those start with a length below 64). */
const FAST_KEY = '\u0100';

/** True for a name of ASCII without escapes, whose presentation form maps 1:1 onto its labels. */
function plainName(name: string): boolean {
  if (name === '.' || name === '') return false;
  for (let i = 0; i < name.length; i++) {
    const c = name.charCodeAt(i);
    if (c === 0x5c || c > 0x7e || c < 0x21) return false;
  }
  return name.charCodeAt(0) !== 0x2e;
}

/**
 * Compression key of the name from label `from`: length-prefixed labels (a label may hold a
 * '.'), byte for byte. Not case-folded: a pointer into "SVC.cluster.local" would respell a
 * stored "svc.cluster.local" (CoreDNS's encoder matches suffixes exactly too).
 */
function suffixKey(labels: Buffer[], from: number): string {
  let k = '';
  for (let i = from; i < labels.length; i++)
    k += String.fromCharCode(labels[i]!.length) + labels[i]!.latin1Slice(0, labels[i]!.length);
  return k;
}

export class EncodeError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'EncodeError';
  }
}

function writeRdata(w: WireWriter, rr: ResourceRecord): void {
  const d = rr.data;
  switch (rr.type) {
    case QType.A: {
      const b = parseIPv4((d as AddressData).address);
      if (!b) throw new EncodeError(`bad IPv4 address "${(d as AddressData).address}"`);
      w.bytes(b);
      return;
    }
    case QType.AAAA: {
      const b = parseIPv6((d as AddressData).address);
      if (!b) throw new EncodeError(`bad IPv6 address "${(d as AddressData).address}"`);
      w.bytes(b);
      return;
    }
    case QType.CNAME:
    case QType.NS:
    case QType.PTR:
      w.name((d as TargetData).target);
      return;
    case QType.MX:
      w.u16((d as MxData).preference);
      w.name((d as MxData).exchange);
      return;
    case QType.TXT: {
      const texts = (d as TxtData).texts;
      for (const t of texts) {
        const b = Buffer.from(t, 'latin1');
        if (b.length > 255) throw new EncodeError('TXT string longer than 255 octets');
        w.u8(b.length);
        w.bytes(b);
      }
      if (texts.length === 0) w.u8(0);
      return;
    }
    case QType.SRV: {
      const s = d as SrvData;
      w.u16(s.priority);
      w.u16(s.weight);
      w.u16(s.port);
      w.name(s.target, false);
      return;
    }
    case QType.SOA: {
      const s = d as SoaData;
      w.name(s.mname);
      w.name(s.rname);
      w.u32(s.serial);
      w.u32(s.refresh);
      w.u32(s.retry);
      w.u32(s.expire);
      w.u32(s.minimum);
      return;
    }
    default: {
      const raw = (d as OpaqueData).raw;
      if (!Buffer.isBuffer(raw)) throw new EncodeError(`record of type ${rr.type} has no raw RDATA`);
      w.bytes(raw);
    }
  }
}

export function writeRecord(w: WireWriter, rr: ResourceRecord): void {
  w.name(rr.name);
  w.u16(rr.type);
  w.u16(rr.class);
  w.u32(rr.ttl);
  const lenAt = w.pos;
  w.u16(0);
  writeRdata(w, rr);
  const rdlen = w.pos - lenAt - 2;
  if (rdlen > 0xffff) throw new EncodeError('RDATA longer than 65535 octets');
  w.buf.writeUInt16BE(rdlen, lenAt);
}

export function headerFlags(m: Message): number {
  return (
    (m.qr ? 0x8000 : 0) |
    ((m.opcode & 0xf) << 11) |
    (m.aa ? 0x0400 : 0) |
    (m.tc ? 0x0200 : 0) |
    (m.rd ? 0x0100 : 0) |
    (m.ra ? 0x0080 : 0) |
    (m.ad ? 0x0020 : 0) |
    (m.cd ? 0x0010 : 0) |
    (m.rcode & 0xf)
  );
}

function optLength(e: Edns): number {
  let n = 11;
  for (const o of e.options) n += 4 + o.data.length;
  return n;
}

function writeOpt(w: WireWriter, e: Edns, rcode: number): void {
  w.u8(0);
  w.u16(QType.OPT);
  w.u16(e.udpSize);
  w.u32((((rcode >> 4) & 0xff) << 24) | ((e.version & 0xff) << 16) | (e.do ? 0x8000 : 0) | (e.zflags & 0x7fff));
  let len = 0;
  for (const o of e.options) len += 4 + o.data.length;
  w.u16(len);
  for (const o of e.options) {
    w.u16(o.code);
    w.u16(o.data.length);
    w.bytes(o.data);
  }
}

export interface EncodeOptions {
  /** Largest message allowed; records that do not fit are dropped and TC is set. */
  maxSize?: number;
}

/**
 * Encodes a message with name compression. With `maxSize`, records are dropped from
 * the end (additional, then authority, then answer) until it fits, and TC is set if any was.
 */
export function encodeMessage(m: Message, opts: EncodeOptions = {}): Buffer {
  if (m.rcode > 0xf && !m.edns) throw new EncodeError(`rcode ${m.rcode} needs an OPT record`);
  const w = new WireWriter(512);
  w.ensure(12);
  w.pos = 12;
  for (const q of m.questions) {
    w.name(q.name);
    w.u16(q.type);
    w.u16(q.class);
  }
  const afterQuestion = w.pos;
  const boundaries: number[] = [];
  const all = [m.answers, m.authorities, m.additionals];
  const optLen = m.edns ? optLength(m.edns) : 0;
  const max = opts.maxSize ?? 65535;
  let over = false;
  // Records after the first that does not fit are not encoded at all: they would be cut.
  write: for (const list of all) {
    for (const rr of list) {
      writeRecord(w, rr);
      boundaries.push(w.pos);
      if (w.pos + optLen > max) {
        over = true;
        break write;
      }
    }
  }
  let kept = boundaries.length;
  let end = w.pos;
  let tc = m.tc;
  if (over || end + optLen > max) {
    tc = true;
    kept = 0;
    end = afterQuestion;
    for (let i = 0; i < boundaries.length; i++) {
      if (boundaries[i]! + optLen <= max) {
        kept = i + 1;
        end = boundaries[i]!;
      } else break;
    }
    // A question that alone exceeds the limit cannot be helped; the header still says TC.
  }
  w.pos = end;
  const counts = [0, 0, 0];
  let left = kept;
  for (let s = 0; s < 3; s++) {
    const take = Math.min(left, all[s]!.length);
    counts[s] = take;
    left -= take;
  }
  if (m.edns) {
    writeOpt(w, m.edns, m.rcode);
    counts[2]! += 1;
  }
  const flags = headerFlags(m) | (tc ? 0x0200 : 0);
  w.buf.writeUInt16BE(m.id & 0xffff, 0);
  w.buf.writeUInt16BE(flags, 2);
  w.buf.writeUInt16BE(m.questions.length, 4);
  w.buf.writeUInt16BE(counts[0]!, 6);
  w.buf.writeUInt16BE(counts[1]!, 8);
  w.buf.writeUInt16BE(counts[2]!, 10);
  return w.result();
}
