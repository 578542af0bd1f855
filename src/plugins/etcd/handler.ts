// SkyDNS records from etcd, as CoreDNS's etcd plugin answers them (backend_lookup.go): A/AAAA
// (a host that is a name is a CNAME, followed), SRV with the addresses as additional data, TXT,
// MX for `mail` services, PTR under reverse zones, NS and SOA at the apex, wildcards and groups.

import { QClass, QType, Rcode } from '../../dns/constants.js';
import type { ResourceRecord } from '../../dns/message.js';
import { canonicalIP } from '../../dns/ip.js';

import type { Invalidation } from '../../server/invalidation.js';
import { Response, type Handler, type HandlerResult, type Next, type Request } from '../../server/request.js';
import type { Logger } from '../../log.js';
import { matchZone, type Fallthrough } from '../fallthrough.js';
import { EtcdClient, EtcdError, type EtcdOptions } from './client.js';
import { groupServices, nameToPath, parseService, pathToName, SkyStore, type SkyService } from './store.js';

/** The TTL of a record whose service sets none. */
const DEFAULT_TTL = 300;
const BACKOFF_MAX_MS = 30_000;
/** The SOA's TTL and negative-caching time (CoreDNS's etcd minimum TTL). */
const SOA_TTL = 30;

export interface EtcdPluginOptions {
  zones: string[];
  path: string;
  client: EtcdOptions;
  fallthrough: Fallthrough;
}

export class EtcdHandler implements Handler {
  readonly name = 'etcd';
  readonly store = new SkyStore();
  private client: EtcdClient | null = null;
  private abort: AbortController | null = null;
  private synced = false;
  private revision = 0;

  constructor(
    private readonly o: EtcdPluginOptions,
    private readonly resolve: (req: Request) => HandlerResult,
    private readonly log: Logger,
    private readonly invalidation: Invalidation,
  ) {}

  get ready(): boolean {
    return this.synced;
  }

  async start(): Promise<void> {
    this.client = new EtcdClient(this.o.client);
    this.abort = new AbortController();
    try {
      await this.load();
    } catch (e) {
      this.log.warn(
        `etcd at ${this.o.client.endpoints.join(', ')} not readable yet (${(e as Error).message}); retrying`,
      );
    }
    void this.run(this.abort.signal);
  }

  stop(): void {
    this.abort?.abort();
    this.client?.close();
  }

  private async load(): Promise<void> {
    const { kvs, revision } = await this.client!.range(this.o.path);
    const all: SkyService[] = [];
    for (const kv of kvs) {
      const s = parseService(kv.key, kv.value);
      if (s === null) this.log.warn(`key "${kv.key}" does not hold a SkyDNS service (JSON object); ignored`);
      else all.push(s);
    }
    this.store.replace(all);
    this.revision = revision;
    if (!this.synced) this.log.info(`read ${all.length} records under "${this.o.path}" at revision ${revision}`);
    this.synced = true;
    for (const z of this.o.zones) this.invalidation.invalidateSuffix(z);
  }

  /** Watches from the revision read; reads again after a compaction, retries with backoff. */
  private async run(signal: AbortSignal): Promise<void> {
    let delay = 500;
    while (!signal.aborted) {
      try {
        if (!this.synced) await this.load();
        const { compacted } = await this.client!.watch(
          this.o.path,
          this.revision + 1,
          (evs, rev) => this.apply(evs, rev),
          signal,
        );
        if (compacted) await this.load();
        delay = 500;
      } catch (e) {
        if (signal.aborted) return;
        const msg = e instanceof EtcdError ? e.message : (e as Error).message;
        this.log.warn(
          `watch of "${this.o.path}" failed (${msg}); serving the last known records, retrying in ${delay} ms`,
        );
        await new Promise((r) => setTimeout(r, delay).unref());
        delay = Math.min(delay * 2, BACKOFF_MAX_MS);
        // A gap may have lost events: read the whole prefix again.
        this.synced = false;
      }
    }
  }

  private apply(evs: Array<{ type: 'put' | 'delete'; kv: { key: string; value: string } }>, revision: number): void {
    const names = new Set<string>();
    for (const ev of evs) {
      if (ev.type === 'delete') this.store.delete(ev.kv.key);
      else {
        const s = parseService(ev.kv.key, ev.kv.value);
        if (s === null) this.log.warn(`key "${ev.kv.key}" does not hold a SkyDNS service (JSON object); ignored`);
        else this.store.put(s);
      }
      // A name answers with its whole subtree: the key's name and every ancestor up to the zone change.
      for (let n = pathToName(this.o.path, ev.kv.key); ; n = n.slice(n.indexOf('.') + 1) || '.') {
        names.add(n);
        if (n === '.' || this.o.zones.includes(n)) break;
      }
    }
    if (revision > this.revision) this.revision = revision;
    this.invalidation.invalidateNames(names);
  }

  serveDNS(req: Request, next: Next): HandlerResult {
    const zone = matchZone(this.o.zones, req.name);
    if (zone === undefined) return next(req);
    const m = req.reply();
    m.aa = true;
    const ttlOf = (s: SkyService) => (s.ttl > 0 ? s.ttl : DEFAULT_TTL);
    const qname = req.qname;
    if (req.name === zone && (req.qtype === QType.SOA || req.qtype === QType.NS)) {
      if (req.qtype === QType.SOA) m.answers.push(this.soa(zone));
      else {
        for (const s of this.store.subtree(nameToPath(this.o.path, `ns.dns.${zone}`))) {
          const ip = canonicalIP(s.host);
          const ns = pathToName(this.o.path, s.key);
          m.answers.push({ name: qname, type: QType.NS, class: QClass.IN, ttl: ttlOf(s), data: { target: ns } });
          if (ip !== null)
            m.additionals.push({
              name: ns,
              type: ip.includes(':') ? QType.AAAA : QType.A,
              class: QClass.IN,
              ttl: ttlOf(s),
              data: { address: ip },
            });
        }
        if (m.answers.length === 0) m.authorities.push(this.soa(zone));
      }
      return Response.message(m, this.name);
    }
    const services = groupServices(this.store.match(nameToPath(this.o.path, req.name)));
    if (services.length === 0) {
      if (this.o.fallthrough.through(req.name)) return next(req);
      m.rcode = Rcode.NXDOMAIN;
      m.authorities.push(this.soa(zone));
      return Response.message(m, this.name);
    }
    const cnames: string[] = [];
    switch (req.qtype) {
      case QType.A:
      case QType.AAAA: {
        const want6 = req.qtype === QType.AAAA;
        const seen = new Set<string>();
        for (const s of services) {
          const ip = canonicalIP(s.host);
          if (ip === null) {
            const target = s.host.endsWith('.') ? s.host : `${s.host}.`;
            if (s.host !== '' && target.toLowerCase() !== req.name && !cnames.includes(target)) cnames.push(target);
            continue;
          }
          if (ip.includes(':') !== want6 || seen.has(ip)) continue;
          seen.add(ip);
          m.answers.push({ name: qname, type: req.qtype, class: QClass.IN, ttl: ttlOf(s), data: { address: ip } });
        }
        break;
      }
      case QType.TXT:
        for (const s of services)
          if (s.text !== '')
            m.answers.push({
              name: qname,
              type: QType.TXT,
              class: QClass.IN,
              ttl: ttlOf(s),
              data: { texts: splitText(s.text) },
            });
        break;
      case QType.SRV:
      case QType.MX: {
        const total = services.reduce((a, s) => a + (s.weight || 0), 0);
        for (const s of services) {
          if (req.qtype === QType.MX && !s.mail) continue;
          const ip = canonicalIP(s.host);
          const target = ip === null ? (s.host.endsWith('.') ? s.host : `${s.host}.`) : pathToName(this.o.path, s.key);
          if (req.qtype === QType.MX)
            m.answers.push({
              name: qname,
              type: QType.MX,
              class: QClass.IN,
              ttl: ttlOf(s),
              data: { preference: s.priority, exchange: target },
            });
          else {
            // SkyDNS: without weights every service shares 100 equally.
            const weight = total === 0 ? Math.floor(100 / services.length) : s.weight;
            m.answers.push({
              name: qname,
              type: QType.SRV,
              class: QClass.IN,
              ttl: ttlOf(s),
              data: { priority: s.priority, weight, port: s.port, target },
            });
          }
          if (ip !== null)
            m.additionals.push({
              name: target,
              type: ip.includes(':') ? QType.AAAA : QType.A,
              class: QClass.IN,
              ttl: ttlOf(s),
              data: { address: ip },
            });
        }
        break;
      }
      case QType.PTR:
        for (const s of services)
          if (s.host !== '' && canonicalIP(s.host) === null)
            m.answers.push({
              name: qname,
              type: QType.PTR,
              class: QClass.IN,
              ttl: ttlOf(s),
              data: { target: s.host.endsWith('.') ? s.host : `${s.host}.` },
            });
        break;
      case QType.CNAME:
        for (const s of services)
          if (s.host !== '' && canonicalIP(s.host) === null)
            m.answers.push({
              name: qname,
              type: QType.CNAME,
              class: QClass.IN,
              ttl: ttlOf(s),
              data: { target: s.host.endsWith('.') ? s.host : `${s.host}.` },
            });
        break;
    }
    if (m.answers.length === 0 && cnames.length > 0 && req.depth < 8) {
      // A host that is a name: a CNAME, followed through the server's own chain (inside or outside the zone).
      const target = cnames[0]!;
      const s = services.find((x) => x.host === target || `${x.host}.` === target)!;
      m.answers.push({ name: qname, type: QType.CNAME, class: QClass.IN, ttl: ttlOf(s), data: { target } });
      const r = this.resolve(req.derive(target, req.qtype));
      const done = (res: Response): Response => {
        if (res.rcode === Rcode.NOERROR && !res.isBare && !res.dropped) m.answers.push(...res.toMessage(req).answers);
        return Response.message(m, this.name);
      };
      return r instanceof Promise ? r.then(done, () => Response.message(m, this.name)) : done(r);
    }
    if (m.answers.length === 0) m.authorities.push(this.soa(zone));
    return Response.message(m, this.name);
  }

  private soa(zone: string): ResourceRecord {
    return {
      name: zone,
      type: QType.SOA,
      class: QClass.IN,
      ttl: SOA_TTL,
      data: {
        mname: `ns.dns.${zone === '.' ? '' : zone}`,
        rname: `hostmaster.${zone === '.' ? '' : zone}`,
        serial: this.revision >>> 0,
        refresh: 7200,
        retry: 1800,
        expire: 86400,
        minimum: SOA_TTL,
      },
    };
  }
}

/** TXT strings hold at most 255 octets each: longer text is split, as miekg/dns does. */
function splitText(t: string): string[] {
  const b = Buffer.from(t, 'utf8').toString('latin1');
  const out: string[] = [];
  for (let i = 0; i < b.length; i += 255) out.push(b.slice(i, i + 255));
  return out.length ? out : [''];
}
