// /metrics with several worker processes: the worker that gets the scrape asks the primary,
// which gathers every worker's samples with prom-client's AggregatorRegistry and sums them.
// prom-client is loaded only once metrics are wanted (registry.ts): in a worker when its
// registry is created, in the primary when a worker first asks.

import cluster from 'node:cluster';
import { metricsRegistry, metricsLoaded, promClient, registry, whenRegistryCreated, withoutInternalFamilies } from './registry.js';

const REQ = 'clusterdns:metrics-req';
const RES = 'clusterdns:metrics-res';
/** prom-client's own messages (lib/cluster.js), answered here while prom-client is not loaded. */
const PROM_REQ = 'prom-client:getMetricsReq';
const PROM_RES = 'prom-client:getMetricsRes';

interface MetricsRequest { type: typeof REQ; id: number }
interface MetricsResponse { type: typeof RES; id: number; text?: string; error?: string }

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

/** The exposition text: this process's, or every worker's summed when running as a worker. */
export async function metricsText(): Promise<string> {
  if (!cluster.isWorker || !process.send) return registry.metrics();
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

/** What /metrics serves: metricsText() without the families kept for the status page only. */
export async function exportedMetricsText(): Promise<string> {
  return withoutInternalFamilies(await metricsText());
}

/** In the primary: answer workers' metrics requests (prom-client is loaded at the first). */
export function servePrimaryMetrics(): void {
  let aggregator: InstanceType<ReturnType<typeof promClient>['AggregatorRegistry']> | null = null;
  cluster.on('message', (worker, m: MetricsRequest) => {
    if (!m || m.type !== REQ) return;
    aggregator ??= new (promClient().AggregatorRegistry)();
    aggregator.clusterMetrics().then(
      (text) => worker.send({ type: RES, id: m.id, text } satisfies MetricsResponse),
      (e: Error) => worker.send({ type: RES, id: m.id, error: e.message } satisfies MetricsResponse),
    );
  });
}
