// EDNS options a modern server answers (the request's options are read only when it has some):
// RFC 7873/9018 server cookies, RFC 7828 edns-tcp-keepalive on TCP, RFC 8467 padding of replies
// to padded queries. CoreDNS echoes the request's options instead; see README "Differences".

import { createHmac, randomBytes } from 'node:crypto';
import { skipName } from '../dns/name.js';
import type { Request } from './request.js';

const COOKIE = 10;
const TCP_KEEPALIVE = 11;
const PADDING = 12;
/** RFC 8467 4.1: responses padded to a multiple of 468 octets. */
const RESPONSE_BLOCK = 468;
/** The TCP listener's idle timeout (10 s), in the option's units of 100 ms. */
const KEEPALIVE_UNITS = 100;

// One secret per process: no cookie is required or checked, so workers need not share it.
const secret = randomBytes(16);

/** The options of a request that need an answer. */
export interface Asked {
  clientCookie: Buffer | null;
  keepalive: boolean;
  padding: boolean;
}

/** A malformed COOKIE option: the reply is FORMERR (RFC 7873 5.2.2). */
export const MALFORMED = 'malformed';

/** What the request's options ask of the reply: null for nothing (no work), or MALFORMED. */
export function readAsked(req: Request): Asked | null | typeof MALFORMED {
  const e = req.edns;
  if (e === null || e.optLength <= 11) return null;
  const raw = req.raw;
  let p = e.optOffset + 11;
  const end = e.optOffset + e.optLength;
  if (end > raw.length) return null;
  const asked: Asked = { clientCookie: null, keepalive: false, padding: false };
  let any = false;
  while (p + 4 <= end) {
    const code = raw.readUInt16BE(p);
    const len = raw.readUInt16BE(p + 2);
    if (p + 4 + len > end) return null;
    if (code === COOKIE) {
      // A client cookie (8) alone, or with a server cookie of 8 to 32 octets.
      if (len !== 8 && (len < 16 || len > 40)) return MALFORMED;
      asked.clientCookie = raw.subarray(p + 4, p + 12);
      any = true;
    } else if (code === TCP_KEEPALIVE) {
      // Only over TCP, and only the empty form a query may carry (RFC 7828 3.2.1).
      if (req.client.proto === 'tcp' && len === 0) {
        asked.keepalive = true;
        any = true;
      }
    } else if (code === PADDING) {
      asked.padding = true;
      any = true;
    }
    p += 4 + len;
  }
  return any ? asked : null;
}

/** RFC 9018's layout: version 1, reserved, timestamp, then 8 octets of MAC over the client's cookie and address. */
function serverCookie(req: Request, clientCookie: Buffer): Buffer {
  const head = Buffer.alloc(8);
  head[0] = 1;
  head.writeUInt32BE(Math.floor(Date.now() / 1000) >>> 0, 4);
  const mac = createHmac('sha256', secret).update(clientCookie).update(head).update(req.client.remoteAddress).digest();
  return Buffer.concat([head, mac.subarray(0, 8)]);
}

/** Where the OPT record of `reply` starts and ends, or null. */
function findOpt(reply: Buffer): { start: number; end: number } | null {
  if (reply.length < 12) return null;
  const qd = reply.readUInt16BE(4);
  const rrs = reply.readUInt16BE(6) + reply.readUInt16BE(8) + reply.readUInt16BE(10);
  let p = 12;
  for (let i = 0; i < qd; i++) p = skipName(reply, p) + 4;
  for (let i = 0; i < rrs; i++) {
    const start = p;
    const nameEnd = skipName(reply, p);
    if (nameEnd + 10 > reply.length) return null;
    const end = nameEnd + 10 + reply.readUInt16BE(nameEnd + 8);
    if (reply.readUInt16BE(nameEnd) === 41 && reply[start] === 0) return { start, end };
    p = end;
  }
  return null;
}

/**
 * `reply` with the options the request asked for written into its OPT (replacing any COOKIE,
 * keepalive or padding that was there, e.g. an upstream's). Unchanged when nothing was asked,
 * there is no OPT, or the options would not fit the client's buffer.
 */
export function answerEdnsOptions(req: Request, reply: Buffer, asked = readAsked(req)): Buffer {
  if (asked === null || asked === MALFORMED) return reply;
  let opt: { start: number; end: number } | null;
  try {
    opt = findOpt(reply);
  } catch {
    return reply;
  }
  if (opt === null) return reply;
  const kept: Buffer[] = [];
  for (let p = opt.start + 11; p + 4 <= opt.end;) {
    const code = reply.readUInt16BE(p);
    const next = p + 4 + reply.readUInt16BE(p + 2);
    if (next > opt.end) break;
    if (code !== COOKIE && code !== TCP_KEEPALIVE && code !== PADDING) kept.push(reply.subarray(p, next));
    p = next;
  }
  if (asked.clientCookie !== null) {
    const value = Buffer.concat([asked.clientCookie, serverCookie(req, asked.clientCookie)]);
    const o = Buffer.alloc(4);
    o.writeUInt16BE(COOKIE, 0);
    o.writeUInt16BE(value.length, 2);
    kept.push(o, value);
  }
  if (asked.keepalive) {
    const o = Buffer.alloc(6);
    o.writeUInt16BE(TCP_KEEPALIVE, 0);
    o.writeUInt16BE(2, 2);
    o.writeUInt16BE(KEEPALIVE_UNITS, 4);
    kept.push(o);
  }
  const header = Buffer.from(reply.subarray(opt.start, opt.start + 11));
  const before = reply.subarray(0, opt.start);
  const after = reply.subarray(opt.end);
  let rdata = Buffer.concat(kept);
  const max = req.maxSize;
  let length = before.length + 11 + rdata.length + after.length;
  if (asked.padding && length + 4 <= max) {
    // The padding option's own 4 octets count towards the block.
    const padded = Math.min(Math.ceil((length + 4) / RESPONSE_BLOCK) * RESPONSE_BLOCK, max);
    const o = Buffer.alloc(padded - length);
    o.writeUInt16BE(PADDING, 0);
    o.writeUInt16BE(o.length - 4, 2);
    rdata = Buffer.concat([rdata, o]);
    length = padded;
  }
  if (length > max) return reply;
  header.writeUInt16BE(rdata.length, 9);
  return Buffer.concat([before, header, rdata, after], length);
}
