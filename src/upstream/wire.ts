// Byte-level checks and edits of DNS messages sent to and received from upstreams. Upstream answers are
// never decoded into objects: the ID, QR bit and question are compared in place and the
// record sections are walked only to prove their lengths add up.

import { randomFillSync } from 'node:crypto';

const ID_POOL_BYTES = 4096;
const idPool = Buffer.allocUnsafe(ID_POOL_BYTES);
let idPos = ID_POOL_BYTES;

/** An unpredictable 16-bit message ID (from the CSPRNG, drawn 2,048 at a time). */
export function randomId(): number {
  if (idPos >= ID_POOL_BYTES) {
    randomFillSync(idPool);
    idPos = 0;
  }
  const id = (idPool[idPos]! << 8) | idPool[idPos + 1]!;
  idPos += 2;
  return id;
}

/** A random integer in [0, n) for n <= 65536, from the same pool. */
export function randomBelow(n: number): number {
  return n <= 1 ? 0 : randomId() % n;
}

export const FLAG_QR = 0x80; // in byte 2
export const FLAG_TC = 0x02; // in byte 2

/**
 * True when `reply` (a DNS message at offset 0) is a response with one question equal to
 * the question of `query` (which ends at `questionEnd`): the name compared ignoring ASCII
 * case, as CoreDNS's request.Match does, type and class byte for byte.
 */
export function answersQuestion(reply: Buffer, query: Buffer, questionEnd: number): boolean {
  if (reply.length < questionEnd) return false;
  if ((reply[2]! & FLAG_QR) === 0) return false;
  if (reply[4] !== 0 || reply[5] !== 1) return false;
  const nameEnd = questionEnd - 4;
  for (let i = 12; i < nameEnd; i++) {
    let a = reply[i]!;
    let b = query[i]!;
    if (a === b) continue;
    // Length octets are at most 63, so folding A-Z (65-90) never touches them.
    if (a >= 0x41 && a <= 0x5a) a |= 0x20;
    if (b >= 0x41 && b <= 0x5a) b |= 0x20;
    if (a !== b) return false;
  }
  for (let i = nameEnd; i < questionEnd; i++) if (reply[i] !== query[i]) return false;
  return true;
}

/** Offset after a (possibly compressed) name starting at `pos`, or -1 when it runs off the end. */
function skipWireName(msg: Buffer, pos: number): number {
  for (let guard = 0; guard < 128; guard++) {
    if (pos >= msg.length) return -1;
    const len = msg[pos]!;
    if (len === 0) return pos + 1;
    if ((len & 0xc0) === 0xc0) return pos + 2 <= msg.length ? pos + 2 : -1;
    if ((len & 0xc0) !== 0) return -1;
    pos += 1 + len;
  }
  return -1;
}

/**
 * Walks every record after the question (which ends at `questionEnd`) without decoding:
 * true when the section counts, names and RDLENGTHs all fit the message.
 */
export function recordsFit(msg: Buffer, questionEnd: number): boolean {
  const count = msg.readUInt16BE(6) + msg.readUInt16BE(8) + msg.readUInt16BE(10);
  let pos = questionEnd;
  for (let i = 0; i < count; i++) {
    pos = skipWireName(msg, pos);
    if (pos < 0 || pos + 10 > msg.length) return false;
    pos += 10 + msg.readUInt16BE(pos + 8);
    if (pos > msg.length) return false;
  }
  return true;
}

/**
 * The header and question of `reply` with every section emptied and TC set: what CoreDNS
 * returns when an upstream sets TC but sends records that do not parse.
 */
export function emptyTruncated(reply: Buffer, questionEnd: number): Buffer {
  const out = Buffer.allocUnsafe(questionEnd);
  reply.copy(out, 0, 0, questionEnd);
  out[2] = out[2]! | FLAG_TC;
  out.writeUInt16BE(0, 6);
  out.writeUInt32BE(0, 8);
  return out;
}

/** Number of answer records (for next_on_nodata). */
export function answerCount(msg: Buffer): number {
  return msg.readUInt16BE(6);
}

/** Rcode from the header. */
export function headerRcode(msg: Buffer): number {
  return msg[3]! & 0xf;
}
