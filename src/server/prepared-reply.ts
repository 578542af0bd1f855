// What the cache keeps of a response, and the hit path that turns it back into a reply.
// A response is walked once when it arrives: its OPT is cut off (EDNS is hop-by-hop and
// every reply echoes the asker's own), and the offset of every TTL field is recorded so a
// hit patches TTLs in place without decoding anything.

import { copyBytes } from '../dns/bytes.js';
import { QType } from '../dns/constants.js';
import { decodeName, skipName } from '../dns/name.js';
import type { PreparedAnswer } from './invalidation.js';
import type { Request } from './request.js';
import { writeOptEcho } from './reply.js';

const OPT_LEN = 11;
export const FLAG_AA = 0x0400;
export const FLAG_TC = 0x0200;
export const FLAG_RA = 0x0080;
export const FLAG_AD = 0x0020;
export const FLAG_CD = 0x0010;

/** A response reduced to the parts every reply built from it shares. */
export interface PreparedReply {
  /** Answer, authority and additional RRs as they came, without the OPT. */
  readonly body: Buffer;
  readonly an: number;
  readonly ns: number;
  /** Additional records, OPT not counted. */
  readonly ar: number;
  /** The responder's header flags word (AA, TC, RA, AD, rcode). */
  readonly flags: number;
  /** Where each RR's TTL field sits in `body`. */
  readonly ttlOffsets: Uint16Array;
  /** Header plus question length it was made for: names in `body` may point into that question. */
  readonly questionEnd: number;
}

/** What the walk learned about a response, for the caching decision. */
export interface ResponseFacts extends PreparedReply {
  /** Smallest TTL of any RR (OPT excluded); -1 when there is none. */
  readonly minTtl: number;
  readonly hasSoa: boolean;
  /** min(every RR's TTL, SOA MINIMUM): the negative-caching TTL of RFC 2308 5. */
  readonly negativeTtl: number;
  readonly nsInAuthority: number;
  /**
   * True when the CNAME chain from the question (if any) ends at a name that holds a record of
   * the asked type: no second target for one owner, no loop, no record off the chain counted.
   */
  readonly answerHasQtype: boolean;
  /** With DO: an RRSIG outside its validity period (CoreDNS does not cache such a reply). */
  readonly expiredSignature: boolean;
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
export function prepareResponse(req: Request, wire: Buffer): ResponseFacts | PrepareProblem {
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
  return {
    body,
    an,
    ns,
    ar: optStart >= 0 ? ar - 1 : ar,
    flags: wire.readUInt16BE(2),
    ttlOffsets: count === total ? offsets : offsets.slice(0, count),
    questionEnd: qEnd,
    minTtl,
    hasSoa,
    negativeTtl: hasSoa ? Math.min(minTtl, soaMinimum) : -1,
    nsInAuthority,
    answerHasQtype,
    expiredSignature,
  };
}

/**
 * The facts of `wire`, a reply to `req` that the plugin which wrote it described (`info`), with no
 * walk of its records: only the header and the question are checked against the description (a
 * plugin on the way may have replaced the bytes). Null when they disagree: walk it instead.
 */
export function describedResponse(req: Request, wire: Buffer, info: PreparedAnswer): ResponseFacts | null {
  const offsets = info.ttlOffsets;
  if (offsets === null) return null;
  const qEnd = req.questionEnd;
  const len = qEnd + info.recordsLength;
  if (wire.length !== len && wire.length !== len + OPT_LEN) return null;
  const flags = wire.readUInt16BE(2);
  if ((flags & FLAG_TC) !== 0) return null;
  if (wire.readUInt16BE(4) !== 1 || wire.readUInt16BE(6) !== info.an || wire.readUInt16BE(8) !== info.ns) return null;
  if (wire.readUInt16BE(10) !== info.ar + (wire.length === len ? 0 : 1)) return null;
  // A loop, not Buffer#compare with offsets: a question is a few dozen octets, the binding call costs more.
  const raw = req.raw;
  for (let i = 12; i < qEnd; i++) if (wire[i] !== raw[i]) return null;
  // An exact, unpooled copy, as prepareResponse makes.
  const body = Buffer.allocUnsafeSlow(info.recordsLength);
  wire.copy(body, 0, qEnd, len);
  return {
    body,
    an: info.an,
    ns: info.ns,
    ar: info.ar,
    flags,
    ttlOffsets: offsets,
    questionEnd: qEnd,
    minTtl: info.minTtl,
    hasSoa: info.hasSoa,
    negativeTtl: info.negativeTtl,
    nsInAuthority: info.nsInAuthority,
    answerHasQtype: info.answerHasQtype,
    expiredSignature: false,
  };
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
 * The hit path: header and question copied from the request (its ID, opcode, RD, CD and
 * the name's letter case), the kept records with every TTL set to `ttl` (-1 leaves them
 * as they are), then an OPT echoing the request's, if it had one.
 */
export function writeReply(req: Request, p: PreparedReply, ttl: number, flags: number): Buffer {
  const qEnd = req.questionEnd;
  const body = p.body;
  const optAt = qEnd + body.length;
  const hasOpt = req.edns !== null;
  const buf = Buffer.allocUnsafe(hasOpt ? optAt + OPT_LEN : optAt);
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
  if (ttl >= 0) {
    const offs = p.ttlOffsets;
    const b0 = ttl >>> 24;
    const b1 = (ttl >>> 16) & 0xff;
    const b2 = (ttl >>> 8) & 0xff;
    const b3 = ttl & 0xff;
    for (let i = 0; i < offs.length; i++) {
      const o = qEnd + offs[i]!;
      buf[o] = b0;
      buf[o + 1] = b1;
      buf[o + 2] = b2;
      buf[o + 3] = b3;
    }
  }
  if (hasOpt) writeOptEcho(buf, optAt, req, 0);
  return buf;
}

/** Flags of a reply from the cache: the request's opcode/RD/CD, the kept RA and rcode, AD only for DNSSEC-aware askers. */
export function replyFlags(req: Request, p: PreparedReply, aa: number): number {
  const f = p.flags;
  const adOk = (req.edns !== null && req.edns.do) || (req.flags & FLAG_AD) !== 0;
  return 0x8000 | (req.flags & 0x7910) | aa | (f & FLAG_RA) | (adOk ? f & FLAG_AD : 0) | (f & 0xf);
}
