// Turns a plugin's Response into the bytes sent to the client: OPT echo, BADVERS,
// truncation to the client's buffer with TC set.

import { copyBytes } from '../dns/bytes.js';
import { Rcode } from '../dns/constants.js';
import { decodeMessage, encodeMessage, type Message } from '../dns/message.js';
import { skipName } from '../dns/name.js';
import type { Request, Response } from './request.js';
import { answerEdnsOptions, MALFORMED, readAsked } from './edns-options.js';

const OPT_LEN = 11;

/** Flags word of a reply to `req`: QR, the request's opcode, RD and CD, plus `extra` bits. */
export function replyFlags(req: Request, rcode: number, extra = 0): number {
  return 0x8000 | (req.flags & 0x7910) | extra | (rcode & 0xf);
}

/** Writes the 11-octet OPT record echoing the request's UDP size and DO bit at `at`. */
export function writeOptEcho(buf: Buffer, at: number, req: Request, rcode: number): void {
  const e = req.edns!;
  buf[at] = 0;
  buf.writeUInt16BE(41, at + 1);
  // BADVERS: CoreDNS's reply OPT carries no size (0); every other reply echoes the client's.
  buf.writeUInt16BE(rcode === Rcode.BADVERS ? 0 : e.udpSize < 512 ? 512 : e.udpSize, at + 3);
  buf.writeUInt32BE(((((rcode >> 4) & 0xff) << 24) | (e.do ? 0x8000 : 0)) >>> 0, at + 5);
  buf.writeUInt16BE(0, at + 9);
}

/** A reply with no records: the question copied, the OPT echoed. */
export function bareReply(req: Request, rcode: number, extraFlags = 0): Buffer {
  const qEnd = req.questionEnd;
  const opt = req.edns ? OPT_LEN : 0;
  const buf = Buffer.allocUnsafe(qEnd + opt);
  req.raw.copy(buf, 0, 0, qEnd);
  buf.writeUInt16BE(replyFlags(req, rcode, extraFlags), 2);
  buf.writeUInt16BE(1, 4);
  buf.writeUInt32BE(0, 6);
  buf.writeUInt16BE(opt ? 1 : 0, 10);
  if (opt) writeOptEcho(buf, qEnd, req, rcode);
  // A BADVERS reply speaks EDNS version 0 only: no options (as CoreDNS).
  return opt && rcode !== Rcode.BADVERS ? answerEdnsOptions(req, buf) : buf;
}

/**
 * The fast path for answers built from prepared records: header and question copied
 * from the request (so the letter case is as asked), then `records` (owner names
 * encoded relative to a question at offset 12, e.g. the pointer c0 0c), then the OPT echo.
 * When it does not fit the client's buffer, the records that fit are kept and TC is set.
 */
export function recordsReply(
  req: Request,
  rcode: number,
  extraFlags: number,
  records: Buffer,
  an: number,
  ns: number,
  ar: number,
): Buffer {
  return writeRecords(req, replyFlags(req, rcode, extraFlags), records, records.length, an, ns, ar, true, rcode);
}

/**
 * Every reply made of prepared records is framed here (recordsReply; writeReply in
 * prepared-reply.ts, which then patches TTLs, serial and spelling): the request's header and
 * question with `flags`, the first `length` octets of `records`, the OPT echo. With `fit`, only
 * the whole records that fit the client's buffer are copied and TC is set when some do not.
 */
export function writeRecords(
  req: Request,
  flags: number,
  records: Buffer,
  length: number,
  an: number,
  ns: number,
  ar: number,
  fit: boolean,
  rcode = 0,
): Buffer {
  const qEnd = req.questionEnd;
  const opt = req.edns ? OPT_LEN : 0;
  let end = length;
  if (fit && qEnd + end + opt > req.maxSize) {
    // As many whole records as fit, found by their lengths; the rest are not copied.
    const room = req.maxSize - qEnd - opt;
    const total = an + ns + ar;
    let kept = 0;
    end = 0;
    while (kept < total) {
      const at = skipName(records, end);
      const next = at + 10 + records.readUInt16BE(at + 8);
      if (next > room) break;
      end = next;
      kept++;
    }
    const keptAn = kept < an ? kept : an;
    const keptNs = kept - keptAn < ns ? kept - keptAn : ns;
    ar = kept - keptAn - keptNs;
    an = keptAn;
    ns = keptNs;
    flags |= 0x0200;
  }
  const buf = Buffer.allocUnsafe(qEnd + end + opt);
  copyBytes(req.raw, 0, qEnd, buf, 0);
  // Plain byte writes: writeUInt16BE's argument checks show up at this rate.
  buf[2] = flags >>> 8;
  buf[3] = flags & 0xff;
  buf[4] = 0;
  buf[5] = 1;
  buf[6] = an >>> 8;
  buf[7] = an & 0xff;
  buf[8] = ns >>> 8;
  buf[9] = ns & 0xff;
  const arCount = ar + (opt ? 1 : 0);
  buf[10] = arCount >>> 8;
  buf[11] = arCount & 0xff;
  copyBytes(records, 0, end, buf, qEnd);
  if (opt) writeOptEcho(buf, qEnd + end, req, rcode);
  return buf;
}

function prepareMessage(req: Request, m: Message): void {
  m.id = req.id;
  m.qr = true;
  if (req.edns) {
    if (!m.edns)
      m.edns = {
        udpSize: req.edns.udpSize < 512 ? 512 : req.edns.udpSize,
        version: 0,
        do: req.edns.do,
        zflags: 0,
        options: [],
      };
  } else if (m.edns && m.rcode <= 0xf) {
    // The client did not speak EDNS: it gets no OPT back (RFC 6891 7).
    m.edns = null;
  }
}

/** The final bytes for `res` as an answer to `req`. Never throws: a broken reply becomes SERVFAIL. */
export function finalizeReply(req: Request, res: Response): Buffer {
  const asked = readAsked(req);
  if (asked === MALFORMED) return bareReply(req, Rcode.FORMERR);
  try {
    const out = encodeReply(req, res);
    return asked === null ? out : answerEdnsOptions(req, out, asked);
  } catch {
    return bareReply(req, Rcode.SERVFAIL);
  }
}

function encodeReply(req: Request, res: Response): Buffer {
  const wire = res.peekWire();
  if (wire !== null) {
    if (wire.length <= req.maxSize) return wire;
    const cut = cutWire(req, wire, req.maxSize);
    if (cut !== null) return cut;
    const m = decodeMessage(wire);
    prepareMessage(req, m);
    return encodeMessage(m, { maxSize: req.maxSize });
  }
  const msg = res.peekMessage();
  if (msg === null) return bareReply(req, res.rcode);
  prepareMessage(req, msg);
  return encodeMessage(msg, { maxSize: req.maxSize });
}

/** End offsets of the records of the reply being cut (reused: the event loop runs one cut at a time). */
let ends = new Int32Array(1024);

/**
 * `wire` cut to `max` octets at a record boundary, without decoding: the records are walked
 * by skipping owner names and RDATA, as many leading records as fit are kept (answer, then
 * authority, then additional, as miekg/dns's Truncate), TC is set, the question and the OPT
 * record are kept. Compression pointers only point backwards, so a kept prefix stays valid.
 * Null when the OPT record is not the last one (the caller decodes instead). Throws on a
 * malformed message.
 */
export function cutWire(req: Request, wire: Buffer, max: number): Buffer | null {
  const qd = wire.readUInt16BE(4);
  const an = wire.readUInt16BE(6);
  const ns = wire.readUInt16BE(8);
  const ar = wire.readUInt16BE(10);
  let pos = 12;
  for (let i = 0; i < qd; i++) pos = skipName(wire, pos) + 4;
  if (pos > wire.length) throw new RangeError('question runs past the end');
  const qEnd = pos;
  const total = an + ns + ar;
  if (ends.length < total) ends = new Int32Array(total);
  let optStart = -1;
  for (let i = 0; i < total; i++) {
    const start = pos;
    const at = skipName(wire, pos);
    if (at + 10 > wire.length) throw new RangeError('record runs past the end');
    pos = at + 10 + wire.readUInt16BE(at + 8);
    if (pos > wire.length) throw new RangeError('record runs past the end');
    if (i >= an + ns && wire.readUInt16BE(at) === 41) {
      if (i !== total - 1) return null;
      optStart = start;
    }
    ends[i] = pos;
  }
  const records = optStart < 0 ? total : total - 1;
  // The OPT sent: the reply's own when it has one, else an echo of the request's; none for a
  // client without EDNS unless it carries extended rcode bits.
  let optLen = 0;
  if (optStart >= 0 && (req.edns !== null || wire[skipName(wire, optStart) + 4] !== 0)) optLen = pos - optStart;
  else if (optStart < 0 && req.edns !== null) optLen = OPT_LEN;
  let kept = 0;
  let end = qEnd;
  while (kept < records && ends[kept]! + optLen <= max) end = ends[kept++]!;
  const out = Buffer.allocUnsafe(end + optLen);
  wire.copy(out, 0, 0, end);
  out.writeUInt16BE(req.id, 0);
  out[2] = out[2]! | 0x82;
  const keptAn = kept < an ? kept : an;
  const keptNs = kept - keptAn < ns ? kept - keptAn : ns;
  out.writeUInt16BE(keptAn, 6);
  out.writeUInt16BE(keptNs, 8);
  out.writeUInt16BE(kept - keptAn - keptNs + (optLen > 0 ? 1 : 0), 10);
  if (optStart >= 0 && optLen > 0) wire.copy(out, end, optStart, optStart + optLen);
  else if (optLen > 0) writeOptEcho(out, end, req, wire[3]! & 0xf);
  return out;
}
