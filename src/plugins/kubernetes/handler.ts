// Serves the cluster zones. A query whose answer was built before is one Map read and one
// copy (its table in the configuration's answer store, server/answer-store.ts); anything else
// is worked out from the index (lookup.ts), written as wire records (answer.ts), kept for next
// time when it can be, and sent by the core's one reply builder (writeReply). Negative answers
// follow CoreDNS's NXDOMAIN/NODATA matrix (see README.md), always with the zone's SOA.

import { QClass, QType, Rcode } from '../../dns/constants.js';
import { decodeMessage, type Message, type ResourceRecord } from '../../dns/message.js';
import { isSubdomain } from '../../dns/name.js';
import { isReverseZone, reverseNameToIp } from '../../dns/reverse.js';
import { FLAG_AA, PreparedAnswer, replyFlags, writeReply } from '../../server/prepared-reply.js';
import {
  isZoneTransfer,
  Response,
  type Handler,
  type HandlerResult,
  type Next,
  type Request,
} from '../../server/request.js';
import { Fallthrough, matchZone } from '../fallthrough.js';
import { AnswerWriter, GLOBAL_SCOPE, soaAuthority } from './answer.js';
import type { ClusterChange, ClusterIndex } from '../../cluster/clusterindex.js';
import { Lookup, parseRequest, type Found } from './lookup.js';
import type { KubernetesOptions } from './options.js';
import type { AnswerTable } from '../../server/answer-store.js';
import { changeDependencies, invalidateCaches, invalidateZones } from './invalidate.js';
import { dependenciesOnly } from '../../server/prepared-reply.js';
import { Invalidation } from '../../server/invalidation.js';
import { FAST_MAX_MS, fastFlush } from '../../server/fast-answers.js';

/** The schema version of the Kubernetes DNS specification served at `dns-version.<zone>`. */
export const DNS_SCHEMA_VERSION = '1.1.0';
const DNS_VERSION_TTL = 28800;
/** CoreDNS follows at most 8 aliases; deeper chains lose their CNAME. */
const MAX_ALIAS_DEPTH = 8;
const OPT_LENGTH = 11;

/** Where an answer's prepared form is kept: under its Service, its PTR IP, the rest, or nowhere. */
type Scope = string | null;

const NO_DEPENDENCIES: readonly string[] = [];

export class KubernetesHandler implements Handler {
  readonly name = 'kubernetes';
  /** Its answers, kept in the configuration's answer store (which caches share). */
  readonly prepared: AnswerTable;
  readonly lookup: Lookup;
  private readonly fall: Fallthrough;
  private readonly forwardZones: string[];

  constructor(
    private readonly o: KubernetesOptions,
    private readonly index: ClusterIndex,
    /** Re-enters this server block's chain (ExternalName targets). */
    private readonly resolveThrough: (req: Request) => HandlerResult,
    localIPs: () => readonly string[],
    /** The configuration's coherence: what a change makes wrong is dropped here, in every store. */
    private readonly invalidation = new Invalidation(),
  ) {
    this.lookup = new Lookup(index, o, localIPs);
    this.fall = new Fallthrough(o.fallthrough);
    this.forwardZones = o.zones.filter((z) => !isReverseZone(z));
    this.prepared = invalidation.answers.table();
  }

  private unlisten: (() => void) | null = null;

  /** Follows the index's changes (at startup: a configuration only parsed must not listen). */
  open(): void {
    if (this.unlisten) return;
    this.prepared.clear();
    this.unlisten = this.index.listen({
      onChange: (c) => this.forget(c),
      onSynced: () => {
        fastFlush();
        this.prepared.clear();
        // After the first sync every cached answer from before (SERVFAIL, NXDOMAIN) may be wrong.
        invalidateZones(this.invalidation, this.o.zones);
      },
    });
  }

  /** Stops following the index (which the next configuration may go on using). */
  close(): void {
    this.unlisten?.();
    this.unlisten = null;
  }

  serveDNS(req: Request, next: Next): HandlerResult {
    const p = this.prepared.get(req.name, req.qtype);
    if (p !== undefined) return this.reply(req, p);
    return this.answer(req, next);
  }

  /** Drops what a change may have made wrong: kept answers by what they were built from, cached ones also by name. */
  private forget(c: ClusterChange): void {
    // Any change may change any answer's SOA serial: the native table starts over.
    fastFlush();
    // A namespace decides whether names under it exist; no answer records it.
    if (c.namespaces.length > 0) this.prepared.clear();
    // Before the first sync caches hold nothing worth saving; the sync drops the zones at once.
    if (this.index.synced) invalidateCaches(this.invalidation, c, this.forwardZones, this.o.zones);
    else this.invalidation.invalidateDependencies(changeDependencies(c));
  }

  private answer(req: Request, next: Next): HandlerResult {
    const name = req.name;
    const zone = matchZone(this.o.zones, name);
    if (zone === undefined) return next(req);
    const qtype = req.qtype;
    // Zone transfers belong to the transfer plugin, which clusterdns does not have: REFUSED, as CoreDNS.
    if (isZoneTransfer(qtype)) return Response.rcode(Rcode.REFUSED, this.name);
    const w = new AnswerWriter(req.questionEnd, zone, this.o.ttl);
    const lookup = this.lookup;
    let scope: Scope = GLOBAL_SCOPE;
    switch (qtype) {
      case QType.A:
      case QType.AAAA: {
        const f = lookup.services(name, zone, 'address');
        if (!f.ok) return this.nxdomain(req, zone, next);
        if (f.cname !== '') return this.alias(req, zone, f.cname);
        const seen = new Set<string>();
        for (const it of f.addresses) {
          if (it.ip.includes(':') !== (qtype === QType.AAAA) || seen.has(it.ip)) continue;
          seen.add(it.ip);
          w.address(12, it.ip);
          w.an++;
        }
        scope = scopeOf(name, zone);
        break;
      }
      case QType.TXT: {
        const f = lookup.services(name, zone, 'txt');
        if (!f.ok) return this.nxdomain(req, zone, next);
        if (f.text) {
          w.txt(DNS_SCHEMA_VERSION, DNS_VERSION_TTL);
          w.an++;
        }
        scope = scopeOf(name, zone);
        break;
      }
      case QType.CNAME: {
        const f = lookup.services(name, zone, 'address');
        if (!f.ok) return this.nxdomain(req, zone, next);
        if (f.cname !== '') {
          w.nameRecord(QType.CNAME, f.cname, false);
          w.an++;
        }
        scope = scopeOf(name, zone);
        break;
      }
      case QType.PTR: {
        const ip = reverseNameToIp(name);
        if (ip === null) {
          // Not a whole reverse name: exists or not by the forward grammar (NODATA or NXDOMAIN).
          if (!lookup.records(name, zone).ok) return this.nxdomain(req, zone, next);
          scope = scopeOf(name, zone);
          break;
        }
        const targets = lookup.reverse(ip);
        if (targets.length === 0) return this.nxdomain(req, zone, next);
        for (const t of targets) {
          w.nameRecord(QType.PTR, t, true);
          w.an++;
        }
        scope = `p:${ip}`;
        break;
      }
      case QType.SRV: {
        const f = lookup.services(name, zone, 'srv');
        if (!f.ok) return this.nxdomain(req, zone, next);
        writeSrv(w, f);
        scope = scopeOf(name, zone);
        break;
      }
      case QType.SOA:
        // SOA on any other name, even one that does not exist, is NODATA (CoreDNS); those
        // names are countless, so only the apex answer is kept.
        if (name === zone) {
          w.soa('question');
          w.an++;
        } else scope = null;
        break;
      case QType.NS:
        if (name === zone) {
          writeNs(w, lookup, zone);
          break;
        }
        if (!lookup.services(name, zone, 'address').ok) return this.nxdomain(req, zone, next);
        scope = scopeOf(name, zone);
        break;
      default:
        // HINFO, MX, ANY…: nothing to serve, but NODATA and NXDOMAIN still follow the name.
        if (!lookup.services(name, zone, 'address').ok) return this.nxdomain(req, zone, next);
        scope = scopeOf(name, zone);
    }
    if (w.an === 0) {
      w.soa('zone');
      w.ns++;
    }
    const p = w.finish(name, qtype, Rcode.NOERROR, scope === null ? NO_DEPENDENCIES : [scope]);
    if (scope !== null) this.prepared.set(p);
    return this.reply(req, p);
  }

  /** A name that does not exist: the next plugin (fallthrough), SERVFAIL (not synced yet) or NXDOMAIN. */
  private nxdomain(req: Request, zone: string, next: Next): HandlerResult {
    if (this.fall.through(req.name)) return next(req);
    const rcode = this.index.synced ? Rcode.NXDOMAIN : Rcode.SERVFAIL;
    const soa = soaAuthority(req.questionEnd, zone, this.o.ttl, this.index.serial);
    const p = new PreparedAnswer(req.name, req.qtype, soa, 0, 1, 0, FLAG_AA | rcode, null, req.questionEnd);
    if (req.questionEnd + soa.length + (req.edns ? OPT_LENGTH : 0) > req.maxSize) {
      return Response.message(decodeMessage(writeReply(req, p, -1, replyFlags(req, p, FLAG_AA))), this.name);
    }
    const res = Response.wire(writeReply(req, p, -1, replyFlags(req, p, FLAG_AA)), this.name);
    if (rcode === Rcode.NXDOMAIN) res.fastMs = FAST_MAX_MS;
    return res;
  }

  /** Sends a prepared answer: the serial and the query's spelling of the zone are written in. */
  private reply(req: Request, p: PreparedAnswer): Response {
    // Too big for the client, and loadbalance may shuffle it: the whole answer, which the
    // server cuts at a record boundary (TC), so the records kept are any of them. Else only
    // the records that fit are copied (TC when some do not).
    const out = writeReply(req, p, -1, replyFlags(req, p, FLAG_AA), this.index.serial, !mayShuffle(req.qtype));
    const res = Response.wire(out, this.name);
    res.prepared = p;
    // The same until the index changes (which flushes the native table).
    res.fastMs = FAST_MAX_MS;
    return res;
  }

  /**
   * An ExternalName service asked for A/AAAA: the CNAME, then the target's records as this
   * server block's chain (usually forward) answers them. A target outside the zones keeps the
   * CNAME unless the lookup throws; one inside them is added only when it has addresses.
   */
  private async alias(req: Request, zone: string, target: string): Promise<Response> {
    const m = req.reply(Rcode.NOERROR);
    m.aa = true;
    const targetLower = target.toLowerCase();
    if (targetLower !== req.name && req.depth < MAX_ALIAS_DEPTH) {
      const inZone = this.forwardZones.some((z) => isSubdomain(targetLower, z));
      let sub: Message | null = null;
      let lookupFailed = false;
      try {
        const derived = req.derive(target, req.qtype);
        const res = await this.resolveThrough(derived);
        if (!res.isBare) sub = res.toMessage(derived);
      } catch {
        lookupFailed = true;
      }
      // CoreDNS keeps the CNAME of a target outside the zones whatever the lookup answered (an
      // upstream's SERVFAIL, no `forward`): it drops it only when the lookup itself errors.
      const answers = sub?.answers ?? [];
      if (inZone ? answers.length > 0 : !lookupFailed) {
        m.answers.push(
          { name: req.qname, type: QType.CNAME, class: QClass.IN, ttl: this.o.ttl, data: { target } },
          ...answers,
        );
        if (sub?.tc) m.tc = true;
      }
    }
    if (m.answers.length === 0) m.authorities.push(this.soaRecord(req, zone));
    const res = Response.message(m, this.name);
    // Built from this Service and, in the cluster, from every Service its alias chain passes.
    res.prepared = dependenciesOnly(this.aliasDependencies(req.name, zone, targetLower));
    return res;
  }

  /** This alias's Service and those of the in-cluster names its chain of targets passes through. */
  private aliasDependencies(name: string, zone: string, target: string): string[] {
    const deps: string[] = [];
    const own = scopeOf(name, zone);
    if (own !== null) deps.push(own);
    let t = target;
    for (let hop = 0; hop < MAX_ALIAS_DEPTH; hop++) {
      const z = matchZone(this.forwardZones, t);
      if (z === undefined) break;
      const scope = scopeOf(t, z);
      if (scope !== null && !deps.includes(scope)) deps.push(scope);
      const f = this.lookup.services(t, z, 'address');
      if (!f.ok || f.cname === '') break;
      t = f.cname.toLowerCase();
    }
    return deps;
  }

  private soaRecord(req: Request, zone: string): ResourceRecord {
    const spelled = zone === '.' ? '.' : req.qname.slice(req.qname.length - zone.length);
    const under = (label: string) => (spelled === '.' ? `${label}.` : `${label}.${spelled}`);
    return {
      name: spelled,
      type: QType.SOA,
      class: QClass.IN,
      ttl: Math.min(this.o.ttl, 300),
      data: {
        mname: under('ns.dns'),
        rname: under('hostmaster'),
        serial: this.index.serial,
        refresh: 7200,
        retry: 1800,
        expire: 86400,
        minimum: this.o.ttl,
      },
    };
  }
}

/** Questions whose answers loadbalance shuffles (A, AAAA, MX records): kept whole until the server cuts them. */
function mayShuffle(qtype: number): boolean {
  return (
    qtype === QType.A || qtype === QType.AAAA || qtype === QType.MX || qtype === QType.ANY || qtype === QType.CNAME
  );
}

/**
 * SRV per CoreDNS: priority 0, weight floor(100/N) (at least 1) with N counted before
 * duplicates are dropped; one SRV per (target, port); the targets' addresses in the
 * additional section, one per (target, address). Port-less services get none.
 */
function writeSrv(w: AnswerWriter, f: Found): void {
  if (!f.ok || f.addresses.length === 0) return;
  const weight = Math.max(1, Math.floor(100 / f.addresses.length));
  const targetAt = new Map<string, number>();
  const srvSeen = new Set<string>();
  const extraSeen = new Set<string>();
  const extras: Array<{ at: string; ip: string }> = [];
  for (const it of f.addresses) {
    if (it.port === -1) continue;
    const srvKey = `${it.target} ${it.port}`;
    if (!srvSeen.has(srvKey)) {
      srvSeen.add(srvKey);
      const at = w.srv(weight, it.port, it.target);
      if (!targetAt.has(it.target)) targetAt.set(it.target, at);
      w.an++;
    }
    const extraKey = `${it.target} ${it.ip}`;
    if (!extraSeen.has(extraKey)) {
      extraSeen.add(extraKey);
      extras.push({ at: it.target, ip: it.ip });
    }
  }
  for (const e of extras) {
    w.address(targetAt.get(e.at)!, e.ip);
    w.ar++;
  }
}

/** The apex NS records (our own Service's names, else ns.dns.<zone>) with their addresses as glue. */
function writeNs(w: AnswerWriter, lookup: Lookup, zone: string): void {
  const addrs = lookup.nsAddresses();
  const nameAt = new Map<string, number>();
  for (const a of addrs) {
    if (nameAt.has(a.target)) continue;
    nameAt.set(a.target, w.nameRecord(QType.NS, zone === '.' ? `${a.target}.` : `${a.target}.${zone}`, true));
    w.an++;
  }
  const seen = new Set<string>();
  for (const a of addrs) {
    const key = `${a.target} ${a.ip}`;
    if (seen.has(key)) continue;
    seen.add(key);
    w.address(nameAt.get(a.target)!, a.ip);
    w.ar++;
  }
}

/**
 * Which change invalidates the answer for `name`: its Service (`s:ns/svc`) for names at or
 * below a Service, nothing (not kept) for pod names, whose set is unbounded in insecure
 * mode, and the global scope for the rest (apex, `<ns>.svc`, dns-version, ns.dns).
 */
function scopeOf(name: string, zone: string): Scope {
  const r = parseRequest(name, zone);
  if (r === null) return GLOBAL_SCOPE;
  if (r.podOrSvc === 'pod') return null;
  if (r.podOrSvc === 'svc' && r.service !== '') return `s:${r.namespace}/${r.service}`;
  return GLOBAL_SCOPE;
}
