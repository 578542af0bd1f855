// The name grammar and what a name stands for, after CoreDNS's parse.go, kubernetes.go
// (Records, findServices, findPods, serviceRecordForIP, nsAddrs) and Services(): a name
// either does not exist (NXDOMAIN) or exists with some address, alias or text items.
// Which records a qtype then gets is answer.ts's business.

import { canonicalIP, formatIPv4, parseIPv6 } from '../../dns/ip.js';
import { keysOf, type ClusterIndex } from '../../cluster/clusterindex.js';
import type { EndpointRecord, PortRecord } from '../../cluster/objects.js';
import type { KubernetesOptions } from './options.js';

/** `[endpoint.|_port._proto.]service.namespace.(svc|pod)` after the zone is taken off. */
export interface RecordRequest {
  /** 'svc' or 'pod'; '' for the apex, `svc.<zone>` and `pod.<zone>` (NODATA names). */
  podOrSvc: string;
  namespace: string;
  service: string;
  endpoint: string;
  port: string;
  protocol: string;
}

/** An address the name has, with the port an SRV record would carry and the SRV target. */
export interface AddressItem {
  ip: string;
  port: number;
  /** The target name without the zone, lowercase: `svc.ns.svc`, `host.svc.ns.svc`, `ns.dns`. */
  target: string;
}

export type Found =
  | { ok: false }
  | {
      ok: true;
      addresses: AddressItem[];
      /** ExternalName target (FQDN), or ''. */
      cname: string;
      /** `dns-version.<zone>`: the schema version TXT. */
      text: boolean;
    };

export const NOT_FOUND: Found = { ok: false };

function found(addresses: AddressItem[], cname = '', text = false): Found {
  return { ok: true, addresses, cname, text };
}

const NO_DATA: Found = found([]);

/** A port-less service or slice still has its addresses: CoreDNS uses port -1, which gets no SRV. */
const PORTLESS: readonly PortRecord[] = [{ name: '', protocol: '', port: -1 }];

/** The part of `name` left of `zone` ('' at the apex). Both lowercase FQDNs. */
export function trimZone(name: string, zone: string): string {
  if (zone === '.') return name === '.' ? '' : name.slice(0, -1);
  return name.length === zone.length ? '' : name.slice(0, name.length - zone.length - 1);
}

function stripUnderscore(s: string): string {
  return s.charCodeAt(0) === 0x5f ? s.slice(1) : s;
}

/** CoreDNS's parseRequest; null for an invalid shape (NXDOMAIN). */
export function parseRequest(name: string, zone: string): RecordRequest | null {
  const r: RecordRequest = { podOrSvc: '', namespace: '', service: '', endpoint: '', port: '', protocol: '' };
  const base = trimZone(name, zone);
  if (base === '' || base === 'svc' || base === 'pod') return r;
  const segs = base.split('.');
  let last = segs.length - 1;
  r.podOrSvc = segs[last]!;
  if (r.podOrSvc !== 'svc' && r.podOrSvc !== 'pod') return null;
  if (--last < 0) return r;
  r.namespace = segs[last]!;
  if (--last < 0) return r;
  r.service = segs[last]!;
  if (--last < 0) return r;
  if (last === 0) r.endpoint = segs[0]!;
  else if (last === 1) {
    r.protocol = stripUnderscore(segs[1]!);
    r.port = stripUnderscore(segs[0]!);
  } else return null; // too many labels
  return r;
}

/** The name of an endpoint: its hostname, else (endpoint_pod_names) its pod, else its dashed IP. */
export function endpointHostname(ep: EndpointRecord, ip: string): string {
  if (ep.hostname !== '') return ep.hostname;
  if (ep.podName !== '') return ep.podName;
  return dashedIp(ip);
}

/** `10.0.0.1` → `10-0-0-1`; `5678:abcd::1` → `5678-abcd--1`; a trailing dash gets a 0. */
export function dashedIp(ip: string): string {
  if (ip.includes('.')) return ip.replaceAll('.', '-');
  const d = ip.replaceAll(':', '-');
  return d.endsWith('-') ? d + '0' : d;
}

function isReverseName(name: string): boolean {
  return (
    name.endsWith('.in-addr.arpa.') || name.endsWith('.ip6.arpa.') || name === 'in-addr.arpa.' || name === 'ip6.arpa.'
  );
}

export class Lookup {
  constructor(
    private readonly index: ClusterIndex,
    private readonly o: KubernetesOptions,
    /** Addresses this server answers on, to find its own Service for NS records. */
    private readonly localIPs: () => readonly string[],
  ) {}

  /** A namespace must exist (in the watched set) and pass the `namespaces` filter. */
  namespaceExposed(ns: string): boolean {
    if (this.o.namespaces.size > 0 && !this.o.namespaces.has(ns)) return false;
    return this.index.namespaces.has(ns);
  }

  /**
   * CoreDNS's Services(): what `name` has for a query of this kind. 'txt' answers only
   * `dns-version` and otherwise turns existence into NODATA; 'srv' leaves ExternalName out.
   */
  services(name: string, zone: string, mode: 'address' | 'txt' | 'srv'): Found {
    if (mode === 'txt') {
      if (trimZone(name, zone) === 'dns-version') return found([], '', true);
      const r = this.records(name, zone);
      // CoreDNS quirk kept: a name with no records at all (the apex, `<ns>.svc`) gives NXDOMAIN for TXT.
      return r.ok && (r.addresses.length > 0 || r.cname !== '') ? NO_DATA : NOT_FOUND;
    }
    if (name === (zone === '.' ? 'ns.dns.' : `ns.dns.${zone}`)) return found(this.nsAddresses());
    const r = this.records(name, zone);
    if (mode === 'srv' && r.ok && r.cname !== '') return NO_DATA;
    return r;
  }

  /** CoreDNS's Records(): the grammar, the namespace check, then services or pods. */
  records(name: string, zone: string): Found {
    const r = parseRequest(name, zone);
    if (r === null) return NOT_FOUND;
    if (r.podOrSvc === '') return NO_DATA;
    if (isReverseName(name)) return NOT_FOUND;
    if (!this.namespaceExposed(r.namespace)) return NOT_FOUND;
    return r.podOrSvc === 'pod' ? this.findPods(r) : this.findServices(r);
  }

  private findServices(r: RecordRequest): Found {
    if (r.service === '') return NO_DATA;
    const key = `${r.namespace}/${r.service}`;
    const svc = this.index.services.get(key);
    if (svc === undefined) return NOT_FOUND;
    const slices = this.index.slicesByService.get(key);
    if (this.o.ignoreEmptyService && svc.kind === 'ClusterIP' && !hasReadyAddress(slices)) return NOT_FOUND;
    if (svc.kind === 'ExternalName') {
      // No endpoints or ports below an alias; an unusable externalName is no answer at all.
      if (r.endpoint !== '' || r.port !== '' || r.protocol !== '' || svc.externalName === '') return NOT_FOUND;
      return found([], svc.externalName);
    }
    const items: AddressItem[] = [];
    let matched = false;
    if (svc.kind === 'Headless' || r.endpoint !== '') {
      if (slices === undefined) return NOT_FOUND;
      for (const slice of slices) {
        const ports = slice.ports.length > 0 ? slice.ports : PORTLESS;
        for (const ep of slice.endpoints) {
          for (const ip of ep.ips) {
            const host = endpointHostname(ep, ip);
            if (r.endpoint !== '' && r.endpoint !== host) continue;
            for (const p of ports) {
              if (!portMatches(r, p)) continue;
              matched = true;
              items.push({ ip, port: p.port, target: `${host}.${svc.name}.${svc.namespace}.svc` });
            }
          }
        }
      }
      return matched ? found(items) : NOT_FOUND;
    }
    const ports = svc.ports.length > 0 ? svc.ports : PORTLESS;
    const target = `${svc.name}.${svc.namespace}.svc`;
    for (const p of ports) {
      if (!portMatches(r, p)) continue;
      matched = true;
      for (const ip of svc.clusterIPs) items.push({ ip, port: p.port, target });
    }
    return matched ? found(items) : NOT_FOUND;
  }

  private findPods(r: RecordRequest): Found {
    if (this.o.pods === 'disabled') return NOT_FOUND;
    if (r.service === '') return NO_DATA;
    const label = r.service;
    let dashes = 0;
    for (let i = 0; i < label.length; i++) if (label.charCodeAt(i) === 0x2d) dashes++;
    let ip = canonicalIP(
      dashes === 3 && !label.includes('--') ? label.replaceAll('-', '.') : label.replaceAll('-', ':'),
    );
    if (ip === null) return NOT_FOUND;
    // An IPv4-mapped name (--ffff-a00-1) is the IPv4 address, as Go's net.ParseIP reads it in CoreDNS.
    const v6 = ip.includes(':') ? parseIPv6(ip) : null;
    if (v6 !== null && v6.readUInt32BE(0) === 0 && v6.readUInt32BE(4) === 0 && v6.readUInt32BE(8) === 0xffff)
      ip = formatIPv4(v6, 12);
    if (this.o.pods === 'verified' && !this.index.hasPod(r.namespace, ip)) return NOT_FOUND;
    // Port 0, not -1 (port-less): CoreDNS answers SRV for a pod name with `0 100 0 <name>`.
    return found([{ ip, port: 0, target: `${label}.${r.namespace}.pod` }]);
  }

  /** CoreDNS's serviceRecordForIP: the first Service with this ClusterIP, else every endpoint name with it. */
  reverse(ip: string): string[] {
    const filter = this.o.namespaces.size > 0 ? this.o.namespaces : null;
    const zone = this.o.primaryZone;
    for (const key of keysOf(this.index.servicesByClusterIp.get(ip))) {
      const svc = this.index.services.get(key);
      if (svc === undefined || (filter !== null && !filter.has(svc.namespace))) continue;
      return [`${svc.name}.${svc.namespace}.svc.${zone}`];
    }
    const out: string[] = [];
    for (const key of keysOf(this.index.slicesByIp.get(ip))) {
      const slice = this.index.slices.get(key);
      if (slice === undefined || (filter !== null && !filter.has(slice.namespace))) continue;
      for (const ep of slice.endpoints) {
        if (!ep.ips.includes(ip)) continue;
        const t = `${endpointHostname(ep, ip)}.${slice.service}.${slice.namespace}.svc.${zone}`;
        if (!out.includes(t)) out.push(t);
      }
    }
    return out;
  }

  /**
   * CoreDNS's nsAddrs: when one of our addresses is an endpoint of a Service (kube-dns),
   * the NS names are that Service's (headless: the endpoint names) with its addresses;
   * otherwise `ns.dns` with our own addresses.
   */
  nsAddresses(): AddressItem[] {
    const out: AddressItem[] = [];
    const local = this.localIPs();
    for (const localIp of local) {
      for (const key of keysOf(this.index.slicesByIp.get(localIp))) {
        const slice = this.index.slices.get(key);
        if (slice === undefined) continue;
        const svc = this.index.services.get(`${slice.namespace}/${slice.service}`);
        if (svc === undefined) continue;
        const base = `${svc.name}.${svc.namespace}.svc`;
        if (svc.kind === 'Headless') {
          for (const ep of slice.endpoints)
            for (const ip of ep.ips) out.push({ ip, port: 0, target: `${endpointHostname(ep, ip)}.${base}` });
        } else {
          for (const ip of svc.clusterIPs) out.push({ ip, port: 0, target: base });
        }
      }
    }
    if (out.length > 0) return out;
    for (const ip of local) out.push({ ip, port: 0, target: 'ns.dns' });
    return out;
  }
}

function portMatches(r: RecordRequest, p: PortRecord): boolean {
  return (r.port === '' || r.port === p.name) && (r.protocol === '' || r.protocol === p.protocol);
}

function hasReadyAddress(slices: readonly { endpoints: EndpointRecord[] }[] | undefined): boolean {
  if (slices === undefined) return false;
  for (const s of slices) if (s.endpoints.length > 0) return true;
  return false;
}
