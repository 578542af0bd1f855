// Lowers the UDP buffer size a client advertises to a maximum (never raises it), as CoreDNS's
// bufsize: answers over UDP are cut to it, and forward passes the lowered size upstream.

import type { Handler, HandlerResult, Next, Request } from '../../server/request.js';

/** CoreDNS's default (DNS Flag Day 2020): fits an IPv6 packet on a 1280-octet MTU. */
export const DEFAULT_BUFSIZE = 1232;

export class BufsizeHandler implements Handler {
  readonly name = 'bufsize';

  constructor(readonly size: number) {}

  serveDNS(req: Request, next: Next): HandlerResult {
    req.limitUdpSize(this.size);
    return next(req);
  }
}
