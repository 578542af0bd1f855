// What DNS keeps of each Kubernetes object, and the projections that strip an API object
// down to it. Records are plain JSON-serialisable objects, so they can cross a process
// boundary (one watcher feeding several workers) unchanged. A projection never throws:
// a broken object is skipped with a warning naming it (`ns/name`), a broken part of an
// object (one bad port or address) is dropped with a warning and the rest kept.
//
// Records are kept for every object of the cluster, so they are kept small: strings that
// many records repeat (namespaces, protocols, port names) are one copy each, identical port
// lists are one shared frozen array, and arrays are exactly as long as their contents
// (an array grown by push keeps room for 16 more). compactRecord() does the same for
// records that arrive from another process.

import { canonicalIP } from '../dns/ip.js';
import { isRecord, stringMap } from '../kube/types.js';

export interface PortRecord {
  /** '' for an unnamed port. */
  name: string;
  /** Lowercase: 'tcp', 'udp' or 'sctp'. */
  protocol: string;
  port: number;
}

export type ServiceKind = 'ClusterIP' | 'Headless' | 'ExternalName';

export interface ServiceRecord {
  name: string;
  namespace: string;
  kind: ServiceKind;
  /** Canonical text form; empty for headless and ExternalName services. */
  clusterIPs: string[];
  /** Fully qualified target of an ExternalName service, else ''. */
  externalName: string;
  ports: PortRecord[];
  /** Only for the programming-latency metric's `service_kind` label. */
  selector: boolean;
  /** externalIPs and LoadBalancer ingress (k8s_external); absent when the Service has none. */
  external?: { ips: string[]; hosts: string[] };
}

/** One ready endpoint of a slice. */
export interface EndpointRecord {
  ips: string[];
  /** spec hostname (StatefulSet pods, hostname+subdomain), else ''. */
  hostname: string;
  /** targetRef name, kept only with `endpoint_pod_names` and when it is a DNS label. */
  podName: string;
}

export interface EndpointSliceRecord {
  name: string;
  namespace: string;
  /** The `kubernetes.io/service-name` label. */
  service: string;
  ports: PortRecord[];
  endpoints: EndpointRecord[];
  /** `endpoints.kubernetes.io/last-change-trigger-time` in ms since the epoch, 0 when absent. */
  triggerTime: number;
}

export interface NamespaceRecord {
  name: string;
}

export interface PodRecord {
  namespace: string;
  /** status.podIP in canonical form; '' when the pod has none or is being deleted. */
  ip: string;
}

/** How many distinct strings intern() keeps before it starts again (a bound, not a cache policy). */
const MAX_INTERNED = 50_000;
const interned = new Map<string, string>();

/** One copy of a string records repeat: namespaces, protocols, port names. */
export function intern(s: string): string {
  const v = interned.get(s);
  if (v !== undefined) return v;
  if (interned.size >= MAX_INTERNED) interned.clear();
  interned.set(s, s);
  return s;
}

const NO_PORTS: PortRecord[] = Object.freeze([]) as unknown as PortRecord[];
const portLists = new Map<string, PortRecord[]>();

/** The shared, frozen copy of a port list (records are never modified in place). */
function sharedPorts(list: readonly PortRecord[]): PortRecord[] {
  if (list.length === 0) return NO_PORTS;
  let key = '';
  for (const p of list) key += `${p.name}/${p.protocol}/${p.port},`;
  const found = portLists.get(key);
  if (found !== undefined) return found;
  if (portLists.size >= MAX_INTERNED) portLists.clear();
  const shared = Object.freeze(
    list.map((p) => Object.freeze({ name: intern(p.name), protocol: intern(p.protocol), port: p.port })),
  ) as PortRecord[];
  portLists.set(key, shared);
  return shared;
}

/** A copy with no spare capacity (one element: 56 bytes instead of 152). */
function exact<T>(a: T[]): T[] {
  return a.slice();
}

/** `ns/name` as one flat string (a template literal makes a chain of pieces, ~20 bytes more). */
export function joinKey(namespace: string, name: string): string {
  return namespace ? [namespace, name].join('/') : name;
}

/**
 * Makes a record that arrived from another process (JSON over IPC: every string its own
 * copy) as compact as a projected one.
 */
export function compactRecord<K extends 'Service' | 'EndpointSlice' | 'Namespace' | 'Pod'>(
  kind: K,
  value: RecordOf<K>,
): RecordOf<K> {
  switch (kind) {
    case 'Service': {
      const v = value as ServiceRecord;
      v.namespace = intern(v.namespace);
      v.ports = sharedPorts(v.ports);
      break;
    }
    case 'EndpointSlice': {
      const v = value as EndpointSliceRecord;
      v.namespace = intern(v.namespace);
      v.ports = sharedPorts(v.ports);
      break;
    }
    case 'Pod': {
      const v = value as PodRecord;
      v.namespace = intern(v.namespace);
      break;
    }
  }
  return value;
}

export type RecordOf<K> = K extends 'Service'
  ? ServiceRecord
  : K extends 'EndpointSlice'
    ? EndpointSliceRecord
    : K extends 'Namespace'
      ? NamespaceRecord
      : PodRecord;

const NO_IPS: string[] = Object.freeze([]) as unknown as string[];
const NO_ENDPOINTS: EndpointRecord[] = Object.freeze([]) as unknown as EndpointRecord[];

export const SERVICE_NAME_LABEL = 'kubernetes.io/service-name';
const TRIGGER_TIME = 'endpoints.kubernetes.io/last-change-trigger-time';

/** RFC 1123 label, as Kubernetes validates namespace, hostname and most names. */
const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
/** RFC 1035 label: Service names must start with a letter. */
const DNS1035_LABEL = /^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$/;

/** Where a projection reports what it skipped: `what` names the object, e.g. `Service default/web`. */
export type ProjectionWarn = (what: string, why: string) => void;

export interface ProjectionOptions {
  /** Keep endpoints' targetRef names (`endpoint_pod_names`). */
  endpointPodNames: boolean;
  warn: ProjectionWarn;
}

interface Meta {
  name: string;
  /** Interned. */
  namespace: string;
  /** metadata.labels and .annotations as they came; stringMap() them where one is needed. */
  labels: unknown;
  annotations: unknown;
  deleting: boolean;
}

function metaOf(obj: unknown, kind: string, namespaced: boolean, warn: ProjectionWarn): Meta | null {
  if (!isRecord(obj) || !isRecord(obj.metadata)) {
    warn(`${kind} <unnamed>`, 'no metadata; skipped');
    return null;
  }
  const m = obj.metadata;
  const name = typeof m.name === 'string' ? m.name : '';
  const namespace = typeof m.namespace === 'string' ? m.namespace : '';
  const what = `${kind} ${namespaced ? `${namespace || '<no namespace>'}/` : ''}${name || '<unnamed>'}`;
  if (name === '') {
    warn(what, 'no metadata.name; skipped');
    return null;
  }
  if (namespaced && !DNS1123_LABEL.test(namespace)) {
    warn(
      what,
      `${namespace === '' ? 'no metadata.namespace' : `namespace "${namespace.slice(0, 80)}" is not a DNS label of at most 63 characters`}; skipped`,
    );
    return null;
  }
  return {
    name,
    namespace: intern(namespace),
    labels: m.labels,
    annotations: m.annotations,
    deleting: typeof m.deletionTimestamp === 'string',
  };
}

function describe(kind: string, meta: Meta): string {
  return meta.namespace ? `${kind} ${meta.namespace}/${meta.name}` : `${kind} ${meta.name}`;
}

function projectPorts(value: unknown, what: string, warn: ProjectionWarn): PortRecord[] {
  if (value === undefined || value === null) return NO_PORTS;
  if (!Array.isArray(value)) {
    warn(what, 'ports is not a list; ignoring its ports');
    return NO_PORTS;
  }
  const out: PortRecord[] = [];
  for (const p of value) {
    if (!isRecord(p)) {
      warn(what, 'a port is not an object; port skipped');
      continue;
    }
    const port = p.port;
    if (typeof port !== 'number' || !Number.isInteger(port) || port < 1 || port > 65535) {
      warn(what, `port ${JSON.stringify(port ?? null)} is not a number in 1..65535; port skipped`);
      continue;
    }
    let name = '';
    if (typeof p.name === 'string' && p.name !== '') {
      if (DNS1123_LABEL.test(p.name)) name = p.name;
      else warn(what, `port name "${p.name.slice(0, 80)}" is not a DNS label; port ${port} kept without a name`);
    }
    let protocol = 'tcp';
    if (p.protocol !== undefined && p.protocol !== null) {
      const pr = typeof p.protocol === 'string' ? p.protocol.toLowerCase() : '';
      if (pr === 'tcp') protocol = 'tcp';
      else if (pr === 'udp') protocol = 'udp';
      else if (pr === 'sctp') protocol = 'sctp';
      else {
        warn(what, `port ${port} has protocol ${JSON.stringify(p.protocol)}; port skipped`);
        continue;
      }
    }
    out.push({ name, protocol, port });
  }
  return sharedPorts(out);
}

/** A hostname-shaped DNS name (what an ExternalName may hold), made fully qualified; null if not one. */
function externalTarget(s: string): string | null {
  const n = s.endsWith('.') ? s.slice(0, -1) : s;
  if (n.length === 0 || n.length > 253) return null;
  for (const l of n.split('.')) if (!/^[A-Za-z0-9_]([-A-Za-z0-9_]{0,61}[A-Za-z0-9_])?$/.test(l)) return null;
  return n + '.';
}

export function projectService(obj: unknown, o: ProjectionOptions): ServiceRecord | null {
  const meta = metaOf(obj, 'Service', true, o.warn);
  if (meta === null || !isRecord(obj)) return null;
  const what = describe('Service', meta);
  if (!DNS1035_LABEL.test(meta.name)) {
    o.warn(what, 'its name is not a DNS label of at most 63 characters starting with a letter; skipped');
    return null;
  }
  const spec = isRecord(obj.spec) ? obj.spec : {};
  const ports = projectPorts(spec.ports, what, o.warn);
  const selector = isRecord(spec.selector) && Object.keys(spec.selector).length > 0;
  if (spec.type === 'ExternalName') {
    const raw = typeof spec.externalName === 'string' ? spec.externalName : '';
    if (raw === '') {
      o.warn(what, 'ExternalName service without spec.externalName; skipped');
      return null;
    }
    // CoreDNS ignores an IP literal here (it is not a name to alias), so the service gives NXDOMAIN.
    const target = canonicalIP(raw) !== null ? null : externalTarget(raw);
    if (target === null)
      o.warn(what, `externalName "${raw.slice(0, 80)}" is not a host name; the service will not resolve`);
    return {
      name: meta.name,
      namespace: meta.namespace,
      kind: 'ExternalName',
      clusterIPs: NO_IPS,
      externalName: target ?? '',
      ports,
      selector,
    };
  }
  let ips: unknown[] = [];
  if (Array.isArray(spec.clusterIPs) && spec.clusterIPs.length > 0) ips = spec.clusterIPs;
  else if (typeof spec.clusterIP === 'string' && spec.clusterIP !== '') ips = [spec.clusterIP];
  if (ips.length === 0) {
    o.warn(what, 'no spec.clusterIP; skipped');
    return null;
  }
  const external = projectExternal(spec, obj.status, what, o.warn);
  if (ips[0] === 'None') {
    const h: ServiceRecord = {
      name: meta.name,
      namespace: meta.namespace,
      kind: 'Headless',
      clusterIPs: NO_IPS,
      externalName: '',
      ports,
      selector,
    };
    if (external !== undefined) h.external = external;
    return h;
  }
  const clusterIPs: string[] = [];
  for (let i = 0; i < ips.length; i++) {
    const ip = typeof ips[i] === 'string' ? canonicalIP(ips[i] as string) : null;
    if (ip === null) {
      if (i === 0) {
        o.warn(what, `clusterIP ${JSON.stringify(ips[0])} is not an IP address; skipped`);
        return null;
      }
      o.warn(what, `clusterIPs[${i}] ${JSON.stringify(ips[i])} is not an IP address; dropped`);
      continue;
    }
    if (!clusterIPs.includes(ip)) clusterIPs.push(ip);
  }
  const rec: ServiceRecord = {
    name: meta.name,
    namespace: meta.namespace,
    kind: 'ClusterIP',
    clusterIPs: exact(clusterIPs),
    externalName: '',
    ports,
    selector,
  };
  if (external !== undefined) rec.external = external;
  return rec;
}

/** spec.externalIPs and status.loadBalancer.ingress[].ip/hostname; undefined when there are none. */
function projectExternal(
  spec: Record<string, unknown>,
  status: unknown,
  what: string,
  warn: ProjectionOptions['warn'],
): ServiceRecord['external'] {
  const ips: string[] = [];
  const hosts: string[] = [];
  const addIp = (v: unknown, where: string) => {
    const ip = typeof v === 'string' ? canonicalIP(v) : null;
    if (ip === null) warn(what, `${where} ${JSON.stringify(v).slice(0, 80)} is not an IP address; dropped`);
    else if (!ips.includes(ip)) ips.push(ip);
  };
  if (Array.isArray(spec.externalIPs)) for (const v of spec.externalIPs) addIp(v, 'externalIPs entry');
  const lb = isRecord(status) && isRecord(status.loadBalancer) ? status.loadBalancer.ingress : undefined;
  if (Array.isArray(lb)) {
    for (const ing of lb) {
      if (!isRecord(ing)) continue;
      if (typeof ing.ip === 'string' && ing.ip !== '') addIp(ing.ip, 'loadBalancer ingress ip');
      else if (typeof ing.hostname === 'string' && ing.hostname !== '') {
        const h = externalTarget(ing.hostname);
        if (h !== null && !hosts.includes(h)) hosts.push(h);
      }
    }
  }
  return ips.length === 0 && hosts.length === 0 ? undefined : { ips, hosts };
}

export function projectEndpointSlice(obj: unknown, o: ProjectionOptions): EndpointSliceRecord | null {
  const meta = metaOf(obj, 'EndpointSlice', true, o.warn);
  if (meta === null || !isRecord(obj)) return null;
  const what = describe('EndpointSlice', meta);
  const service = stringMap(meta.labels)?.[SERVICE_NAME_LABEL] ?? '';
  if (service === '') {
    o.warn(what, `no ${SERVICE_NAME_LABEL} label; skipped`);
    return null;
  }
  if (!DNS1035_LABEL.test(service)) {
    o.warn(what, `${SERVICE_NAME_LABEL} "${service.slice(0, 80)}" is not a Service name; skipped`);
    return null;
  }
  const triggerText = stringMap(meta.annotations)?.[TRIGGER_TIME];
  const parsed = triggerText ? Date.parse(triggerText) : NaN;
  const triggerTime = Number.isFinite(parsed) ? parsed : 0;
  const addressType = obj.addressType;
  const rec: EndpointSliceRecord = {
    name: meta.name,
    namespace: meta.namespace,
    service,
    ports: NO_PORTS,
    endpoints: NO_ENDPOINTS,
    triggerTime,
  };
  // FQDN slices (and unknown types) carry nothing DNS serves; keep an empty record rather than warn.
  if (addressType !== 'IPv4' && addressType !== 'IPv6') return rec;
  const v6 = addressType === 'IPv6';
  rec.ports = projectPorts(obj.ports, what, o.warn);
  if (obj.endpoints !== undefined && obj.endpoints !== null && !Array.isArray(obj.endpoints)) {
    o.warn(what, 'endpoints is not a list; no endpoints kept');
    return rec;
  }
  const endpoints: EndpointRecord[] = [];
  for (const ep of (obj.endpoints as unknown[] | undefined) ?? []) {
    if (!isRecord(ep)) {
      o.warn(what, 'an endpoint is not an object; endpoint skipped');
      continue;
    }
    // Ready unset counts as ready, as in CoreDNS and the EndpointSlice API.
    if (isRecord(ep.conditions) && ep.conditions.ready === false) continue;
    const ips: string[] = [];
    for (const a of Array.isArray(ep.addresses) ? (ep.addresses as unknown[]) : []) {
      const ip = typeof a === 'string' ? canonicalIP(a) : null;
      if (ip === null || ip.includes(':') !== v6) {
        o.warn(what, `address ${JSON.stringify(a)} is not an ${addressType} address; address skipped`);
        continue;
      }
      if (!ips.includes(ip)) ips.push(ip);
    }
    if (ips.length === 0) continue;
    let hostname = '';
    if (typeof ep.hostname === 'string' && ep.hostname !== '') {
      if (DNS1123_LABEL.test(ep.hostname)) hostname = ep.hostname;
      else o.warn(what, `endpoint hostname "${ep.hostname.slice(0, 80)}" is not a DNS label; named by its IP instead`);
    }
    let podName = '';
    if (
      o.endpointPodNames &&
      isRecord(ep.targetRef) &&
      typeof ep.targetRef.name === 'string' &&
      DNS1123_LABEL.test(ep.targetRef.name)
    ) {
      podName = ep.targetRef.name;
    }
    endpoints.push({ ips: exact(ips), hostname, podName });
  }
  if (endpoints.length > 0) rec.endpoints = exact(endpoints);
  return rec;
}

export function projectNamespace(obj: unknown, o: ProjectionOptions): NamespaceRecord | null {
  const meta = metaOf(obj, 'Namespace', false, o.warn);
  if (meta === null) return null;
  if (!DNS1123_LABEL.test(meta.name)) {
    o.warn(`Namespace ${meta.name.slice(0, 80)}`, 'its name is not a DNS label of at most 63 characters; skipped');
    return null;
  }
  return { name: meta.name };
}

const GONE_PHASES: ReadonlySet<unknown> = new Set(['Succeeded', 'Failed', 'Unknown']);

export function projectPod(obj: unknown, o: ProjectionOptions): PodRecord | null {
  const meta = metaOf(obj, 'Pod', true, o.warn);
  if (meta === null || !isRecord(obj)) return null;
  const status = isRecord(obj.status) ? obj.status : {};
  // Finished and deleting pods keep no DNS name (CoreDNS filters the same phases server-side).
  if (meta.deleting || GONE_PHASES.has(status.phase) || status.podIP === undefined || status.podIP === '') {
    return { namespace: meta.namespace, ip: '' };
  }
  const ip = typeof status.podIP === 'string' ? canonicalIP(status.podIP) : null;
  if (ip === null) {
    o.warn(
      describe('Pod', meta),
      `status.podIP ${JSON.stringify(status.podIP)} is not an IP address; the pod gets no name`,
    );
    return { namespace: meta.namespace, ip: '' };
  }
  return { namespace: meta.namespace, ip };
}

/** The store key the API reflector and the manifests reader both use: `ns/name`, or `name`. */
export function recordKey(namespace: string, name: string): string {
  return joinKey(namespace, name);
}
