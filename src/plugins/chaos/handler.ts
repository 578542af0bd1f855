// Answers CH-class TXT queries about the server itself (version.bind, authors.bind, hostname.bind).

import { QClass, QType } from '../../dns/constants.js';
import { Response, type Handler, type HandlerResult, type Next, type Request } from '../../server/request.js';

export class ChaosHandler implements Handler {
  readonly name = 'chaos';

  constructor(
    private readonly version: string,
    private readonly authors: readonly string[],
    private readonly hostname: string,
  ) {}

  serveDNS(req: Request, next: Next): HandlerResult {
    if (req.qclass !== QClass.CH || req.qtype !== QType.TXT) return next(req);
    let texts: readonly string[];
    switch (req.name) {
      case 'authors.bind.':
        texts = this.authors;
        break;
      case 'version.bind.':
      case 'version.server.':
        texts = [this.version];
        break;
      case 'hostname.bind.':
      case 'id.server.':
        texts = [this.hostname];
        break;
      default:
        return next(req);
    }
    const m = req.reply();
    m.aa = true;
    for (const t of texts)
      m.answers.push({ name: req.qname, type: QType.TXT, class: QClass.CH, ttl: 0, data: { texts: [t] } });
    return Response.message(m, this.name);
  }
}
