// Cluster state from the Kubernetes API: one list+watch reflector (src/kube) per resource
// DNS needs — Services, EndpointSlices (unless `noendpoints`), Namespaces, and Pods with
// `pods verified` — each projecting objects to the records DNS keeps.

import {
  endpointConnection,
  inClusterConnection,
  kubeconfigConnection,
  type ApiConnection,
} from '../kube/connection.js';
import { KubeApiError, KubeClient, type Query, type StreamOptions } from '../kube/http.js';
import { ForbiddenError, Reflector } from '../kube/reflector.js';
import type { Logger } from '../log.js';
import { objectKey } from '../kube/types.js';
import type { ClusterEvent, ClusterKind, ClusterSink, KubeSource, SourceConfig } from './events.js';
import type { KubeClientMetrics } from './metrics.js';
import { settleHeapSoon } from '../server/heap.js';
import {
  projectEndpointSlice,
  projectNamespace,
  projectPod,
  projectService,
  type EndpointSliceRecord,
  type NamespaceRecord,
  type PodRecord,
  type ProjectionOptions,
  type ServiceRecord,
} from './objects.js';

/** A KubeClient that counts requests for `coredns_kubernetes_rest_client_requests_total`. */
class CountingKubeClient extends KubeClient {
  private readonly host: string;

  constructor(
    conn: ApiConnection,
    private readonly metrics: KubeClientMetrics,
  ) {
    super(conn);
    this.host = conn.server.host;
  }

  override getJSON(path: string, query?: Query, opts: { signal?: AbortSignal } = {}): Promise<unknown> {
    return this.counted(opts.signal, () => super.getJSON(path, query, opts));
  }

  override listItems(
    path: string,
    query: Query,
    onItem: (item: unknown) => void,
    opts: { signal?: AbortSignal } = {},
  ): Promise<unknown> {
    return this.counted(opts.signal, () => super.listItems(path, query, onItem, opts));
  }

  override async streamLines(path: string, query: Query, opts: StreamOptions): Promise<void> {
    let opened = false;
    const onOpen = () => {
      opened = true;
      this.countOk();
      opts.onOpen?.();
    };
    try {
      await super.streamLines(path, query, { ...opts, onOpen });
    } catch (err) {
      if (!opened) this.countFailure(err, opts.signal);
      throw err;
    }
  }

  /** One request that ends with its body: counted by how it ended. */
  private async counted<T>(signal: AbortSignal | undefined, request: () => Promise<T>): Promise<T> {
    try {
      const body = await request();
      this.countOk();
      return body;
    } catch (err) {
      this.countFailure(err, signal);
      throw err;
    }
  }

  private countOk(): void {
    this.metrics.countRequest('200', 'GET', this.host);
  }

  /** A request we aborted ourselves is no failure of the API's. */
  private countFailure(err: unknown, signal: AbortSignal | undefined): void {
    if (signal?.aborted) return;
    this.metrics.countRequest(err instanceof KubeApiError ? String(err.status) : '<error>', 'GET', this.host);
  }
}

export interface ApiSourceOptions {
  config: Exclude<SourceConfig, { kind: 'manifests' }>;
  labels: string;
  namespaceLabels: string;
  watchSlices: boolean;
  watchPods: boolean;
  projection: ProjectionOptions;
  log: Logger;
  /** The server's counters of API requests. */
  metrics: KubeClientMetrics;
}

/** The record each kind of object is projected to. */
interface RecordOf {
  Service: ServiceRecord;
  EndpointSlice: EndpointSliceRecord;
  Namespace: NamespaceRecord;
  Pod: PodRecord;
}
type UpsertOf<K extends ClusterKind> = Extract<ClusterEvent, { op: 'upsert'; kind: K }>;

/** What every collection's reflector reports to: start() makes it once. */
interface Watching {
  client: KubeClient;
  sink: ClusterSink;
  common: {
    onDelete(kind: ClusterKind, key: string): void;
    onSynced: () => void;
    onConnection(path: string, connected: boolean): void;
    onForbidden(path: string, message: string): void;
  };
}

/** Finished and unknown pods never get a name (the same field selector CoreDNS uses). */
const POD_FIELD_SELECTOR = 'status.phase!=Succeeded,status.phase!=Failed,status.phase!=Unknown';
const ERROR_LOG_INTERVAL_MS = 30_000;

export class ApiSource implements KubeSource {
  readonly description: string;
  private client: KubeClient | null = null;
  private readonly reflectors: Array<{ start(): unknown; stop(): Promise<void> }> = [];

  constructor(private readonly o: ApiSourceOptions) {
    const c = o.config;
    this.description =
      c.kind === 'endpoint'
        ? `endpoint ${c.url}`
        : c.kind === 'kubeconfig'
          ? `kubeconfig ${c.file}${c.context ? ` (context ${c.context})` : ''}`
          : 'in-cluster';
  }

  private async connect(): Promise<ApiConnection> {
    const c = this.o.config;
    if (c.kind === 'kubeconfig') return kubeconfigConnection(c.file, c.context);
    if (c.kind === 'endpoint') return endpointConnection(c.url, c.tls ?? undefined);
    return inClusterConnection();
  }

  async start(sink: ClusterSink): Promise<void> {
    const client = new CountingKubeClient(await this.connect(), this.o.metrics);
    this.client = client;
    const p = this.o.projection;
    const labels = this.o.labels || undefined;
    let unsynced = 2 + (this.o.watchSlices ? 1 : 0) + (this.o.watchPods ? 1 : 0);
    const up = new Map<string, boolean>();
    /** RBAC denials by collection, until that collection answers again. */
    const denied = new Map<string, string>();
    const report = () => {
      let all = true;
      for (const v of up.values()) all &&= v;
      const problem = denied.size ? [...denied.values()].join('; ') : undefined;
      sink({ op: 'connection', up: all, detail: this.description, ...(problem ? { problem } : {}) });
    };
    const common = {
      onDelete: (kind: ClusterKind, key: string) => sink({ op: 'delete', kind, key }),
      onSynced: () => {
        if (--unsynced === 0) sink({ op: 'synced' });
      },
      onConnection: (path: string, connected: boolean) => {
        up.set(path, connected);
        if (connected) denied.delete(path);
        report();
      },
      onForbidden: (path: string, message: string) => {
        if (denied.get(path) === message) return;
        denied.set(path, message);
        report();
      },
    };
    const watching = { client, sink, common };
    this.watch(watching, 'Namespace', '/api/v1/namespaces', this.o.namespaceLabels || undefined, undefined, (obj) =>
      projectNamespace(obj, p),
    );
    this.watch(watching, 'Service', '/api/v1/services', labels, undefined, (obj) => projectService(obj, p));
    if (this.o.watchSlices)
      this.watch(watching, 'EndpointSlice', '/apis/discovery.k8s.io/v1/endpointslices', labels, undefined, (obj) =>
        projectEndpointSlice(obj, p),
      );
    if (this.o.watchPods)
      this.watch(watching, 'Pod', '/api/v1/pods', labels, POD_FIELD_SELECTOR, (obj) => projectPod(obj, p));
    for (const r of this.reflectors) r.start();
  }

  /** One reflector: projected objects become upsert/delete events of `kind` under the store key `ns/name`. */
  private watch<K extends ClusterKind>(
    { client, sink, common }: Watching,
    kind: K,
    path: string,
    labelSelector: string | undefined,
    fieldSelector: string | undefined,
    project: (obj: unknown) => RecordOf[K] | null,
  ): void {
    const upsert = (key: string, value: RecordOf[K]) => sink({ op: 'upsert', kind, key, value } as UpsertOf<K>);
    const log = this.o.log;
    let lastError = '';
    let lastErrorAt = 0;
    const r = new Reflector<RecordOf[K]>({
      client,
      path,
      labelSelector,
      fieldSelector,
      project: (obj) => {
        const value = project(obj);
        const key = value === null ? null : objectKey(obj);
        return key === null || value === null ? null : { key, value };
      },
      onAdd: upsert,
      onUpdate: (key, _old, value) => upsert(key, value),
      onDelete: (key) => common.onDelete(kind, key),
      onSynced: common.onSynced,
      // A relist (the first list ends before the reflector counts as synced) replaced the whole collection.
      onListEnd: (completed) => {
        if (completed && r.hasSynced) settleHeapSoon();
      },
      onConnectionChange: (connected) => common.onConnection(path, connected),
      onError: (err) => {
        if (err instanceof ForbiddenError)
          common.onForbidden(path, err.message.slice(err.message.indexOf('forbidden:')));
        const now = Date.now();
        if (err.message === lastError && now - lastErrorAt < ERROR_LOG_INTERVAL_MS) return;
        lastError = err.message;
        lastErrorAt = now;
        log.warn(`${this.description}: ${err.message}`);
      },
      info: (msg) => log.info(`${this.description}: ${msg}`),
      // The projection has already said why it skipped an object; the reflector's generic line would repeat it.
      warn: (msg) => {
        if (!msg.includes('skipping malformed object')) log.warn(msg);
      },
    });
    this.reflectors.push(r);
  }

  async stop(): Promise<void> {
    await Promise.all(this.reflectors.map((r) => r.stop()));
    this.client?.close();
  }
}
