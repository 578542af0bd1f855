// Answers every query with the client's address and port, in the additional section.

import { QClass, QType } from '../../dns/constants.js';
import { unmappedIP } from '../../dns/ip.js';
import { Response, type Handler, type HandlerResult, type Request } from '../../server/request.js';

export class WhoamiHandler implements Handler {
  readonly name = 'whoami';

  serveDNS(req: Request): HandlerResult {
    const m = req.reply();
    m.aa = true;
    const c = req.client;
    const ip = unmappedIP(c.remoteAddress);
    const v6 = ip.indexOf(':') >= 0;
    m.additionals.push({
      name: req.qname,
      type: v6 ? QType.AAAA : QType.A,
      class: QClass.IN,
      ttl: 0,
      data: { address: ip },
    });
    m.additionals.push({
      name: `_${c.proto}.${req.qname === '.' ? '' : req.qname}`,
      type: QType.SRV,
      class: QClass.IN,
      ttl: 0,
      data: { priority: 0, weight: 0, port: c.remotePort, target: '.' },
    });
    return Response.message(m, this.name);
  }
}
