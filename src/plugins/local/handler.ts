// Answers the local zones (localhost., 0/127/255.in-addr.arpa.) and `localhost.<domain>` itself,
// so that such queries never leave the server.

import { QClass, QType, Rcode } from '../../dns/constants.js';
import type { ResourceRecord } from '../../dns/message.js';
import { isSubdomain } from '../../dns/name.js';
import { Response, type Handler, type HandlerResult, type Next, type Request } from '../../server/request.js';
import type { Logger } from '../../log.js';
import { PlainCounter } from '../../metrics/registry.js';
import { serverCounter } from '../../server/services.js';

const TTL = 604800;
const ZONES = ['localhost.', '0.in-addr.arpa.', '127.in-addr.arpa.', '255.in-addr.arpa.'];

/** coredns_local_localhost_requests_total by server: the server's own, kept across reloads. */
export const LOCALHOST_REQUESTS = serverCounter(
  'coredns_local_localhost_requests_total',
  'Counter of localhost.<domain> requests.',
);

function soa(origin: string): ResourceRecord {
  return {
    name: origin,
    type: QType.SOA,
    class: QClass.IN,
    ttl: TTL,
    data: { mname: 'localhost.', rname: 'root.localhost.', serial: 1, refresh: 0, retry: 0, expire: 0, minimum: TTL },
  };
}

export class LocalHandler implements Handler {
  readonly name = 'local';

  constructor(
    private readonly log: Logger,
    private readonly localhostRequests: PlainCounter = new PlainCounter(),
  ) {}

  serveDNS(req: Request, next: Next): HandlerResult {
    const name = req.name;
    if (name.length > 10 && name.startsWith('localhost.')) return this.localhost(req);
    let zone: string | undefined;
    for (const z of ZONES) if (isSubdomain(name, z)) zone = z;
    if (zone === undefined) return next(req);
    const m = req.reply();
    m.aa = true;
    const add = (type: number, data: ResourceRecord['data']) =>
      m.answers.push({ name: req.qname, type, class: QClass.IN, ttl: TTL, data });
    if (name === zone) {
      if (req.qtype === QType.A && name === 'localhost.') add(QType.A, { address: '127.0.0.1' });
      else if (req.qtype === QType.AAAA && name === 'localhost.') add(QType.AAAA, { address: '::1' });
      else if (req.qtype === QType.SOA) m.answers.push({ ...soa(req.qname) });
      else if (req.qtype === QType.NS) add(QType.NS, { target: 'localhost.' });
      else m.authorities.push(soa(zone));
    } else if (name === '1.0.0.127.in-addr.arpa.') {
      if (req.qtype === QType.PTR) add(QType.PTR, { target: 'localhost.' });
      else m.authorities.push(soa(zone));
    } else {
      m.rcode = Rcode.NXDOMAIN;
      m.authorities.push(soa(zone));
    }
    return Response.message(m, this.name);
  }

  /** `localhost.<domain>`: the loopback addresses, counted and logged at debug level. */
  private localhost(req: Request): Response {
    this.log.debug(`Intercepted localhost query for "${req.qname}" ${req.qtype}, from ${req.client.remoteAddress}`);
    this.localhostRequests.inc(req.server);
    const m = req.reply();
    m.aa = true;
    if (req.qtype === QType.A)
      m.answers.push({ name: req.qname, type: QType.A, class: QClass.IN, ttl: TTL, data: { address: '127.0.0.1' } });
    else if (req.qtype === QType.AAAA)
      m.answers.push({ name: req.qname, type: QType.AAAA, class: QClass.IN, ttl: TTL, data: { address: '::1' } });
    else m.authorities.push(soa('localhost.'));
    return Response.message(m, this.name);
  }
}
