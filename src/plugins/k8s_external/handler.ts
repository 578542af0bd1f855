// Services' external IPs and LoadBalancer ingress under another zone (`svc.ns.example.org`), from
// the kubernetes plugin's view of the cluster, after CoreDNS's k8s_external.

import { QClass, QType, Rcode } from '../../dns/constants.js';
import type { ResourceRecord, SoaData } from '../../dns/message.js';
import type { Invalidation } from '../../server/invalidation.js';
import { isReverseZone, reverseNameToIp } from '../../dns/reverse.js';
import { Response, type Handler, type HandlerResult, type Next, type Request } from '../../server/request.js';
import { matchZone, type Fallthrough } from '../fallthrough.js';
import type { ClusterService, ClusterView } from '../plugin.js';

export interface ExternalOptions {
  zones: string[];
  apex: string;
  ttl: number;
  headless: boolean;
  fallthrough: Fallthrough;
}

interface Target {
  /** Address or host name. */
  host: string;
  port: number;
}

function stripUnderscore(s: string): string {
  return s.startsWith('_') ? s.slice(1) : s;
}

export class ExternalHandler implements Handler {
  readonly name = 'k8s_external';
  private stop: (() => void) | null = null;

  constructor(
    private readonly o: ExternalOptions,
    private readonly view: () => ClusterView | undefined,
    private readonly resolve: (req: Request) => HandlerResult,
    private readonly invalidation: Invalidation,
  ) {}

  /** Keeps caches coherent: a Service's change drops its names under every external zone. */
  start(): void {
    const v = this.view();
    if (v === undefined) return;
    this.stop = v.onServiceChange((ns, name) => {
      for (const z of this.o.zones) this.invalidation.invalidateSuffix(`${name}.${ns}.${z}`);
    });
  }

  shutdown(): void {
    this.stop?.();
    this.stop = null;
  }

  serveDNS(req: Request, next: Next): HandlerResult {
    const zone = matchZone(this.o.zones, req.name);
    if (zone === undefined) return next(req);
    const view = this.view();
    if (view === undefined) return next(req);
    if (isReverseZone(zone)) return this.reverse(req, view, next);
    if (req.name === zone) return this.apex(req, zone, view);
    const sub = `${this.o.apex}.${zone}`;
    if (req.name === sub || req.name.endsWith(`.${sub}`)) return this.subApex(req, zone, sub, view);
    const targets = this.targets(req.name.slice(0, req.name.length - zone.length - 1).split('.'), view);
    const m = req.reply();
    m.aa = true;
    if (targets === null || targets.length === 0) {
      if (targets === null && this.o.fallthrough.through(req.name)) return next(req);
      m.rcode = targets === null ? Rcode.NXDOMAIN : Rcode.NOERROR;
      m.authorities.push(this.soa(zone, view));
      return Response.message(m, this.name);
    }
    const ttl = this.o.ttl;
    const names: string[] = [];
    if (req.qtype === QType.A || req.qtype === QType.AAAA) {
      const want = req.qtype === QType.A ? 4 : 6;
      for (const t of targets) {
        const v6 = t.host.includes(':');
        if (t.host.endsWith('.')) {
          if (!names.includes(t.host)) names.push(t.host);
          continue;
        }
        if ((want === 6) === v6 && !m.answers.some((rr) => (rr.data as { address: string }).address === t.host))
          m.answers.push({ name: req.qname, type: req.qtype, class: QClass.IN, ttl, data: { address: t.host } });
      }
      // A LoadBalancer with a host name (and no IP) is an alias, resolved through the server's chain.
      if (m.answers.length === 0 && names.length > 0) {
        m.answers.push({ name: req.qname, type: QType.CNAME, class: QClass.IN, ttl, data: { target: names[0]! } });
        if (req.depth < 4) {
          const r = this.resolve(req.derive(names[0]!, req.qtype));
          const done = (res: Response) => {
            if (res.rcode === Rcode.NOERROR && !res.isBare && !res.dropped)
              m.answers.push(...res.toMessage(req).answers);
            return Response.message(m, this.name);
          };
          return r instanceof Promise ? r.then(done, () => Response.message(m, this.name)) : done(r);
        }
      }
    } else if (req.qtype === QType.SRV) {
      const owner = (t: Target) => (t.host.endsWith('.') ? t.host : this.serviceName(req.name, zone));
      for (const t of targets) {
        if (t.port < 0) continue;
        m.answers.push({
          name: req.qname,
          type: QType.SRV,
          class: QClass.IN,
          ttl,
          data: { priority: 0, weight: 100, port: t.port, target: owner(t) },
        });
        if (!t.host.endsWith('.'))
          m.additionals.push({
            name: owner(t),
            type: t.host.includes(':') ? QType.AAAA : QType.A,
            class: QClass.IN,
            ttl,
            data: { address: t.host },
          });
      }
    }
    if (m.answers.length === 0) m.authorities.push(this.soa(zone, view));
    return Response.message(m, this.name);
  }

  /** PTR for a Service's external IP (`<svc>.<ns>.<first zone>`); any other reverse name goes on to the next plugin. */
  private reverse(req: Request, view: ClusterView, next: Next): HandlerResult {
    const ip = req.qtype === QType.PTR ? reverseNameToIp(req.name) : null;
    const svc = ip === null ? undefined : view.serviceByExternalIP(ip);
    const forward = this.o.zones.find((z) => !isReverseZone(z));
    if (svc === undefined || forward === undefined) return next(req);
    const m = req.reply();
    m.aa = true;
    m.answers.push({
      name: req.qname,
      type: QType.PTR,
      class: QClass.IN,
      ttl: this.o.ttl,
      data: { target: `${svc.name}.${svc.namespace}.${forward}` },
    });
    return Response.message(m, this.name);
  }

  /** `svc.ns.zone` for `_port._proto.svc.ns.zone` (the SRV target). */
  private serviceName(name: string, zone: string): string {
    const labels = name.slice(0, name.length - zone.length - 1).split('.');
    return `${labels.slice(-2).join('.')}.${zone}`;
  }

  /**
   * What `labels` (the name without the zone) stands for: null for NXDOMAIN, [] for a name that
   * exists with nothing of its own. `svc.ns`, `_port._proto.svc.ns`, and with `headless`
   * `endpoint.svc.ns`.
   */
  private targets(labels: string[], view: ClusterView): Target[] | null {
    let endpoint = '';
    let port = '';
    let proto = '';
    if (labels.length === 4) {
      port = stripUnderscore(labels[0]!);
      proto = stripUnderscore(labels[1]!);
    } else if (labels.length === 3 && this.o.headless) endpoint = labels[0]!;
    else if (labels.length !== 2) return null;
    const [name, ns] = labels.slice(-2) as [string, string];
    if (!view.namespaceExposed(ns)) return null;
    const svc = view.service(ns, name);
    if (svc === undefined) return null;
    const out: Target[] = [];
    const ports = svc.ports.length ? svc.ports : [{ name: '', protocol: '', port: -1 }];
    const portOk = (p: ClusterService['ports'][number]) =>
      (port === '' || p.name === port) && (proto === '' || p.protocol === proto);
    if (svc.externalIPs.length === 0 && svc.externalHosts.length === 0 && this.o.headless && svc.kind === 'Headless') {
      for (const ep of svc.endpoints()) {
        if (endpoint !== '' && ep.host !== endpoint) continue;
        for (const p of ports) if (portOk(p)) out.push({ host: ep.ip, port: p.port });
      }
      return out.length ? out : null;
    }
    if (endpoint !== '') return null;
    for (const host of [...svc.externalIPs, ...svc.externalHosts])
      for (const p of ports) if (portOk(p)) out.push({ host, port: p.port });
    return out.length ? out : null;
  }

  private soa(zone: string, view: ClusterView): ResourceRecord {
    const data: SoaData = {
      mname: `ns1.${this.o.apex}.${zone}`,
      rname: `hostmaster.${this.o.apex}.${zone}`,
      serial: view.serial(),
      refresh: 7200,
      retry: 1800,
      expire: 86400,
      minimum: this.o.ttl,
    };
    return { name: zone, type: QType.SOA, class: QClass.IN, ttl: this.o.ttl, data };
  }

  private apex(req: Request, zone: string, view: ClusterView): Response {
    const m = req.reply();
    m.aa = true;
    const ns = `ns1.${this.o.apex}.${zone}`;
    if (req.qtype === QType.SOA) m.answers.push(this.soa(zone, view));
    else if (req.qtype === QType.NS) {
      m.answers.push({ name: req.qname, type: QType.NS, class: QClass.IN, ttl: this.o.ttl, data: { target: ns } });
      for (const ip of view.nameserverAddresses())
        m.additionals.push({
          name: ns,
          type: ip.includes(':') ? QType.AAAA : QType.A,
          class: QClass.IN,
          ttl: this.o.ttl,
          data: { address: ip },
        });
    } else m.authorities.push(this.soa(zone, view));
    return Response.message(m, this.name);
  }

  /** `ns1.<apex>.<zone>` has the server's own addresses; `<apex>.<zone>` exists; the rest do not. */
  private subApex(req: Request, zone: string, sub: string, view: ClusterView): Response {
    const m = req.reply();
    m.aa = true;
    if (req.name === `ns1.${sub}`) {
      const want = req.qtype === QType.A ? 4 : req.qtype === QType.AAAA ? 6 : 0;
      for (const ip of view.nameserverAddresses())
        if (want !== 0 && ip.includes(':') === (want === 6))
          m.answers.push({
            name: req.qname,
            type: req.qtype,
            class: QClass.IN,
            ttl: this.o.ttl,
            data: { address: ip },
          });
    } else if (req.name !== sub) m.rcode = Rcode.NXDOMAIN;
    if (m.answers.length === 0) m.authorities.push(this.soa(zone, view));
    return Response.message(m, this.name);
  }
}
