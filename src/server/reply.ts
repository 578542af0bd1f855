// Turns a plugin's Response into the bytes sent to the client: OPT echo, BADVERS,
// truncation to the client's buffer with TC set.

import { Rcode } from '../dns/constants.js';
import { decodeMessage, encodeMessage, type Message } from '../dns/message.js';
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
 * Falls back to TC when it does not fit the client's buffer.
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
  const qEnd = req.questionEnd;
  const opt = req.edns ? OPT_LEN : 0;
  const len = qEnd + records.length + opt;
  if (len > req.maxSize) return bareReply(req, rcode, extraFlags | 0x0200);
  const buf = Buffer.allocUnsafe(len);
  req.raw.copy(buf, 0, 0, qEnd);
  buf.writeUInt16BE(replyFlags(req, rcode, extraFlags), 2);
  buf.writeUInt16BE(1, 4);
  buf.writeUInt16BE(an, 6);
  buf.writeUInt16BE(ns, 8);
  buf.writeUInt16BE(ar + (opt ? 1 : 0), 10);
  records.copy(buf, qEnd);
  if (opt) writeOptEcho(buf, qEnd + records.length, req, rcode);
  return buf;
}

function prepareMessage(req: Request, m: Message): void {
  m.id = req.id;
  m.qr = true;
  if (req.edns) {
    if (!m.edns) m.edns = { udpSize: req.edns.udpSize < 512 ? 512 : req.edns.udpSize, version: 0, do: req.edns.do, zflags: 0, options: [] };
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
    const m = decodeMessage(wire);
    prepareMessage(req, m);
    return encodeMessage(m, { maxSize: req.maxSize });
  }
  const msg = res.peekMessage();
  if (msg === null) return bareReply(req, res.rcode);
  prepareMessage(req, msg);
  return encodeMessage(msg, { maxSize: req.maxSize });
}
