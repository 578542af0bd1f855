// `__PILLAR__CLUSTER__DNS__`: the ClusterIP of the upstream Service (`kube-dns-upstream` in the
// addon: same pods as kube-dns, but an IP that node-cache does not intercept). Kubernetes puts
// it in every container's environment as <NAME>_SERVICE_HOST — but only for Services that
// existed when the pod started, so when it is missing we ask the API.

import { isIP } from 'node:net';
import { inClusterConnection, kubeconfigConnection, type ApiConnection } from '../kube/connection.js';
import { KubeClient } from '../kube/http.js';
import { isRecord } from '../kube/types.js';

export class UpstreamServiceError extends Error {
  readonly code = 'NODECACHE_ERR_UPSTREAM_SERVICE';
  constructor(message: string) {
    super(message);
    this.name = 'UpstreamServiceError';
  }
}

/** `kube-dns-upstream` → `KUBE_DNS_UPSTREAM_SERVICE_HOST`. */
export function serviceHostEnvName(service: string): string {
  const name = service.includes('/') ? service.slice(service.indexOf('/') + 1) : service;
  return `${name.toUpperCase().replaceAll('-', '_')}_SERVICE_HOST`;
}

export interface UpstreamLookup {
  service: string;
  env: NodeJS.ProcessEnv;
  kubeconfig?: string;
  /** For tests: the API connection to use instead of in-cluster/kubeconfig. */
  connection?: ApiConnection;
  timeoutMs?: number;
}

export interface UpstreamAddress {
  ip: string;
  /** `env KUBE_DNS_UPSTREAM_SERVICE_HOST` or `API kube-system/kube-dns-upstream (in-cluster)`. */
  source: string;
}

function ipOf(obj: unknown): string | undefined {
  if (!isRecord(obj) || !isRecord(obj.spec)) return undefined;
  const ip = obj.spec.clusterIP;
  return typeof ip === 'string' && isIP(ip) !== 0 ? ip : undefined;
}

export async function resolveUpstreamService(o: UpstreamLookup): Promise<UpstreamAddress> {
  const envName = serviceHostEnvName(o.service);
  const fromEnv = o.env[envName]?.trim();
  if (fromEnv) {
    if (isIP(fromEnv) === 0) throw new UpstreamServiceError(`$${envName} is "${fromEnv}", not an IP address`);
    return { ip: fromEnv, source: `env ${envName}` };
  }
  let conn = o.connection;
  // In a Pod, the Service is looked for in the pod's own namespace (kube-system for the addon).
  let podNamespace: string | undefined;
  if (!conn) {
    if (o.kubeconfig) conn = await kubeconfigConnection(o.kubeconfig);
    else if (o.env.KUBERNETES_SERVICE_HOST) {
      conn = await inClusterConnection({ env: o.env });
      podNamespace = conn.namespace;
    } else {
      throw new UpstreamServiceError(
        `$${envName} is not set and there is no API to ask (not in a Pod, no -kubeconfig): create the Service ${o.service} before the node-cache pods, or pass -kubeconfig`,
      );
    }
  }
  const slash = o.service.indexOf('/');
  const namespace = slash >= 0 ? o.service.slice(0, slash) : (podNamespace ?? 'kube-system');
  const name = slash >= 0 ? o.service.slice(slash + 1) : o.service;
  const client = new KubeClient(conn, { requestTimeoutMs: o.timeoutMs ?? 10_000 });
  let obj: unknown;
  try {
    obj = await client.getJSON(
      `/api/v1/namespaces/${encodeURIComponent(namespace)}/services/${encodeURIComponent(name)}`,
    );
  } catch (e) {
    throw new UpstreamServiceError(
      `$${envName} is not set and Service ${namespace}/${name} could not be read from ${conn.source ?? 'the API'}: ${(e as Error).message}`,
    );
  }
  const ip = ipOf(obj);
  if (!ip)
    throw new UpstreamServiceError(
      `Service ${namespace}/${name} has no ClusterIP (headless?); node-cache needs one to forward to`,
    );
  return { ip, source: `API ${namespace}/${name} (${conn.source ?? 'API'})` };
}
