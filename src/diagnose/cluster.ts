// What `kubectl` shows about cluster DNS, checked step by step: the kube-dns Service (does it
// exist, is its ClusterIP the pod's nameserver), its EndpointSlices (are endpoints ready),
// and the DNS pods (k8s-app=kube-dns: ready, crash-looping). Plus the Service list the
// NXDOMAIN suggestions are drawn from. Read-only GETs; each step reports its own failure.

import { canonicalIP } from '../dns/ip.js';
import { KubeApiError, type KubeClient } from '../kube/http.js';
import { isList, isRecord } from '../kube/types.js';

export const DNS_NAMESPACE = 'kube-system';
export const DNS_SERVICE = 'kube-dns';
export const DNS_POD_SELECTOR = 'k8s-app=kube-dns';

export type CheckStep = 'service' | 'endpoints' | 'pods';
export type CheckStatus = 'ok' | 'warn' | 'fail' | 'error' | 'skipped';

export interface ClusterCheck {
  step: CheckStep;
  status: CheckStatus;
  summary: string;
  details: string[];
}

export interface ServiceRef {
  name: string;
  namespace: string;
  /** "None" for headless, "" for ExternalName. */
  clusterIP: string;
}

function errorText(e: unknown): string {
  if (e instanceof KubeApiError) {
    if (e.status === 401) return `${e.message} (the credentials were not accepted)`;
    if (e.status === 403) return `${e.message} (RBAC: the user needs get/list on this resource)`;
    return e.message;
  }
  if (e instanceof Error) {
    if (e.name === 'TimeoutError' || e.name === 'AbortError') return 'the API server did not answer in time';
    return e.message;
  }
  return String(e);
}

async function get(
  client: KubeClient,
  path: string,
  timeoutMs: number,
  query?: Record<string, string>,
): Promise<unknown> {
  return client.getJSON(path, query, { signal: AbortSignal.timeout(timeoutMs) });
}

function str(v: unknown): string | undefined {
  return typeof v === 'string' ? v : undefined;
}

function arr(v: unknown): unknown[] {
  return Array.isArray(v) ? v : [];
}

/** Runs the three checks; `nameservers` are the resolv.conf ones the ClusterIP should match. */
export async function checkClusterDns(
  client: KubeClient,
  nameservers: string[],
  timeoutMs: number,
): Promise<ClusterCheck[]> {
  const [service, endpoints, pods] = await Promise.all([
    checkService(client, nameservers, timeoutMs),
    checkEndpoints(client, timeoutMs),
    checkPods(client, timeoutMs),
  ]);
  if (service.status === 'fail' && /not found/.test(service.summary) && endpoints.status !== 'ok') {
    endpoints.status = 'skipped';
    endpoints.summary = `skipped: there is no Service ${DNS_NAMESPACE}/${DNS_SERVICE} to have endpoints`;
    endpoints.details = [];
  }
  return [service, endpoints, pods];
}

async function checkService(client: KubeClient, nameservers: string[], timeoutMs: number): Promise<ClusterCheck> {
  const c: ClusterCheck = { step: 'service', status: 'ok', summary: '', details: [] };
  let svc: unknown;
  try {
    svc = await get(client, `/api/v1/namespaces/${DNS_NAMESPACE}/services/${DNS_SERVICE}`, timeoutMs);
  } catch (e) {
    if (e instanceof KubeApiError && e.status === 404) {
      c.status = 'fail';
      c.summary = `Service ${DNS_NAMESPACE}/${DNS_SERVICE} not found: pods' resolv.conf points at its ClusterIP, so nothing answers them`;
      c.details.push(`kubectl -n ${DNS_NAMESPACE} get svc ${DNS_SERVICE}`);
      return c;
    }
    c.status = 'error';
    c.summary = `could not read Service ${DNS_NAMESPACE}/${DNS_SERVICE}: ${errorText(e)}`;
    return c;
  }
  const spec = isRecord(svc) && isRecord(svc.spec) ? svc.spec : {};
  const primary = str(spec.clusterIP) ?? '';
  const ips = arr(spec.clusterIPs).filter((x): x is string => typeof x === 'string');
  if (ips.length === 0 && primary) ips.push(primary);
  if (primary === 'None' || ips.length === 0) {
    c.status = 'fail';
    c.summary = `Service ${DNS_NAMESPACE}/${DNS_SERVICE} has no ClusterIP (${primary || 'none'}): pods cannot reach it by one address`;
    return c;
  }
  const ports = arr(spec.ports).filter(isRecord);
  const has = (proto: string) => ports.some((p) => p.port === 53 && (str(p.protocol) ?? 'TCP') === proto);
  if (!has('UDP')) c.details.push('no port 53/UDP: resolvers ask over UDP first');
  if (!has('TCP'))
    c.details.push('no port 53/TCP: truncated answers (large records, many endpoints) cannot be fetched');
  const wanted = new Set(ips.map((ip) => canonicalIP(ip) ?? ip));
  const ns = nameservers.map((n) => canonicalIP(n.replace(/%.*$/, '')) ?? n);
  const match = ns.find((n) => wanted.has(n));
  const nodeLocal = ns.find((n) => n.startsWith('169.254.'));
  if (match) {
    c.summary = `Service ${DNS_NAMESPACE}/${DNS_SERVICE} has ClusterIP ${ips.join(', ')}, the nameserver in resolv.conf`;
  } else if (nodeLocal) {
    c.summary = `Service ${DNS_NAMESPACE}/${DNS_SERVICE} has ClusterIP ${ips.join(', ')}; resolv.conf asks ${nodeLocal}, a node-local cache (NodeLocal DNSCache) that forwards to it`;
  } else {
    c.status = 'warn';
    c.summary = `resolv.conf nameserver ${nameservers.join(', ')} is not the ${DNS_SERVICE} ClusterIP ${ips.join(', ')}`;
    c.details.push(
      "a pod with dnsPolicy ClusterFirst gets the kubelet's clusterDNS address: check the kubelet's --cluster-dns / clusterDNS and the pod's dnsPolicy/dnsConfig",
    );
  }
  if (c.status === 'ok' && (!has('UDP') || !has('TCP'))) c.status = 'warn';
  return c;
}

async function checkEndpoints(client: KubeClient, timeoutMs: number): Promise<ClusterCheck> {
  const c: ClusterCheck = { step: 'endpoints', status: 'ok', summary: '', details: [] };
  let list: unknown;
  try {
    list = await get(client, `/apis/discovery.k8s.io/v1/namespaces/${DNS_NAMESPACE}/endpointslices`, timeoutMs, {
      labelSelector: `kubernetes.io/service-name=${DNS_SERVICE}`,
    });
  } catch (e) {
    c.status = 'error';
    c.summary = `could not list the EndpointSlices of ${DNS_NAMESPACE}/${DNS_SERVICE}: ${errorText(e)}`;
    return c;
  }
  const slices = isList(list) ? list.items.filter(isRecord) : [];
  if (slices.length === 0) {
    c.status = 'fail';
    c.summary = `no EndpointSlices for ${DNS_NAMESPACE}/${DNS_SERVICE}: its selector matches no DNS pods, so its ClusterIP leads nowhere`;
    c.details.push(`kubectl -n ${DNS_NAMESPACE} get endpointslices -l kubernetes.io/service-name=${DNS_SERVICE}`);
    return c;
  }
  const ready: string[] = [];
  const notReady: string[] = [];
  for (const slice of slices) {
    for (const ep of arr(slice.endpoints).filter(isRecord)) {
      const addrs = arr(ep.addresses).filter((a): a is string => typeof a === 'string');
      const cond = isRecord(ep.conditions) ? ep.conditions : {};
      const target = isRecord(ep.targetRef) && typeof ep.targetRef.name === 'string' ? ` (${ep.targetRef.name})` : '';
      const label = `${addrs.join(', ') || '?'}${target}`;
      // The API: a missing ready condition means ready.
      if (cond.ready === false) notReady.push(label + (cond.terminating === true ? ' terminating' : ''));
      else ready.push(label);
    }
  }
  const total = ready.length + notReady.length;
  if (ready.length === 0) {
    c.status = 'fail';
    c.summary =
      total === 0
        ? 'the EndpointSlices list no endpoints: no DNS pod backs the Service'
        : `0 of ${total} endpoints ready: queries to the ClusterIP go nowhere`;
  } else if (notReady.length > 0) {
    c.status = 'warn';
    c.summary = `${ready.length} of ${total} endpoints ready`;
  } else {
    c.summary = `${ready.length} of ${total} endpoints ready`;
  }
  for (const r of ready) c.details.push(`ready: ${r}`);
  for (const r of notReady) c.details.push(`not ready: ${r}`);
  return c;
}

async function checkPods(client: KubeClient, timeoutMs: number): Promise<ClusterCheck> {
  const c: ClusterCheck = { step: 'pods', status: 'ok', summary: '', details: [] };
  let list: unknown;
  try {
    list = await get(client, `/api/v1/namespaces/${DNS_NAMESPACE}/pods`, timeoutMs, {
      labelSelector: DNS_POD_SELECTOR,
    });
  } catch (e) {
    c.status = 'error';
    c.summary = `could not list the DNS pods (${DNS_POD_SELECTOR}): ${errorText(e)}`;
    return c;
  }
  const pods = isList(list) ? list.items.filter(isRecord) : [];
  if (pods.length === 0) {
    c.status = 'fail';
    c.summary = `no pods labelled ${DNS_POD_SELECTOR} in ${DNS_NAMESPACE}: is the DNS Deployment scaled to 0 or its pods labelled differently?`;
    c.details.push(`kubectl -n ${DNS_NAMESPACE} get deploy,pods -l ${DNS_POD_SELECTOR}`);
    return c;
  }
  let readyCount = 0;
  for (const pod of pods) {
    const meta = isRecord(pod.metadata) ? pod.metadata : {};
    const status = isRecord(pod.status) ? pod.status : {};
    const name = str(meta.name) ?? '?';
    const phase = str(status.phase) ?? 'Unknown';
    const readyCond = arr(status.conditions)
      .filter(isRecord)
      .find((x) => x.type === 'Ready');
    const ready = readyCond?.status === 'True' && phase === 'Running' && meta.deletionTimestamp === undefined;
    const notes: string[] = [];
    let restarts = 0;
    for (const cs of arr(status.containerStatuses).filter(isRecord)) {
      if (typeof cs.restartCount === 'number') restarts += cs.restartCount;
      const state = isRecord(cs.state) ? cs.state : {};
      const waiting = isRecord(state.waiting) ? str(state.waiting.reason) : undefined;
      if (waiting) notes.push(waiting);
      const lastTerm =
        isRecord(cs.lastState) && isRecord(cs.lastState.terminated) ? str(cs.lastState.terminated.reason) : undefined;
      if (lastTerm && restarts > 0) notes.push(`last exit: ${lastTerm}`);
    }
    if (restarts > 0) notes.push(`${restarts} restart${restarts === 1 ? '' : 's'}`);
    if (meta.deletionTimestamp !== undefined) notes.push('terminating');
    if (ready) readyCount++;
    const ip = str(status.podIP);
    c.details.push(
      `${ready ? 'ready' : 'not ready'}: ${name} ${phase}${ip ? ` ${ip}` : ''}${notes.length ? ` (${notes.join(', ')})` : ''}`,
    );
  }
  if (readyCount === 0) {
    c.status = 'fail';
    c.summary = `0 of ${pods.length} DNS pods ready: check their logs (kubectl -n ${DNS_NAMESPACE} logs -l ${DNS_POD_SELECTOR})`;
  } else if (readyCount < pods.length) {
    c.status = 'warn';
    c.summary = `${readyCount} of ${pods.length} DNS pods ready`;
  } else {
    c.summary = `${readyCount} of ${pods.length} DNS pods ready`;
  }
  return c;
}

/** Every Service (paged), and the namespaces when the user may list them (null otherwise). */
export async function listServices(
  client: KubeClient,
  timeoutMs: number,
  max = 50_000,
): Promise<{ services: ServiceRef[]; namespaces: string[] | null }> {
  const services: ServiceRef[] = [];
  let token: string | undefined;
  do {
    const query: Record<string, string> = { limit: '500' };
    if (token) query.continue = token;
    const list = await get(client, '/api/v1/services', timeoutMs, query);
    if (!isList(list)) break;
    for (const item of list.items) {
      if (!isRecord(item) || !isRecord(item.metadata)) continue;
      const name = str(item.metadata.name);
      const namespace = str(item.metadata.namespace);
      if (!name || !namespace) continue;
      const spec = isRecord(item.spec) ? item.spec : {};
      services.push({ name, namespace, clusterIP: str(spec.clusterIP) ?? '' });
    }
    token = isRecord(list.metadata) ? str(list.metadata.continue) : undefined;
  } while (token && services.length < max);
  let namespaces: string[] | null = null;
  try {
    const list = await get(client, '/api/v1/namespaces', timeoutMs);
    if (isList(list)) {
      namespaces = list.items
        .filter(isRecord)
        .map((n) => (isRecord(n.metadata) ? str(n.metadata.name) : undefined))
        .filter((n): n is string => !!n);
    }
  } catch {
    namespaces = null; // listing namespaces is often not allowed; the services' namespaces stand in
  }
  return { services, namespaces };
}

/** The first broken step, for the verdict: `fail` outranks `error`. */
export function brokenStep(checks: ClusterCheck[]): ClusterCheck | null {
  return checks.find((c) => c.status === 'fail') ?? null;
}
