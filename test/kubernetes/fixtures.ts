// Builders for the Kubernetes objects the kubernetes plugin's tests put in the test API
// server or in manifest files, and a one-line text form of DNS records to compare against.

import { typeToString } from '../../src/dns/constants.js';
import type { Message, ResourceRecord, SoaData, SrvData, TxtData } from '../../src/dns/message.js';

export type Obj = Record<string, unknown>;
export type PortSpec = [name: string, protocol: string, port: number];

export function namespace(name: string, labels?: Record<string, string>): Obj {
  return { kind: 'Namespace', apiVersion: 'v1', metadata: { name, ...(labels ? { labels } : {}) } };
}

function ports(list: PortSpec[]): Obj[] {
  return list.map(([name, protocol, port]) => ({ ...(name ? { name } : {}), protocol, port }));
}

/** A ClusterIP Service (several IPs: dual-stack), or headless with `'None'`. */
export function service(
  ns: string,
  name: string,
  clusterIPs: string[] | 'None',
  portList: PortSpec[] = [],
  extra: Obj = {},
): Obj {
  const ips = clusterIPs === 'None' ? ['None'] : clusterIPs;
  return {
    kind: 'Service',
    apiVersion: 'v1',
    metadata: { name, namespace: ns },
    spec: {
      type: 'ClusterIP',
      clusterIP: ips[0],
      clusterIPs: ips,
      ports: ports(portList),
      selector: { app: name },
      ...extra,
    },
  };
}

export function externalService(ns: string, name: string, target: string): Obj {
  return {
    kind: 'Service',
    apiVersion: 'v1',
    metadata: { name, namespace: ns },
    spec: { type: 'ExternalName', externalName: target },
  };
}

export interface EndpointSpec {
  ip: string | string[];
  hostname?: string;
  ready?: boolean;
  pod?: string;
}

export function slice(
  ns: string,
  name: string,
  svc: string,
  addressType: 'IPv4' | 'IPv6',
  endpoints: EndpointSpec[],
  portList: PortSpec[] = [],
): Obj {
  return {
    kind: 'EndpointSlice',
    apiVersion: 'discovery.k8s.io/v1',
    metadata: { name, namespace: ns, labels: { 'kubernetes.io/service-name': svc } },
    addressType,
    ports: ports(portList),
    endpoints: endpoints.map((e) => ({
      addresses: Array.isArray(e.ip) ? e.ip : [e.ip],
      ...(e.hostname ? { hostname: e.hostname } : {}),
      ...(e.ready === undefined ? {} : { conditions: { ready: e.ready } }),
      ...(e.pod ? { targetRef: { kind: 'Pod', namespace: ns, name: e.pod } } : {}),
    })),
  };
}

export function pod(ns: string, name: string, ip: string, phase = 'Running'): Obj {
  return {
    kind: 'Pod',
    apiVersion: 'v1',
    metadata: { name, namespace: ns },
    spec: {},
    status: { phase, podIP: ip, podIPs: [{ ip }] },
  };
}

/** `name ttl TYPE data` with the SOA serial shown as S (it is the time of the last change). */
export function rrText(rr: ResourceRecord): string {
  const d = rr.data;
  let data: string;
  switch (typeToString(rr.type)) {
    case 'A':
    case 'AAAA':
      data = (d as { address: string }).address;
      break;
    case 'CNAME':
    case 'PTR':
    case 'NS':
      data = (d as { target: string }).target;
      break;
    case 'SRV': {
      const s = d as SrvData;
      data = `${s.priority} ${s.weight} ${s.port} ${s.target}`;
      break;
    }
    case 'TXT':
      data = (d as TxtData).texts.map((t) => `"${t}"`).join(' ');
      break;
    case 'SOA': {
      const s = d as SoaData;
      data = `${s.mname} ${s.rname} S ${s.refresh} ${s.retry} ${s.expire} ${s.minimum}`;
      break;
    }
    default:
      data = '?';
  }
  return `${rr.name} ${rr.ttl} ${typeToString(rr.type)} ${data}`;
}

export function sectionText(list: ResourceRecord[]): string[] {
  return list.map(rrText).sort();
}

/** The zone SOA a negative answer carries, as rrText prints it. */
export function soaText(zone: string, ttl = 5): string {
  return `${zone} ${Math.min(ttl, 300)} SOA ns.dns.${zone} hostmaster.${zone} S 7200 1800 86400 ${ttl}`;
}

export function serialOf(m: Message): number {
  const rr = [...m.answers, ...m.authorities].find((r) => r.type === 6);
  return rr ? (rr.data as SoaData).serial : -1;
}
