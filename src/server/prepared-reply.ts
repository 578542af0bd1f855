// The one answer path's prepared form and its one reply builder. A prepared answer is the
// records that follow the question in a reply, with where to patch them per reply (each TTL,
// an SOA serial, the zone's letter case) and what it was built from. A plugin that builds
// answers (kubernetes) makes them directly; a cache makes them from a response it is given,
// walked once: its OPT is cut off (EDNS is hop-by-hop and every reply echoes the asker's own),
// and the offset of every TTL field is recorded so a reply patches TTLs without decoding.
// Every reply made from one, by the plugin that built it or by a cache, is written by writeReply.

import { copyBytes } from '../dns/bytes.js';
import { QType } from '../dns/constants.js';
import { decodeName, skipName } from '../dns/name.js';
import type { Request } from './request.js';
import { writeOptEcho, writeRecords } from './reply.js';

const OPT_LEN = 11;
export const FLAG_AA = 0x0400;
export const FLAG_TC = 0x0200;
export const FLAG_RA = 0x0080;
export const FLAG_AD = 0x0020;
export const FLAG_CD = 0x0010;

/** What writeReply needs: records to put behind any asker's header and question, and where to patch them. */
export interface PreparedReply {
  /** Answer, authority and additional RRs, without an OPT. */
  readonly body: Buffer;
  readonly an: number;
  readonly ns: number;
  /** Additional records, OPT not counted. */
  readonly ar: number;
  /** The responder's header flags word (AA, TC, RA, AD, rcode). */
  readonly flags: number;
  /** Where each RR's TTL field sits in `body`; null when not recorded (past 64 KiB). */
  readonly ttlOffsets: Uint16Array | null;
  /** Header plus question length it was made for: names in `body` may point into that question. */
  readonly questionEnd: number;
  /** Offset in `body` of an SOA serial written per reply; -1 when there is none. */
  readonly serialAt: number;
  /** Offsets in `body` where `zone`'s labels are written in full: they take the asker's spelling. */
  readonly zoneAt: readonly number[] | null;
  /** The zone (lowercase FQDN) `zoneAt` spells. */
  readonly zone: string;
}

/** Wire length of a lowercase FQDN without escapes (the root is one octet). */
export function wireLength(name: string): number {
  return name === '.' ? 1 : name.length + 1;
}

/** Offset of the zone's first label inside the question of a query whose question ends at `questionEnd`. */
export function zoneOffset(questionEnd: number, zone: string): number {
  return questionEnd - 4 - wireLength(zone);
}

/** Holds prepared answers and lets go of one when the store drops it (answer-store.ts). */
export interface AnswerHolder {
  answerDropped(a: PreparedAnswer): void;
}

const NO_KEYS: readonly string[] = [];
const EMPTY = Buffer.alloc(0);

/**
 * An answer to (name, qtype) ready for writeReply, with what a cache decides on (its facts) and
 * what it was built from (its dependency keys). One object, whoever keeps it: the kubernetes
 * plugin's table and every cache entry made from its reply hold this same object (answer-store.ts).
 */
export class PreparedAnswer implements PreparedReply {
  body: Buffer;
  an: number;
  ns: number;
  ar: number;
  flags: number;
  ttlOffsets: Uint16Array | null;
  questionEnd: number;
  // The fields below are set in the constructor, not by initializers. V8 treats a field whose
  // value only its initializer ever stored as a constant of the class's shape, and code compiled
  // against it is thrown away the first time any instance's value changes: refill (a cache
  // refresh) would do that to every reply writer, once per process, under load. A field the
  // constructor assigns is stored twice from the start (define, then assign): never a constant.
  serialAt: number;
  zoneAt: readonly number[] | null;
  zone: string;
  /**
   * Keys of what the answer was built from (a Service, an IP, an alias's target), in the
   * builder's own words: Invalidation.invalidateDependencies with any of them drops it everywhere.
   */
  dependencies: readonly string[] = NO_KEYS;
  /** Who keeps it (AnswerStore.hold): one holder directly, several in an array; null when nobody. */
  holders: AnswerHolder | AnswerHolder[] | null = null;
  // Facts for a cache's decision (CoreDNS's rules, RFC 2308).
  /** Smallest TTL of any RR (OPT excluded); -1 when there is none. */
  minTtl: number;
  hasSoa: boolean;
  /** min(every RR's TTL, SOA MINIMUM): the negative-caching TTL of RFC 2308 5; -1 without an SOA. */
  negativeTtl: number;
  nsInAuthority: number;
  /**
   * True when the CNAME chain from the question (if any) ends at a name that holds a record of
   * the asked type: no second target for one owner, no loop, no record off the chain counted.
   */
  answerHasQtype: boolean;
  /** With DO: an RRSIG outside its validity period (CoreDNS does not cache such a reply). */
  expiredSignature: boolean;

  constructor(
    /** The lowercase question name and type it answers. */
    readonly name: string,
    readonly qtype: number,
    body: Buffer,
    an: number,
    ns: number,
    ar: number,
    flags: number,
    ttlOffsets: Uint16Array | null,
    questionEnd: number,
  ) {
    this.body = body;
    this.an = an;
    this.ns = ns;
    this.ar = ar;
    this.flags = flags;
    this.ttlOffsets = ttlOffsets;
    this.questionEnd = questionEnd;
    this.serialAt = -1;
    this.zoneAt = null;
    this.zone = '';
    this.minTtl = -1;
    this.hasSoa = false;
    this.negativeTtl = -1;
    this.nsInAuthority = 0;
    this.answerHasQtype = false;
    this.expiredSignature = false;
  }

  /** A copy whose bytes have memory of their own (an answer built for one reply sits in Node's shared pool). */
  ownCopy(): PreparedAnswer {
    const body = Buffer.allocUnsafeSlow(this.body.length);
    this.body.copy(body);
    const c = new PreparedAnswer(
      this.name,
      this.qtype,
      body,
      this.an,
      this.ns,
      this.ar,
      this.flags,
      this.ttlOffsets,
      this.questionEnd,
    );
    c.dependencies = this.dependencies;
    c.takeFacts(this);
    return c;
  }

  /** `p`'s patch points and the facts a cache decides on (not its records, counts or keys). */
  private takeFacts(p: PreparedAnswer): void {
    this.serialAt = p.serialAt;
    this.zoneAt = p.zoneAt;
    this.zone = p.zone;
    this.minTtl = p.minTtl;
    this.hasSoa = p.hasSoa;
    this.negativeTtl = p.negativeTtl;
    this.nsInAuthority = p.nsInAuthority;
    this.answerHasQtype = p.answerHasQtype;
    this.expiredSignature = p.expiredSignature;
  }

  /**
   * Takes `p`'s records into this answer's own memory, when they are the same size and this
   * answer is nobody else's (a cache refresh of an answer the cache built, whose bytes and
   * offsets no other answer shares): true when it did. The kept answer has lived long enough to
   * be in V8's old generation; `p`, built for the fetch, then dies young instead of being
   * promoted in its place (BENCHMARKS.md, "Cache refreshes in place").
   */
  refill(p: PreparedAnswer): boolean {
    const to = this.ttlOffsets;
    const from = p.ttlOffsets;
    if (p.body.length !== this.body.length || p.name !== this.name || p.qtype !== this.qtype) return false;
    if (to === null || from === null || to.length !== from.length) return false;
    p.body.copy(this.body);
    to.set(from);
    this.an = p.an;
    this.ns = p.ns;
    this.ar = p.ar;
    this.flags = p.flags;
    this.questionEnd = p.questionEnd;
    this.takeFacts(p);
    return true;
  }
}

/** What a plugin knows of a reply it sends as a Message (not described records): only what it was built from. */
export function dependenciesOnly(dependencies: readonly string[]): PreparedAnswer {
  const p = new PreparedAnswer('', 0, EMPTY, 0, 0, 0, 0, null, 0);
  p.dependencies = dependencies;
  return p;
}

/** Why a response cannot be prepared. */
export const enum PrepareProblem {
  Malformed = 1,
  /** Not exactly the question that was asked (coredns_cache_drops_total). */
  QuestionMismatch = 2,
  /** An OPT not last, or carrying extended rcode bits a prepared reply cannot keep. */
  Opt = 3,
}

function foldByte(b: number): number {
  return b >= 0x41 && b <= 0x5a ? b | 0x20 : b;
}

/** RFC 2181 8: a TTL with the top bit set is treated as zero. */
function ttlValue(v: number): number {
  return v > 0x7fffffff ? 0 : v;
}

/**
 * Walks `wire`, a response to `req`, once. The question must be the one asked (names
 * compared without regard to case) and sit at the same offsets as in the request, so
 * compression pointers into it stay valid when the request's own question is put in front.
 */
export function prepareResponse(req: Request, wire: Buffer): PreparedAnswer | PrepareProblem {
  const len = wire.length;
  if (len < 12) return PrepareProblem.Malformed;
  if (wire.readUInt16BE(4) !== 1) return PrepareProblem.QuestionMismatch;
  const qEnd = req.questionEnd;
  if (len < qEnd) return PrepareProblem.QuestionMismatch;
  const raw = req.raw;
  for (let i = 12; i < qEnd - 4; i++) {
    const a = wire[i]!;
    const b = raw[i]!;
    if (a !== b && foldByte(a) !== foldByte(b)) return PrepareProblem.QuestionMismatch;
  }
  for (let i = qEnd - 4; i < qEnd; i++) if (wire[i] !== raw[i]) return PrepareProblem.QuestionMismatch;

  const an = wire.readUInt16BE(6);
  const ns = wire.readUInt16BE(8);
  const ar = wire.readUInt16BE(10);
  const total = an + ns + ar;
  const offsets = new Uint16Array(total);
  let count = 0;
  let pos = qEnd;
  let optStart = -1;
  let minTtl = -1;
  let soaMinimum = -1;
  let nsInAuthority = 0;
  let answerHasQtype = false;
  // Answer records not owned by the question itself (c0 0c), or any CNAME: the chain must be walked.
  let walkChain = false;
  let expiredSignature = false;
  const qtype = req.qtype;
  const nowSeconds = req.do ? Math.floor(Date.now() / 1000) : 0;
  try {
    for (let i = 0; i < total; i++) {
      const start = pos;
      const nameEnd = skipName(wire, pos);
      if (nameEnd + 10 > len) return PrepareProblem.Malformed;
      const type = wire.readUInt16BE(nameEnd);
      const rdlen = wire.readUInt16BE(nameEnd + 8);
      const end = nameEnd + 10 + rdlen;
      if (end > len) return PrepareProblem.Malformed;
      if (type === QType.OPT) {
        if (i < an + ns || optStart >= 0) return PrepareProblem.Malformed;
        if (wire[nameEnd + 4] !== 0) return PrepareProblem.Opt;
        optStart = start;
      } else {
        if (optStart >= 0) return PrepareProblem.Opt;
        if (nameEnd + 4 - qEnd > 0xffff) return PrepareProblem.Malformed;
        offsets[count++] = nameEnd + 4 - qEnd;
        const ttl = ttlValue(wire.readUInt32BE(nameEnd + 4));
        if (minTtl < 0 || ttl < minTtl) minTtl = ttl;
        if (type === QType.RRSIG && req.do && rdlen >= 18 && !signatureValid(wire, nameEnd + 10, nowSeconds))
          expiredSignature = true;
        if (i < an) {
          if (type === qtype) answerHasQtype = true;
          if (type === QType.CNAME || wire[start] !== 0xc0 || wire[start + 1] !== 12) walkChain = true;
        } else if (i < an + ns) {
          if (type === QType.SOA && rdlen >= 22) {
            const m = ttlValue(wire.readUInt32BE(end - 4));
            if (soaMinimum < 0 || m < soaMinimum) soaMinimum = m;
          } else if (type === QType.NS) nsInAuthority++;
        }
      }
      pos = end;
    }
  } catch {
    return PrepareProblem.Malformed;
  }
  if (walkChain) {
    try {
      answerHasQtype = chainEndsInQtype(wire, qEnd, an, req.name, qtype);
    } catch {
      return PrepareProblem.Malformed;
    }
  }
  const bodyEnd = optStart >= 0 ? optStart : pos;
  // An exact, unpooled copy: a slice of a shared pool slab would pin the whole slab for
  // as long as the entry lives.
  const body = Buffer.allocUnsafeSlow(bodyEnd - qEnd);
  wire.copy(body, 0, qEnd, bodyEnd);
  const hasSoa = soaMinimum >= 0;
  const p = new PreparedAnswer(
    req.name,
    qtype,
    body,
    an,
    ns,
    optStart >= 0 ? ar - 1 : ar,
    wire.readUInt16BE(2),
    count === total ? offsets : offsets.slice(0, count),
    qEnd,
  );
  p.minTtl = minTtl;
  p.hasSoa = hasSoa;
  p.negativeTtl = hasSoa ? Math.min(minTtl, soaMinimum) : -1;
  p.nsInAuthority = nsInAuthority;
  p.answerHasQtype = answerHasQtype;
  p.expiredSignature = expiredSignature;
  return p;
}

/**
 * `info` itself when `wire`, a reply to `req`, is the one the plugin that built `info` wrote: only
 * the header and the question are checked against it (a plugin on the way may have replaced the
 * bytes), the records are not walked and not copied. Null when they disagree: walk it instead.
 */
export function describedResponse(req: Request, wire: Buffer, info: PreparedAnswer): PreparedAnswer | null {
  if (info.ttlOffsets === null || info.name !== req.name || info.questionEnd !== req.questionEnd) return null;
  const qEnd = req.questionEnd;
  const len = qEnd + info.body.length;
  if (wire.length !== len && wire.length !== len + OPT_LEN) return null;
  const flags = wire.readUInt16BE(2);
  if ((flags & FLAG_TC) !== 0 || (flags & 0xf) !== (info.flags & 0xf)) return null;
  if (wire.readUInt16BE(4) !== 1 || wire.readUInt16BE(6) !== info.an || wire.readUInt16BE(8) !== info.ns) return null;
  if (wire.readUInt16BE(10) !== info.ar + (wire.length === len ? 0 : 1)) return null;
  // A loop, not Buffer#compare with offsets: a question is a few dozen octets, the binding call costs more.
  const raw = req.raw;
  for (let i = 12; i < qEnd; i++) if (wire[i] !== raw[i]) return null;
  return info;
}

/**
 * CoreDNS 1.14.7's rule for a NOERROR answer: follow the CNAMEs from the question name. An owner
 * with two different targets, or a target seen before (a loop), is a broken chain; otherwise the
 * chain's last name must own a record of the asked type (one elsewhere in the answer does not count).
 */
function chainEndsInQtype(wire: Buffer, qEnd: number, an: number, qname: string, qtype: number): boolean {
  const owners: string[] = [];
  const types: number[] = [];
  const targets: string[] = [];
  let pos = qEnd;
  for (let i = 0; i < an; i++) {
    const owner = decodeName(wire, pos);
    const type = wire.readUInt16BE(owner.end);
    owners.push(owner.name.toLowerCase());
    types.push(type);
    targets.push(type === QType.CNAME ? decodeName(wire, owner.end + 10).name.toLowerCase() : '');
    pos = owner.end + 10 + wire.readUInt16BE(owner.end + 8);
  }
  let current = qname;
  const visited = new Set<string>([current]);
  for (;;) {
    let next = '';
    for (let i = 0; i < an; i++) {
      if (types[i] !== QType.CNAME || owners[i] !== current) continue;
      if (next !== '' && next !== targets[i]) return false; // two targets for one owner
      next = targets[i]!;
    }
    if (next === '') break;
    if (visited.has(next)) return false; // a loop
    visited.add(next);
    current = next;
  }
  for (let i = 0; i < an; i++) if (types[i] === qtype && owners[i] === current) return true;
  return false;
}

/** RFC 4034 3.1.5: inception <= now <= expiration, in serial number arithmetic (RFC 1982) as miekg/dns does. */
function signatureValid(wire: Buffer, rdata: number, now: number): boolean {
  const year68 = 2 ** 31;
  const expiration = wire.readUInt32BE(rdata + 8);
  const inception = wire.readUInt32BE(rdata + 12);
  const ti = inception + Math.trunc((inception - now) / year68) * year68;
  const te = expiration + Math.trunc((expiration - now) / year68) * year68;
  return ti <= now && now <= te;
}

/**
 * The one reply builder, for every reply made from prepared records: header and question copied
 * from the request (its ID, opcode, RD, CD and the name's letter case), the records with every
 * TTL set to `ttl` (-1 leaves them as they are), the SOA serial set to `serial` (-1: as it is),
 * the zone spelled as the asker spelled it, then an OPT echoing the request's, if it had one.
 * With `fit`, only the whole records that fit the asker's buffer are written and TC is set when
 * some do not; without, the reply is whole and the server cuts it (so a plugin may shuffle it first).
 */
export function writeReply(
  req: Request,
  p: PreparedReply,
  ttl: number,
  flags: number,
  serial = -1,
  fit = false,
): Buffer {
  const body = p.body;
  const qEnd = req.questionEnd;
  const hasOpt = req.edns !== null;
  // The records copied end here: the OPT, if any, follows.
  let end = qEnd + body.length;
  let buf: Buffer;
  if (fit && end + (hasOpt ? OPT_LEN : 0) > req.maxSize) {
    // Too big for the asker: writeRecords keeps the whole records that fit, and sets TC.
    buf = writeRecords(req, flags, body, body.length, p.an, p.ns, p.ar, true);
    end = buf.length - (hasOpt ? OPT_LEN : 0);
  } else {
    // The whole answer, framed here as writeRecords frames it: a cache hit's whole cost is this.
    buf = Buffer.allocUnsafe(hasOpt ? end + OPT_LEN : end);
    copyBytes(req.raw, 0, qEnd, buf, 0);
    copyBytes(body, 0, body.length, buf, qEnd);
    buf[2] = flags >>> 8;
    buf[3] = flags & 0xff;
    buf[4] = 0;
    buf[5] = 1;
    buf[6] = p.an >>> 8;
    buf[7] = p.an & 0xff;
    buf[8] = p.ns >>> 8;
    buf[9] = p.ns & 0xff;
    const ar = hasOpt ? p.ar + 1 : p.ar;
    buf[10] = ar >>> 8;
    buf[11] = ar & 0xff;
    if (hasOpt) writeOptEcho(buf, end, req, 0);
  }
  const offs = p.ttlOffsets;
  if (ttl >= 0 && offs !== null) {
    const b0 = ttl >>> 24;
    const b1 = (ttl >>> 16) & 0xff;
    const b2 = (ttl >>> 8) & 0xff;
    const b3 = ttl & 0xff;
    for (let i = 0; i < offs.length; i++) {
      const o = qEnd + offs[i]!;
      if (o + 4 > end) break; // offsets ascend: the rest were cut
      buf[o] = b0;
      buf[o + 1] = b1;
      buf[o + 2] = b2;
      buf[o + 3] = b3;
    }
  }
  if (serial >= 0 && p.serialAt >= 0 && qEnd + p.serialAt + 4 <= end)
    buf.writeUInt32BE(serial >>> 0, qEnd + p.serialAt);
  const zoneAt = p.zoneAt;
  if (zoneAt !== null && req.qname !== req.name && !req.qname.endsWith(p.zone)) {
    const from = zoneOffset(qEnd, p.zone);
    const to = from + wireLength(p.zone) - 1;
    for (const off of zoneAt) if (qEnd + off + (to - from) <= end) copyBytes(req.raw, from, to, buf, qEnd + off);
  }
  return buf;
}

/** Flags of a reply from the cache: the request's opcode/RD/CD, the kept RA and rcode, AD only for DNSSEC-aware askers. */
export function replyFlags(req: Request, p: PreparedReply, aa: number): number {
  const f = p.flags;
  const adOk = (req.edns !== null && req.edns.do) || (req.flags & FLAG_AD) !== 0;
  return 0x8000 | (req.flags & 0x7910) | aa | (f & FLAG_RA) | (adOk ? f & FLAG_AD : 0) | (f & 0xf);
}
