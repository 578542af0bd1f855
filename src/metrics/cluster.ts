// /metrics with several worker processes: the worker that gets the scrape asks the primary,
// which gathers every worker's samples and combines them into the whole server's numbers.
// prom-client is loaded only once metrics are wanted (registry.ts): in a worker when its
// registry is created, in the primary when a worker first asks.

import cluster from 'node:cluster';
import { readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import {
  metricsRegistry,
  metricsLoaded,
  promClient,
  registry,
  whenRegistryCreated,
  withoutInternalFamilies,
  type Registry,
} from './registry.js';

const REQ = 'clusterdns:metrics-req';
const RES = 'clusterdns:metrics-res';
/** prom-client's own messages (lib/cluster.js), answered here while prom-client is not loaded. */
const PROM_REQ = 'prom-client:getMetricsReq';
const PROM_RES = 'prom-client:getMetricsRes';

interface MetricsRequest {
  type: typeof REQ;
  id: number;
}
interface MetricsResponse {
  type: typeof RES;
  id: number;
  text?: string;
  error?: string;
}

let nextId = 0;
const pending = new Map<number, (r: MetricsResponse) => void>();
let workerListening = false;

/**
 * In a worker: make this process's registry the one the primary aggregates, once it exists.
 * Until then (no plugin of the configuration wants metrics) the worker has no samples and
 * says so to the primary's aggregator itself, without loading prom-client.
 */
export function setupWorkerMetrics(): void {
  if (workerListening) return;
  workerListening = true;
  whenRegistryCreated((reg, prom) => {
    prom.AggregatorRegistry.setRegistries([reg]);
    // prom-client installs the worker's answering listener when an aggregator is constructed.
    new prom.AggregatorRegistry();
  });
  process.on('message', (m: MetricsResponse | { type?: string; requestId?: number }) => {
    if (!m) return;
    if (m.type === RES) {
      const r = m as MetricsResponse;
      const f = pending.get(r.id);
      if (f) {
        pending.delete(r.id);
        f(r);
      }
    } else if (m.type === PROM_REQ && !metricsLoaded()) {
      process.send?.({ type: PROM_RES, requestId: (m as { requestId?: number }).requestId, metrics: [] });
    }
  });
}

/**
 * In a worker: `reg` (the worker's server's own metrics) is part of what the worker gives the
 * primary's aggregation, beside the process registry. A worker runs one server.
 */
export function aggregatedInWorker(reg: Registry): void {
  if (!cluster.isWorker) return;
  const own = metricsRegistry();
  promClient().AggregatorRegistry.setRegistries([own, reg]);
}

/**
 * The exposition text: this process's registry with `own` (a server's own metrics), or every
 * worker's summed when running as a worker (each worker's `own` is in it: aggregatedInWorker).
 */
export async function metricsText(own: readonly Registry[] = []): Promise<string> {
  if (!cluster.isWorker || !process.send) {
    if (own.length === 0) return registry.metrics();
    return promClient()
      .Registry.merge([metricsRegistry(), ...own])
      .metrics();
  }
  metricsRegistry();
  setupWorkerMetrics();
  const id = nextId++;
  return new Promise<string>((resolve, reject) => {
    const t = setTimeout(() => {
      pending.delete(id);
      reject(new Error('the primary did not answer the metrics request'));
    }, 5000);
    pending.set(id, (r) => {
      clearTimeout(t);
      if (r.text !== undefined) resolve(r.text);
      else reject(new Error(r.error ?? 'metrics request failed'));
    });
    process.send!({ type: REQ, id } satisfies MetricsRequest);
  });
}

type MetricJson = Awaited<
  ReturnType<InstanceType<ReturnType<typeof promClient>['Registry']>['getMetricsAsJSON']>
>[number];
type Aggregator = 'sum' | 'first' | 'min' | 'max' | 'average';

/**
 * How the primary combines one metric over processes when summing would lie: a 0/1 gauge
 * is 1 only when every worker says 1; the whole server started when the primary did.
 */
const COMBINE: Record<string, Aggregator> = {
  coredns_kubernetes_api_up: 'min',
  process_start_time_seconds: 'min',
  process_max_fds: 'min',
};

/** Metrics the primary itself produces for the whole server (its own samples count too): its process and its cluster watch. */
function primaryOwned(name: string): boolean {
  return (
    name.startsWith('process_') ||
    name === 'coredns_kubernetes_rest_client_requests_total' ||
    name === 'coredns_kubernetes_dns_programming_duration_seconds'
  );
}

function isCounting(m: MetricJson): boolean {
  const t = String(m.type);
  return t === 'counter' || t === 'histogram';
}

/** The status page's gauges whose window="total" samples count since start, as counters do. */
const STATUS_TOTALS = new Set([
  'clusterdns_status_responses',
  'clusterdns_status_request_duration_seconds',
  'clusterdns_status_cache',
]);

/** What of a worker's samples outlives it: counters, histograms and the status page's totals. */
function lasting(metrics: MetricJson[]): MetricJson[] {
  const out: MetricJson[] = [];
  for (const m of metrics) {
    if (isCounting(m)) out.push(m);
    else if (STATUS_TOTALS.has(m.name)) {
      const values = m.values.filter((v) => v.labels['window'] === 'total');
      if (values.length > 0) out.push({ ...m, values });
    }
  }
  return out;
}

/** Proportional set size of `pid` in bytes (shared pages divided among their users), from /proc. */
function pssBytes(pid: number): number | undefined {
  try {
    const m = /^Pss:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8'));
    return m ? Number(m[1]) * 1024 : undefined;
  } catch {
    return undefined;
  }
}

/** process_resident_memory_bytes for the whole server: PSS summed over the primary and its workers. */
function wholeServerMemory(): MetricJson | null {
  let total = 0;
  for (const pid of [process.pid, ...Object.values(cluster.workers ?? {}).map((w) => w?.process.pid)]) {
    if (pid === undefined) continue;
    const pss = pssBytes(pid);
    if (pss === undefined) return null;
    total += pss;
  }
  return {
    name: 'process_resident_memory_bytes',
    help: "Resident memory size in bytes: with workers, the sum of every process's proportional set size (shared pages counted once).",
    type: 'gauge',
    aggregator: 'sum',
    values: [{ labels: {}, value: total }],
  } as unknown as MetricJson;
}

/** What /metrics serves: metricsText() without the families kept for the status page only. */
async function exportedMetricsText(own: readonly Registry[] = []): Promise<string> {
  return withoutInternalFamilies(await metricsText(own));
}

/**
 * The one `GET /metrics` handler (prometheus plugin, nodecache's setup metrics listener): the
 * process's families and those of the registries `own` (a server's own metrics).
 */
export function metricsHandler(own: readonly Registry[] = []): (req: IncomingMessage, res: ServerResponse) => void {
  return (_req, res) => serveMetricsText(own, res);
}

/** `metricsHandler()` for a process with no server of its own (nodecache). */
export const serveMetrics = metricsHandler();

function serveMetricsText(own: readonly Registry[], res: ServerResponse): void {
  exportedMetricsText(own).then(
    (text) => {
      res.writeHead(200, { 'content-type': registry.contentType });
      res.end(text);
    },
    (e: Error) => {
      res.writeHead(500, { 'content-type': 'text/plain' });
      res.end(`error collecting metrics: ${e.message}\n`);
    },
  );
}

/**
 * In the primary: answer workers' metrics requests with the whole server's numbers. Each
 * worker's samples are asked for and kept; when a worker dies its last counters and
 * histograms are added to a base the live workers' are summed onto, so no counter falls
 * when a worker is replaced. prom-client is loaded at the first request. `serverRegistry`
 * is the primary's server's own (its cluster watch counts there).
 */
export function servePrimaryMetrics(serverRegistry: () => Registry): void {
  const lastSeen = new Map<number, MetricJson[]>();
  let dead: MetricJson[] = [];
  let deadUpdate: Promise<void> = Promise.resolve();
  const waiting = new Map<number, { left: Set<number>; got: Map<number, MetricJson[]>; done: () => void }>();
  let nextRequest = 0;
  let ownDefaults = false;

  const combine = (lists: MetricJson[][]): MetricJson[][] =>
    lists.map((l) =>
      l.map((m) => ({
        ...m,
        aggregator:
          COMBINE[m.name] ?? (isCounting(m) ? 'sum' : ((m as { aggregator?: Aggregator }).aggregator ?? 'sum')),
      })),
    );

  cluster.on('exit', (w) => {
    // A scrape waiting for this worker goes on without it (its last numbers count below).
    for (const entry of waiting.values()) if (entry.left.delete(w.id) && entry.left.size === 0) entry.done();
    const last = lastSeen.get(w.id);
    if (!last) return;
    // One step at a time, and awaited by a scrape: its numbers are in `dead` or in lastSeen, never in neither.
    deadUpdate = deadUpdate.then(async () => {
      const counting = lasting(last);
      if (counting.length > 0)
        dead = await promClient()
          .AggregatorRegistry.aggregate(combine([dead, counting]))
          .getMetricsAsJSON();
      lastSeen.delete(w.id);
    });
  });

  const gather = (): Promise<Map<number, MetricJson[]>> => {
    const id = nextRequest++;
    const workers = Object.values(cluster.workers ?? {}).filter((w) => w?.isConnected());
    return new Promise((resolve) => {
      const entry = { left: new Set(workers.map((w) => w!.id)), got: new Map<number, MetricJson[]>(), done: () => {} };
      // Well within the 5 s a worker waits for the primary's answer (metricsText).
      const t = setTimeout(() => entry.done(), 2000);
      entry.done = () => {
        clearTimeout(t);
        waiting.delete(id);
        resolve(entry.got);
      };
      waiting.set(id, entry);
      if (entry.left.size === 0) entry.done();
      for (const w of workers) w!.send({ type: PROM_REQ, requestId: id });
    });
  };

  const wholeServer = async (): Promise<string> => {
    const prom = promClient();
    const own = metricsRegistry();
    if (!ownDefaults) {
      ownDefaults = true;
      prom.collectDefaultMetrics({ register: own });
    }
    const got = await gather();
    await deadUpdate;
    const lists: MetricJson[][] = [dead];
    for (const [id, metrics] of got) lastSeen.set(id, metrics);
    // A worker that did not answer in time still counts with what it said last.
    for (const [id, metrics] of lastSeen) if (!got.has(id)) lists.push(lasting(metrics));
    lists.push(...got.values());
    for (const r of [own, serverRegistry()])
      lists.push((await r.getMetricsAsJSON()).filter((m) => primaryOwned(m.name)));
    const memory = wholeServerMemory();
    // Summed RSS would count pages the processes share once per process: PSS replaces it.
    const out = memory ? [...lists.map((l) => l.filter((x) => x.name !== memory.name)), [memory]] : lists;
    return prom.AggregatorRegistry.aggregate(combine(out)).metrics();
  };

  cluster.on(
    'message',
    (worker, m: MetricsRequest | { type?: string; requestId?: number; metrics?: MetricJson[][]; error?: string }) => {
      if (!m) return;
      if (m.type === PROM_RES) {
        const r = m as { requestId: number; metrics?: MetricJson[][] };
        const entry = waiting.get(r.requestId);
        if (!entry || !entry.left.delete(worker.id)) return;
        entry.got.set(worker.id, (r.metrics ?? []).flat());
        if (entry.left.size === 0) entry.done();
        return;
      }
      if (m.type !== REQ) return;
      const req = m as MetricsRequest;
      wholeServer().then(
        (text) => worker.send({ type: RES, id: req.id, text } satisfies MetricsResponse),
        (e: Error) => worker.send({ type: RES, id: req.id, error: e.message } satisfies MetricsResponse),
      );
    },
  );
}
