// The kubernetes plugin's metrics. None is touched on the query path: they count API
// requests and watch events, and read the sources' state when /metrics is scraped.

import { Counter, Gauge, Histogram } from 'prom-client';
import { labelKey, PlainCounter, registry, splitLabelKey } from '../../metrics/registry.js';

/** What the api_up gauge reads from each running plugin instance. */
export interface ApiState {
  readonly connected: boolean;
}

const liveSources = new Set<ApiState>();

export function trackApiState(s: ApiState): () => void {
  liveSources.add(s);
  return () => {
    liveSources.delete(s);
  };
}

/** Ours: 1 while every running kubernetes instance reaches its API (or manifests); 0 while one serves stale data. */
new Gauge({
  name: 'coredns_kubernetes_api_up',
  help: 'Whether the kubernetes plugin currently reaches the Kubernetes API (1) or serves the last known state (0).',
  registers: [registry],
  collect() {
    let up = liveSources.size > 0 ? 1 : 0;
    for (const s of liveSources) if (!s.connected) up = 0;
    this.set(up);
  },
});

const requests = new PlainCounter();

/** CoreDNS's client-go metric: one count per API request, by HTTP status code ('<error>' without one). */
export function countRequest(code: string, method: string, host: string): void {
  requests.inc(labelKey(code, method, host));
}

new Counter<'code' | 'method' | 'host'>({
  name: 'coredns_kubernetes_rest_client_requests_total',
  help: 'Number of HTTP requests, partitioned by status code, method, and host.',
  labelNames: ['code', 'method', 'host'],
  registers: [registry],
  collect() {
    this.reset();
    for (const [k, v] of requests.entries()) {
      const [code = '', method = '', host = ''] = splitLabelKey(k);
      this.inc({ code, method, host }, v);
    }
  },
});

/** CoreDNS's: time from an endpoint change (the slice's last-change-trigger-time) to DNS serving it. */
export const programmingDuration = new Histogram<'service_kind'>({
  name: 'coredns_kubernetes_dns_programming_duration_seconds',
  help: 'Histogram of the time (in seconds) it took to program a dns instance.',
  labelNames: ['service_kind'],
  buckets: [0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.256, 0.512, 1.024, 2.048, 4.096, 8.192, 16.384, 32.768, 65.536, 131.072, 262.144, 524.288],
  registers: [registry],
});
