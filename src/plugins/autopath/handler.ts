// CoreDNS's autopath: when a query is the client's first search expansion
// (`api.example.com.<ns>.svc.cluster.local.`), walk the rest of the client's search path
// here, through the rest of the chain, and answer with the first name that is not
// NXDOMAIN: a CNAME from the asked name to it in front, the question as asked. The client
// gets in one round trip what its resolver would have found in up to six.

import { QClass, QType, Rcode } from '../../dns/constants.js';
import type { Message, ResourceRecord } from '../../dns/message.js';
import { isSubdomain } from '../../dns/name.js';
import { Response, type Handler, type HandlerResult, type Next, type Request } from '../../server/request.js';
import { matchZone } from '../fallthrough.js';
import { PlainCounter } from '../../metrics/registry.js';
import type { SearchPathSource } from './searchpath.js';

const NAME = 'autopath';

/** CoreDNS's plugin.ClientWrite: these rcodes returned without a reply mean nothing was written. */
function clientWrote(res: Response): boolean {
  if (!res.isBare) return true;
  const r = res.rcode;
  return r !== Rcode.SERVFAIL && r !== Rcode.REFUSED && r !== Rcode.FORMERR && r !== Rcode.NOTIMP;
}

/** `base` + search element; "" (and the root) stand for the bare name. */
function join(base: string, element: string): string {
  return element === '' || element === '.' ? `${base}.` : `${base}.${element}`;
}

/**
 * CoreDNS's cnamer: a CNAME from the asked name to the owner of the first answer record
 * that is not already the asked name (TTL copied from it), and the question restored.
 */
export function withCname(msg: Message, req: Request): Message {
  let cname: ResourceRecord | null = null;
  for (const rr of msg.answers) {
    if (rr.name.toLowerCase() === req.name) continue;
    cname = { name: req.qname, type: QType.CNAME, class: QClass.IN, ttl: rr.ttl, data: { target: rr.name } };
    break;
  }
  return {
    ...msg,
    rd: req.rd,
    cd: req.cd,
    questions: [{ name: req.qname, type: req.qtype, class: req.qclass }],
    answers: cname === null ? msg.answers : [cname, ...msg.answers],
  };
}

export class AutoPath implements Handler {
  readonly name = NAME;
  /** Set at startup for `@kubernetes` (the kubernetes instance exists only then). */
  source: SearchPathSource | null;

  constructor(
    private readonly zones: readonly string[],
    source: SearchPathSource | null,
    /** The server's coredns_autopath_success_total (AUTOPATH_SUCCESS). */
    private readonly success: PlainCounter = new PlainCounter(),
  ) {
    this.source = source;
  }

  serveDNS(req: Request, next: Next): HandlerResult {
    if (this.source === null || matchZone(this.zones, req.name) === undefined) return next(req);
    const path = this.source.pathFor(req);
    if (path === null || path.length === 0) return next(req);
    const first = path[0]!;
    // Only the client's first expansion starts a walk; the first element itself has no base name.
    if (first === '' || req.name === first || !isSubdomain(req.name, first)) return next(req);
    return this.walk(req, next, path, req.qname.slice(0, req.qname.length - first.length - 1));
  }

  private async walk(req: Request, next: Next, path: readonly string[], base: string): Promise<Response> {
    let first: Response | null = null;
    let firstReq: Request | null = null;
    for (let i = 0; i < path.length; i++) {
      const sub = req.derive(join(base, path[i]!));
      const res = await next(sub);
      // A plugin that failed outright (CoreDNS: a non-nil error) ends the walk.
      if (res.error !== undefined && res.isBare) return res;
      if (i === 0) {
        first = res;
        firstReq = sub;
      }
      if (!clientWrote(res) || res.rcode === Rcode.NXDOMAIN) continue;
      this.success.inc(req.server);
      return Response.message(withCname(res.toMessage(sub), req), NAME);
    }
    // Every name failed: the first answer as it was, so the client walks its own list.
    if (first === null || !clientWrote(first)) return first ?? Response.rcode(Rcode.SERVFAIL, NAME);
    const m = first.toMessage(firstReq!);
    return Response.message(
      { ...m, rd: req.rd, cd: req.cd, questions: [{ name: req.qname, type: req.qtype, class: req.qclass }] },
      first.plugin,
    );
  }
}
