// Drops the authority and additional sections from positive answers: smaller replies, same data.

import { QType, Rcode } from '../../dns/constants.js';
import type { Handler, HandlerResult, Next, Request, Response } from '../../server/request.js';
import type { PluginSetup } from '../plugin.js';
import { noArgs, noBlock, once } from '../../corefile/args.js';

export class MinimalHandler implements Handler {
  readonly name = 'minimal';

  serveDNS(req: Request, next: Next): HandlerResult {
    const r = next(req);
    if (r instanceof Promise) return r.then((res) => this.trim(req, res));
    return this.trim(req, r);
  }

  private trim(req: Request, res: Response): Response {
    if (res.rcode !== Rcode.NOERROR || res.isBare || res.dropped) return res;
    const wire = res.peekWire();
    // A wire reply with nothing past its answers is already minimal.
    if (wire !== null && wire.length >= 12 && wire.readUInt16BE(8) === 0 && wire.readUInt16BE(10) <= (req.edns ? 1 : 0))
      return res;
    const m = res.toMessage(req);
    // NODATA and delegations keep their authority section (CoreDNS: only response.NoError is trimmed).
    if (m.answers.length === 0) return res;
    if (m.authorities.length === 0 && m.additionals.length === 0) return res;
    if (m.authorities.some((rr) => rr.type === QType.SOA) && m.answers.every((rr) => rr.type === QType.CNAME))
      return res;
    m.authorities = [];
    m.additionals = [];
    res.setMessage(m);
    return res;
  }
}

export const setup: PluginSetup = (ds) => {
  const d = once(ds, 'minimal');
  noArgs(d);
  noBlock(d);
  return { name: 'minimal', handler: new MinimalHandler() };
};
