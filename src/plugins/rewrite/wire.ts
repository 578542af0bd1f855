// The common case without decoding or encoding a message: the rewritten query built as bytes,
// and a wire answer whose records name the rewritten question only by a pointer to it (as
// the kubernetes plugin's do) given the client's question instead, which is what `answer auto`
// and exact rules ask for. Anything else takes the Message path in handler.ts.

import { copyBytes } from '../../dns/bytes.js';
import { decodeName, skipName } from '../../dns/name.js';
import type { ParsedQuery } from '../../dns/query.js';
import type { Request } from '../../server/request.js';

/** The query with question (qname, qtype, qclass) as bytes, the OPT copied; null if qname is not plain. */
export function rebuildQuery(req: Request, qname: string, qtype: number, qclass: number): Request | null {
  if (qname === '.' || !qname.endsWith('.') || qname.length > 254) return null;
  const e = req.edns;
  const optLen = e ? e.optLength : 0;
  const qEnd = 12 + qname.length + 1 + 4;
  const raw = Buffer.allocUnsafe(qEnd + optLen);
  // Byte by byte: Buffer#copy and write* cost more than these few octets.
  const src = req.raw;
  raw[0] = src[0]!;
  raw[1] = src[1]!;
  raw[2] = src[2]!;
  raw[3] = src[3]!;
  raw[4] = 0;
  raw[5] = 1;
  raw[6] = raw[7] = raw[8] = raw[9] = raw[10] = 0;
  raw[11] = e ? 1 : 0;
  let p = 12;
  let start = 0;
  while (start < qname.length) {
    const dot = qname.indexOf('.', start);
    const len = dot - start;
    if (len <= 0 || len > 63) return null;
    raw[p++] = len;
    for (let i = start; i < dot; i++) {
      const c = qname.charCodeAt(i);
      if (c === 0x5c || c > 0x7e || c < 0x21) return null; // escapes and the like: the Message path
      raw[p++] = c;
    }
    start = dot + 1;
  }
  raw[p++] = 0;
  raw[p] = qtype >> 8;
  raw[p + 1] = qtype & 0xff;
  raw[p + 2] = qclass >> 8;
  raw[p + 3] = qclass & 0xff;
  if (e) copyBytes(src, e.optOffset, e.optOffset + e.optLength, raw, qEnd);
  const q: ParsedQuery = {
    id: req.id,
    flags: req.flags,
    opcode: req.opcode,
    qname,
    qnameLower: qname,
    qtype,
    qclass,
    questionEnd: qEnd,
    edns: e ? { ...e, optOffset: qEnd, optLength: optLen } : null,
  };
  return req.withQuery(raw, q);
}

const OPT = 41;

/** Types whose RDATA holds no compressible name (RFC 3597 section 4): their bytes move as they are (A, TXT, AAAA, OPT). */
function isFlatType(type: number): boolean {
  return type === 1 || type === 28 || type === 16 || type === OPT;
}

/** Where each record of the answer being swapped starts (reused: one swap runs at a time). */
let starts = new Int32Array(64);

/**
 * `wire` (the answer to `inner`) with `req`'s question, when every owner name is either the
 * pointer to the question or a name that does not involve it, and every record is A, AAAA, TXT
 * or OPT. Null otherwise.
 */
export function swapQuestion(req: Request, inner: Request, wire: Buffer): Buffer | null {
  if (wire.length < 12 || wire[4] !== 0 || wire[5] !== 1) return null;
  const innerQEnd = inner.questionEnd;
  let pos: number;
  try {
    pos = skipName(wire, 12) + 4;
  } catch {
    return null;
  }
  if (pos !== innerQEnd) return null;
  const delta = req.questionEnd - innerQEnd;
  const count = ((wire[6]! << 8) | wire[7]!) + ((wire[8]! << 8) | wire[9]!) + ((wire[10]! << 8) | wire[11]!);
  if (starts.length < count) starts = new Int32Array(count);
  // First pass: check every record, so the copy below cannot fail half-way.
  for (let i = 0; i < count; i++) {
    starts[i] = pos;
    // Owner name: the pointer to the question, or labels ending in the root or a pointer past it.
    let p = pos;
    for (;;) {
      if (p >= wire.length) return null;
      const b = wire[p]!;
      if (b === 0) {
        p++;
        break;
      }
      if ((b & 0xc0) === 0xc0) {
        if (p + 1 >= wire.length) return null;
        const target = ((b & 0x3f) << 8) | wire[p + 1]!;
        if (p === pos ? target !== 12 && target < innerQEnd : target < innerQEnd) return null;
        p += 2;
        break;
      }
      if (b > 63) return null;
      p += 1 + b;
    }
    if (p + 10 > wire.length) return null;
    // The rewritten name spelled out (not as the pointer) must also become the client's: the Message path does it.
    if (!(wire[pos] === 0xc0 && wire[pos + 1] === 12) && wire[pos] !== 0) {
      try {
        if (decodeName(wire, pos).name.toLowerCase() === inner.name) return null;
      } catch {
        return null;
      }
    }
    const type = (wire[p]! << 8) | wire[p + 1]!;
    if (!isFlatType(type)) return null;
    const end = p + 10 + ((wire[p + 8]! << 8) | wire[p + 9]!);
    if (end > wire.length || (type === OPT && wire[pos] !== 0)) return null;
    pos = end;
  }
  if (pos !== wire.length) return null;
  const out = Buffer.allocUnsafe(wire.length + delta);
  copyBytes(wire, 0, 12, out, 0);
  copyBytes(req.raw, 12, req.questionEnd, out, 12);
  copyBytes(wire, innerQEnd, wire.length, out, req.questionEnd);
  if (delta !== 0) {
    // Pointers past the question move with the records.
    for (let i = 0; i < count; i++) {
      let p = starts[i]! + delta;
      for (;;) {
        const b = out[p]!;
        if (b === 0) break;
        if ((b & 0xc0) === 0xc0) {
          const target = ((b & 0x3f) << 8) | out[p + 1]!;
          if (target >= innerQEnd) {
            const moved = target + delta;
            if (moved > 0x3fff) return null;
            out[p] = 0xc0 | (moved >> 8);
            out[p + 1] = moved & 0xff;
          }
          break;
        }
        p += 1 + b;
      }
    }
  }
  return out;
}
