// Shuffles A, AAAA and MX records of NOERROR replies; CNAMEs stay first, other records keep their place.
// Ready wire replies (cache hits, kubernetes, hosts) are shuffled in place when their address
// records have pointer owners, which nothing else can point into; only odd shapes are decoded.

import { QType, Rcode } from '../../dns/constants.js';
import type { ResourceRecord } from '../../dns/message.js';
import { skipName } from '../../dns/name.js';
import type { Handler, HandlerResult, Next, Request, Response } from '../../server/request.js';

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

const SWAP_MAX = 64;
const swap = Buffer.alloc(SWAP_MAX);

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
  const spans: Array<[number, number]> = [];
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
      spans.push([pos, end]);
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
  if (spans.length < 2) return true;
  const size = spans[0]![1] - spans[0]![0];
  if (size <= SWAP_MAX && spans.every(([s, e]) => e - s === size)) {
    // Records of one size (all A, or all AAAA): swapped in place, no copy of each.
    for (let i = spans.length - 1; i > 0; i--) {
      const j = Math.floor(Math.random() * (i + 1));
      if (j === i) continue;
      const a = runStart + i * size;
      const b = runStart + j * size;
      buf.copy(swap, 0, a, a + size);
      buf.copy(buf, a, b, b + size);
      swap.copy(buf, b, 0, size);
    }
    return true;
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

export class LoadBalanceHandler implements Handler {
  readonly name = 'loadbalance';

  serveDNS(req: Request, next: Next): HandlerResult {
    const r = next(req);
    if (r instanceof Promise) return r.then((res) => this.balance(req, res));
    return this.balance(req, r);
  }

  private balance(req: Request, res: Response): Response {
    if (res.rcode !== Rcode.NOERROR || res.isBare) return res;
    if (req.qtype === QType.AXFR || req.qtype === QType.IXFR) return res;
    const w = res.peekWire();
    if (w !== null) {
      if (w.length < 12 || w.readUInt16BE(6) + w.readUInt16BE(8) + w.readUInt16BE(10) < 2) return res;
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
    m.answers = shuffle(m.answers);
    m.authorities = shuffle(m.authorities);
    m.additionals = shuffle(m.additionals);
    res.setMessage(m);
    return res;
  }
}
