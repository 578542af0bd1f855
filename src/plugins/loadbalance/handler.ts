// Shuffles A, AAAA and MX records of NOERROR replies; CNAMEs stay first, other records keep their place.
// Ready wire replies (cache hits, kubernetes, hosts) are shuffled in place when their address
// records have pointer owners, which nothing else can point into; only odd shapes are decoded.

import { QType, Rcode } from '../../dns/constants.js';
import type { ResourceRecord } from '../../dns/message.js';
import { skipName } from '../../dns/name.js';
import {
  isZoneTransfer,
  type Handler,
  type HandlerResult,
  type Next,
  type Request,
  type Response,
} from '../../server/request.js';

function shuffleInPlace<T>(list: T[]): void {
  for (let i = list.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    const t = list[i]!;
    list[i] = list[j]!;
    list[j] = t;
  }
}

function shuffle(rrs: ResourceRecord[]): ResourceRecord[] {
  const cname: ResourceRecord[] = [];
  const addr: ResourceRecord[] = [];
  const mx: ResourceRecord[] = [];
  const rest: ResourceRecord[] = [];
  for (const r of rrs) {
    if (r.type === QType.CNAME) cname.push(r);
    else if (r.type === QType.A || r.type === QType.AAAA) addr.push(r);
    else if (r.type === QType.MX) mx.push(r);
    else rest.push(r);
  }
  shuffleInPlace(addr);
  shuffleInPlace(mx);
  return [...cname, ...rest, ...addr, ...mx];
}

/**
 * Shuffles the answer section of a wire reply when it is a run of address records whose
 * owners are compression pointers, optionally after CNAMEs, or has nothing to shuffle (no
 * address or MX record, CNAMEs first). Returns false when the
 * shape is anything else (the caller decodes instead).
 */
export function shuffleWireAnswers(buf: Buffer, questionEnd: number): boolean {
  const an = buf.readUInt16BE(6);
  let pos = questionEnd;
  let runStart = -1;
  let rest = false;
  let count = 0;
  let size = -1;
  for (let i = 0; i < an; i++) {
    if (pos + 2 > buf.length) return false;
    const pointerOwner = (buf[pos]! & 0xc0) === 0xc0;
    const nameEnd = pointerOwner ? pos + 2 : skipName(buf, pos);
    if (nameEnd + 10 > buf.length) return false;
    const type = buf.readUInt16BE(nameEnd);
    const end = nameEnd + 10 + buf.readUInt16BE(nameEnd + 8);
    if (end > buf.length) return false;
    if (type === QType.A || type === QType.AAAA) {
      if (!pointerOwner || rest) return false;
      if (runStart < 0) runStart = pos;
      count++;
      // -2: the run's records are not all of one size.
      if (size === -1) size = end - pos;
      else if (size !== end - pos) size = -2;
    } else if (type === QType.CNAME && runStart < 0 && !rest) {
      // Leading CNAMEs stay first.
    } else if (type !== QType.CNAME && type !== QType.MX && runStart < 0) {
      // Types that are not shuffled (SRV, TXT…) with no address after them: the order stays.
      rest = true;
    } else {
      return false;
    }
    pos = end;
  }
  if (count < 2) return true;
  if (size > 0) {
    // Records of one size (all A, or all AAAA): swapped in place, octet by octet (a call to
    // copy per record costs more than the record's 16 octets).
    for (let i = count - 1; i > 0; i--) {
      const j = Math.floor(Math.random() * (i + 1));
      if (j === i) continue;
      const a = runStart + i * size;
      const b = runStart + j * size;
      for (let k = 0; k < size; k++) {
        const t = buf[a + k]!;
        buf[a + k] = buf[b + k]!;
        buf[b + k] = t;
      }
    }
    return true;
  }
  const spans: Array<[number, number]> = [];
  for (let i = 0, at = runStart; i < count; i++) {
    const end = at + 12 + buf.readUInt16BE(at + 10);
    spans.push([at, end]);
    at = end;
  }
  const copies = spans.map(([s, e]) => Buffer.from(buf.subarray(s, e)));
  shuffleInPlace(copies);
  let at = runStart;
  for (const c of copies) {
    c.copy(buf, at);
    at += c.length;
  }
  return true;
}

/** Questions whose answer section can hold records worth shuffling. */
function spreads(qtype: number): boolean {
  return (
    qtype === QType.A || qtype === QType.AAAA || qtype === QType.MX || qtype === QType.ANY || qtype === QType.CNAME
  );
}

export class LoadBalanceHandler implements Handler {
  readonly name = 'loadbalance';

  serveDNS(req: Request, next: Next): HandlerResult {
    const r = next(req);
    if (r instanceof Promise) return r.then((res) => this.balance(req, res));
    return this.balance(req, r);
  }

  private balance(req: Request, res: Response): Response {
    if (res.rcode !== Rcode.NOERROR || res.isBare) return res;
    if (isZoneTransfer(req.qtype)) return res;
    const w = res.peekWire();
    if (w !== null && !spreads(req.qtype)) {
      // An answer to any other question holds no address or MX record to spread clients over
      // (a wire answer's other sections are left as they are): not even walked.
      return res;
    }
    if (w !== null) {
      if (w.length < 12 || w.readUInt16BE(6) + w.readUInt16BE(8) + w.readUInt16BE(10) < 2) return res;
      // An order kept by the native table would end the round robin.
      req.noFast();
      // Only the answer section matters to clients picking an address; the common shapes are
      // handled without decoding. The reply buffer is ours to change (built for this query).
      if (w.readUInt16BE(8) === 0 && w.readUInt16BE(4) === 1) {
        try {
          if (shuffleWireAnswers(w, req.questionEnd)) return res;
        } catch {
          // Malformed: leave it to the decoder below, which reports properly.
        }
      }
    }
    const m = res.toMessage(req);
    if (m.answers.length + m.authorities.length + m.additionals.length < 2) return res;
    req.noFast();
    m.answers = shuffle(m.answers);
    m.authorities = shuffle(m.authorities);
    m.additionals = shuffle(m.additionals);
    res.setMessage(m);
    return res;
  }
}
