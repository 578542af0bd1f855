// Allows, blocks (REFUSED), filters (empty NOERROR) or drops queries by type and client network.

import { Rcode } from '../../dns/constants.js';
import { registerCollected } from '../../metrics/collected.js';
import { labelKey, PlainCounter, splitLabelKey } from '../../metrics/registry.js';
import { metricsKey } from '../../server/services.js';
import { matchZone } from '../fallthrough.js';
import { Response, type Handler, type HandlerResult, type Next, type Request } from '../../server/request.js';
import { cidrContains, clientBytes, type Cidr } from '../../dns/cidr.js';

export type Action = 'allow' | 'block' | 'filter' | 'drop';

export interface Rule {
  action: Action;
  /** null: every type. */
  types: ReadonlySet<number> | null;
  /** null: every network. */
  nets: readonly Cidr[] | null;
}

/** RFC 8914 extended error codes for the two answers acl writes. */
const EDE_BLOCKED = 15;
const EDE_FILTERED = 17;

/** Requests by action, keyed by (server, zone). */
type AclCounters = Record<Action, PlainCounter>;

function newCounters(): AclCounters {
  return { allow: new PlainCounter(), block: new PlainCounter(), filter: new PlainCounter(), drop: new PlainCounter() };
}

/** A server's acl counters (they outlive a reload), published in its registry. */
export const ACL_COUNTERS = metricsKey('acl counters', newCounters, (registry, counters) => {
  const define = (action: Action, name: string, help: string) =>
    registerCollected(registry, name, help, 'counter', () =>
      [...counters[action].entries()].map(([k, value]) => {
        const [server, zone] = splitLabelKey(k);
        return { labels: { server: server!, zone: zone!, view: '' }, value };
      }),
    );
  define('block', 'coredns_acl_blocked_requests_total', 'Counter of DNS requests being blocked.');
  define('filter', 'coredns_acl_filtered_requests_total', 'Counter of DNS requests being filtered.');
  define('allow', 'coredns_acl_allowed_requests_total', 'Counter of DNS requests being allowed.');
  define('drop', 'coredns_acl_dropped_requests_total', 'Counter of DNS requests being dropped.');
});

function ede(code: number): Buffer {
  const b = Buffer.alloc(2);
  b.writeUInt16BE(code, 0);
  return b;
}

export class AclHandler implements Handler {
  readonly name = 'acl';

  constructor(
    private readonly zones: readonly string[],
    private readonly rules: readonly Rule[],
    private readonly counters: AclCounters = newCounters(),
  ) {}

  serveDNS(req: Request, next: Next): HandlerResult {
    const zone = matchZone(this.zones, req.name);
    if (zone === undefined) return next(req);
    const action = this.decide(req);
    this.counters[action].inc(labelKey(req.server, zone));
    switch (action) {
      case 'allow':
        return next(req);
      case 'drop':
        return Response.drop(this.name);
      case 'block':
        return this.reply(req, Rcode.REFUSED, EDE_BLOCKED);
      case 'filter':
        return this.reply(req, Rcode.NOERROR, EDE_FILTERED);
    }
  }

  private decide(req: Request): Action {
    let ip: Buffer | null | undefined;
    for (const r of this.rules) {
      if (r.types !== null && !r.types.has(req.qtype)) continue;
      if (r.nets !== null) {
        ip ??= clientBytes(req.client.remoteAddress);
        if (ip === null || !r.nets.some((c) => cidrContains(c, ip!))) continue;
      }
      return r.action;
    }
    return 'allow';
  }

  private reply(req: Request, rcode: number, code: number): Response {
    const m = req.reply(rcode);
    if (req.edns)
      m.edns = {
        udpSize: req.edns.udpSize < 512 ? 512 : req.edns.udpSize,
        version: 0,
        do: req.edns.do,
        zflags: 0,
        options: [{ code: 15, data: ede(code) }],
      };
    return Response.message(m, this.name);
  }
}
