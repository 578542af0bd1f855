// RFC 5001: when a query carries the NSID option, the reply's OPT carries this server's identifier.

import { hostname } from 'node:os';
import {
  hasRequestOption,
  type Handler,
  type HandlerResult,
  type Next,
  type Request,
  type Response,
} from '../../server/request.js';
import type { PluginSetup } from '../plugin.js';
import { noBlock, once } from '../../corefile/args.js';

const NSID = 3;

export class NsidHandler implements Handler {
  readonly name = 'nsid';

  constructor(private readonly data: Buffer) {}

  serveDNS(req: Request, next: Next): HandlerResult {
    if (!hasRequestOption(req, NSID)) return next(req);
    const r = next(req);
    if (r instanceof Promise) return r.then((res) => this.add(req, res));
    return this.add(req, r);
  }

  private add(req: Request, res: Response): Response {
    if (res.dropped) return res;
    const m = res.toMessage(req);
    const size = req.edns!.udpSize < 512 ? 512 : req.edns!.udpSize;
    m.edns ??= { udpSize: size, version: 0, do: req.edns!.do, zflags: 0, options: [] };
    m.edns.options = m.edns.options.filter((o) => o.code !== NSID);
    m.edns.options.push({ code: NSID, data: this.data });
    res.setMessage(m);
    return res;
  }
}

export const setup: PluginSetup = (ds) => {
  const d = once(ds, 'nsid');
  noBlock(d);
  // CoreDNS joins the arguments with spaces; without any, the host name.
  const text = d.args.length
    ? d.args.map((t) => t.text).join(' ')
    : process.env['HOSTNAME'] || hostname() || 'localhost';
  return { name: 'nsid', handler: new NsidHandler(Buffer.from(text, 'utf8')) };
};
