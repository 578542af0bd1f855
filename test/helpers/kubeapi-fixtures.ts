// Shared bits for tests against the test API server: object builders, a reflector wired to
// record what it emits, and a polling wait.
import { endpointConnection, type ApiConnection } from '../../src/kube/connection.js';
import { KubeClient } from '../../src/kube/http.js';
import { Reflector, type Projected, type ReflectorOptions } from '../../src/kube/reflector.js';
import { isRecord, objectKey } from '../../src/kube/types.js';
import type { KubeApiServer } from './kubeapi.js';

export function service(
  name: string,
  clusterIP: string,
  namespace = 'default',
  labels?: Record<string, string>,
): Record<string, unknown> {
  return {
    kind: 'Service',
    apiVersion: 'v1',
    metadata: { name, namespace, ...(labels ? { labels } : {}) },
    spec: {
      type: 'ClusterIP',
      clusterIP,
      clusterIPs: [clusterIP],
      ports: [{ name: 'http', port: 80, protocol: 'TCP' }],
    },
  };
}

/** The nth address in 10.96.0.0/16, so bulk services get distinct ClusterIPs. */
export function nthIp(n: number): string {
  return `10.96.${(n >> 8) & 255}.${n & 255}`;
}

export interface ServiceRecord {
  clusterIP: string;
}

/** What a DNS plugin would keep of a Service; null when clusterIP is not a string. */
export function projectService(obj: unknown): Projected<ServiceRecord> | null {
  const key = objectKey(obj);
  if (!key || !isRecord(obj) || !isRecord(obj.spec) || typeof obj.spec.clusterIP !== 'string') return null;
  return { key, value: { clusterIP: obj.spec.clusterIP } };
}

export interface Recorded<T> {
  adds: Array<[string, T]>;
  updates: Array<[string, T, T]>;
  deletes: Array<[string, T]>;
  synced: number;
  errors: Error[];
  warnings: string[];
  connection: boolean[];
}

export interface TestReflector<T> {
  reflector: Reflector<T>;
  client: KubeClient;
  rec: Recorded<T>;
  /** Stop the reflector and close the client. */
  close(): Promise<void>;
}

type Extra<T> = Partial<Omit<ReflectorOptions<T>, 'client'>>;

/** A started Service reflector against `server` (plain endpoint connection unless one is given). */
export async function serviceReflector(
  server: KubeApiServer,
  extra: Extra<ServiceRecord> = {},
  conn?: ApiConnection,
): Promise<TestReflector<ServiceRecord>> {
  return recordingReflector(server, { path: '/api/v1/services', project: projectService, ...extra }, conn);
}

export async function recordingReflector<T>(
  server: KubeApiServer,
  opts: Extra<T> & { path: string; project: ReflectorOptions<T>['project'] },
  conn?: ApiConnection,
): Promise<TestReflector<T>> {
  const client = new KubeClient(conn ?? (await endpointConnection(server.url)));
  const rec: Recorded<T> = { adds: [], updates: [], deletes: [], synced: 0, errors: [], warnings: [], connection: [] };
  const reflector = new Reflector<T>({
    backoff: { initialMs: 20, maxMs: 200 },
    idleTimeoutMs: 5_000,
    // The LIST + WATCH path; the WatchList tests turn it on.
    watchList: false,
    onAdd: (k, v) => rec.adds.push([k, v]),
    onUpdate: (k, o, v) => rec.updates.push([k, o, v]),
    onDelete: (k, o) => rec.deletes.push([k, o]),
    onSynced: () => rec.synced++,
    onError: (e) => rec.errors.push(e),
    onConnectionChange: (c) => rec.connection.push(c),
    warn: (m) => rec.warnings.push(m),
    info: (m) => rec.warnings.push(m),
    ...opts,
    client,
  });
  reflector.start();
  return {
    reflector,
    client,
    rec,
    close: async () => {
      await reflector.stop();
      client.close();
    },
  };
}

/** Poll `cond` every 10 ms until it holds; fail after `timeoutMs` with `what`. */
export async function waitFor(cond: () => boolean, what: string, timeoutMs = 2_000): Promise<number> {
  const start = Date.now();
  while (!cond()) {
    if (Date.now() - start > timeoutMs) throw new Error(`timed out after ${timeoutMs} ms waiting for: ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
  return Date.now() - start;
}

export const delay = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
