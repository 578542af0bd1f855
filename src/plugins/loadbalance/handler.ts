// Shuffles A, AAAA and MX records of NOERROR replies; CNAMEs stay first, other records keep their place.

import { QType, Rcode } from '../../dns/constants.js';
import type { ResourceRecord } from '../../dns/message.js';
import type { Handler, HandlerResult, Next, Request, Response } from '../../server/request.js';

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
  for (const list of [addr, mx]) {
    for (let i = list.length - 1; i > 0; i--) {
      const j = Math.floor(Math.random() * (i + 1));
      const t = list[i]!;
      list[i] = list[j]!;
      list[j] = t;
    }
  }
  return [...cname, ...rest, ...addr, ...mx];
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
    // Nothing to shuffle with fewer than two records: skip the decode.
    const w = res.peekWire();
    if (w !== null && w.length >= 12 && w.readUInt16BE(6) + w.readUInt16BE(8) + w.readUInt16BE(10) < 2) return res;
    const m = res.toMessage(req);
    if (m.answers.length + m.authorities.length + m.additionals.length < 2) return res;
    m.answers = shuffle(m.answers);
    m.authorities = shuffle(m.authorities);
    m.additionals = shuffle(m.additionals);
    res.setMessage(m);
    return res;
  }
}
