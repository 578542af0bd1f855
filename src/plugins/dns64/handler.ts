// DNS64 (RFC 6147): an AAAA question whose answer has no AAAA gets AAAA records synthesized from
// the name's A records, inside a NAT64 prefix (RFC 6052).

import { QClass, QType, Rcode } from '../../dns/constants.js';
import type { Message, ResourceRecord } from '../../dns/message.js';
import { formatIPv6, parseIPv4 } from '../../dns/ip.js';
import { PlainCounter } from '../../metrics/registry.js';
import { serverCounter } from '../../server/services.js';
import { Response, type Handler, type HandlerResult, type Next, type Request } from '../../server/request.js';

/** coredns_dns64_requests_translated_total by server: the server's own. */
export const DNS64_TRANSLATED = serverCounter(
  'coredns_dns64_requests_translated_total',
  'Counter of DNS requests translated by dns64.',
);

export interface Dns64Options {
  /** The prefix's 16 bytes (only the first prefixLen bits matter). */
  prefix: Buffer;
  prefixLen: 32 | 40 | 48 | 56 | 64 | 96;
  translateAll: boolean;
  allowIpv4: boolean;
}

/** The IPv6 address with `v4` embedded in the prefix as RFC 6052 section 2.2 lays it out (octet 8 stays zero). */
export function embed(prefix: Buffer, prefixLen: number, v4: Buffer): string {
  const out = Buffer.alloc(16);
  prefix.copy(out, 0, 0, prefixLen / 8);
  let at = prefixLen / 8;
  for (let i = 0; i < 4; i++) {
    if (at === 8) at++;
    out[at++] = v4[i]!;
  }
  return formatIPv6(out);
}

export class Dns64Handler implements Handler {
  readonly name = 'dns64';

  constructor(
    private readonly o: Dns64Options,
    private readonly resolve: (req: Request) => HandlerResult,
    private readonly translated: PlainCounter = new PlainCounter(),
  ) {}

  serveDNS(req: Request, next: Next): HandlerResult {
    if (req.qtype !== QType.AAAA || req.qclass !== QClass.IN) return next(req);
    if (!this.o.allowIpv4 && req.client.family === 1) return next(req);
    const r = next(req);
    if (r instanceof Promise) return r.then((res) => this.maybeTranslate(req, res));
    return this.maybeTranslate(req, r);
  }

  private shouldTranslate(req: Request, res: Response): Message | null {
    if (res.dropped || res.rcode === Rcode.NXDOMAIN) return null;
    const m = res.toMessage(req);
    if (res.rcode === Rcode.NOERROR && m.answers.some((rr) => rr.type === QType.AAAA) && !this.o.translateAll)
      return null;
    return m;
  }

  private maybeTranslate(req: Request, res: Response): HandlerResult {
    const orig = this.shouldTranslate(req, res);
    if (orig === null) return res;
    const a = this.resolve(req.derive(req.qname, QType.A));
    if (a instanceof Promise) return a.then((ares) => this.synthesize(req, res, orig, ares));
    return this.synthesize(req, res, orig, a);
  }

  private synthesize(req: Request, res: Response, orig: Message, ares: Response): Response {
    if (ares.rcode !== Rcode.NOERROR || ares.dropped) return res;
    const am = ares.toMessage(req);
    // RFC 6147 5.1.7: no longer than the negative caching time of the empty AAAA answer.
    let cap = Infinity;
    for (const rr of orig.authorities)
      if (rr.type === QType.SOA) cap = Math.min(rr.ttl, (rr.data as { minimum: number }).minimum);
    const answers: ResourceRecord[] = [];
    let made = 0;
    for (const rr of am.answers) {
      if (rr.type === QType.A) {
        const v4 = parseIPv4((rr.data as { address: string }).address);
        if (v4 === null) continue;
        answers.push({
          name: rr.name,
          type: QType.AAAA,
          class: rr.class,
          ttl: Math.min(rr.ttl, cap),
          data: { address: embed(this.o.prefix, this.o.prefixLen, v4) },
        });
        made++;
      } else if (rr.type === QType.CNAME) answers.push(rr);
    }
    if (made === 0) return res;
    this.translated.inc(req.server);
    const m = req.reply(Rcode.NOERROR);
    m.aa = am.aa;
    m.ra = am.ra;
    // With translate_all the real AAAA records are replaced, as RFC 6147 5.1.4 allows.
    m.answers = answers;
    return Response.message(m, this.name);
  }
}
