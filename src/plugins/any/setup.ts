// RFC 8482: an ANY query gets one synthesized HINFO record instead of everything the name has.

import { QClass, QType } from '../../dns/constants.js';
import { Response, type Handler, type HandlerResult, type Next, type Request } from '../../server/request.js';
import type { PluginSetup } from '../plugin.js';
import { noArgs, noBlock, once } from '../../corefile/args.js';

/** HINFO RDATA: two character-strings, "ANY obsoleted" and "See RFC 8482". */
const HINFO_RDATA = (() => {
  const cpu = Buffer.from('ANY obsoleted', 'latin1');
  const os = Buffer.from('See RFC 8482', 'latin1');
  return Buffer.concat([Buffer.from([cpu.length]), cpu, Buffer.from([os.length]), os]);
})();

export class AnyHandler implements Handler {
  readonly name = 'any';

  serveDNS(req: Request, next: Next): HandlerResult {
    if (req.qtype !== QType.ANY) return next(req);
    const m = req.reply();
    m.answers.push({ name: req.qname, type: QType.HINFO, class: QClass.IN, ttl: 8482, data: { raw: HINFO_RDATA } });
    return Response.message(m, this.name);
  }
}

export const setup: PluginSetup = (ds) => {
  const d = once(ds, 'any');
  noArgs(d);
  noBlock(d);
  return { name: 'any', handler: new AnyHandler() };
};
