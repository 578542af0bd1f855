// /metrics with several worker processes: the worker that gets the scrape asks the primary,
// which gathers every worker's samples with prom-client's AggregatorRegistry and sums them.

import cluster from 'node:cluster';
import { AggregatorRegistry } from 'prom-client';
import { registry } from './registry.js';

const REQ = 'clusterdns:metrics-req';
const RES = 'clusterdns:metrics-res';

interface MetricsRequest { type: typeof REQ; id: number }
interface MetricsResponse { type: typeof RES; id: number; text?: string; error?: string }

let nextId = 0;
const pending = new Map<number, (r: MetricsResponse) => void>();
let workerListening = false;

/** In a worker: make this process's registry the one the primary aggregates. */
export function setupWorkerMetrics(): void {
  AggregatorRegistry.setRegistries([registry]);
  if (workerListening) return;
  workerListening = true;
  // prom-client installs the worker's answering listener when an aggregator is constructed.
  new AggregatorRegistry();
  process.on('message', (m: MetricsResponse) => {
    if (m && m.type === RES) {
      const f = pending.get(m.id);
      if (f) {
        pending.delete(m.id);
        f(m);
      }
    }
  });
}

/** The exposition text: this process's, or every worker's summed when running as a worker. */
export async function metricsText(): Promise<string> {
  if (!cluster.isWorker || !process.send) return registry.metrics();
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

/** In the primary: answer workers' metrics requests. */
export function servePrimaryMetrics(): void {
  const aggregator = new AggregatorRegistry();
  cluster.on('message', (worker, m: MetricsRequest) => {
    if (!m || m.type !== REQ) return;
    aggregator.clusterMetrics().then(
      (text) => worker.send({ type: RES, id: m.id, text } satisfies MetricsResponse),
      (e: Error) => worker.send({ type: RES, id: m.id, error: e.message } satisfies MetricsResponse),
    );
  });
}
