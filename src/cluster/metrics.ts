// The cluster watch's metrics, under the kubernetes plugin's names. None is touched on the
// query path: they count API requests and watch events, and read the sources' state when
// /metrics is scraped.

import { histogramSamples, registerCollected, type Sample } from '../metrics/collected.js';
import { labelKey, PlainCounter, splitLabelKey, type Registry } from '../metrics/registry.js';
import { metricsKey } from '../server/services.js';
import type { EndpointSliceRecord, ServiceRecord } from './objects.js';

/** What the api_up gauge reads from each running plugin instance. */
export interface ApiState {
  readonly connected: boolean;
}

/** A server's running kubernetes instances, as its api_up gauge reads them. */
class ApiStates {
  private readonly live = new Set<ApiState>();

  track(s: ApiState): () => void {
    this.live.add(s);
    return () => {
      this.live.delete(s);
    };
  }

  /** 1 while every running instance reaches its API (or manifests); 0 while one serves stale data. */
  up(): number {
    let up = this.live.size > 0 ? 1 : 0;
    for (const s of this.live) if (!s.connected) up = 0;
    return up;
  }
}

/** Ours: coredns_kubernetes_api_up, of the server's own instances (another server's outage is not this one's). */
export const API_STATES = metricsKey(
  'kubernetes api_up',
  () => new ApiStates(),
  (registry, states) =>
    registerCollected(
      registry,
      'coredns_kubernetes_api_up',
      'Whether the kubernetes plugin currently reaches the Kubernetes API (1) or serves the last known state (0).',
      'gauge',
      () => [{ labels: {}, value: states.up() }],
    ),
);

/** CoreDNS's programming-latency buckets: prometheus.ExponentialBuckets(0.001, 2, 20). */
const PROGRAMMING_BUCKETS: readonly number[] = [
  0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.256, 0.512, 1.024, 2.048, 4.096, 8.192, 16.384, 32.768,
  65.536, 131.072, 262.144, 524.288,
];

/** Observations of one `service_kind`: counts per bucket (not cumulative; last slot +Inf) and their sum. */
interface Observed {
  counts: Float64Array;
  sum: number;
}

/**
 * A server's cluster-watch counters: its API requests and its programming latency. With
 * workers the primary's are the whole server's (it runs the one watch, relay.ts).
 */
export class KubeClientMetrics {
  private readonly requests = new PlainCounter();
  private readonly programming = new Map<string, Observed>();

  /** CoreDNS's client-go metric: one count per API request, by HTTP status code ('<error>' without one). */
  countRequest(code: string, method: string, host: string): void {
    this.requests.inc(labelKey(code, method, host));
  }

  /**
   * CoreDNS's: time from an endpoint change (the slice's last-change-trigger-time) to DNS
   * serving it. Counted in plain numbers, exposed as the histogram prom-client would give
   * (same name, buckets, `le` first among the labels).
   */
  observeProgrammingSeconds(serviceKind: string, seconds: number): void {
    let o = this.programming.get(serviceKind);
    if (o === undefined)
      this.programming.set(serviceKind, (o = { counts: new Float64Array(PROGRAMMING_BUCKETS.length + 1), sum: 0 }));
    let b = 0;
    while (b < PROGRAMMING_BUCKETS.length && seconds > PROGRAMMING_BUCKETS[b]!) b++;
    o.counts[b]!++;
    o.sum += seconds;
  }

  /**
   * Observes one slice change's programming latency, labelled as CoreDNS labels it: a headless
   * Service's slice is `headless_with_selector` (the trigger time is set by the endpoints
   * controller, which only manages Services with a selector), any other `cluster_ip`. As in
   * CoreDNS, `headless_without_selector` is declared but never observed; ExternalName has no slices.
   */
  observeProgramming(slice: EndpointSliceRecord, service: ServiceRecord | undefined, now = Date.now()): void {
    if (slice.triggerTime <= 0 || service === undefined || service.kind === 'ExternalName') return;
    const kind = service.kind === 'Headless' ? 'headless_with_selector' : 'cluster_ip';
    this.observeProgrammingSeconds(kind, Math.max(0, now - slice.triggerTime) / 1000);
  }

  register(registry: Registry): void {
    registerCollected(
      registry,
      'coredns_kubernetes_rest_client_requests_total',
      'Number of HTTP requests, partitioned by status code, method, and host.',
      'counter',
      () =>
        [...this.requests.entries()].map(([k, value]) => {
          const [code = '', method = '', host = ''] = splitLabelKey(k);
          return { labels: { code, method, host }, value };
        }),
    );
    registerCollected(
      registry,
      'coredns_kubernetes_dns_programming_duration_seconds',
      'Histogram of the time (in seconds) it took to program a dns instance.',
      'histogram',
      () => {
        const out: Sample[] = [];
        for (const [kind, o] of this.programming) {
          for (const s of histogramSamples(
            'coredns_kubernetes_dns_programming_duration_seconds',
            { service_kind: kind },
            PROGRAMMING_BUCKETS,
            o.counts,
            0,
            o.sum,
          )) {
            // prom-client writes `le` before the histogram's own labels.
            const { le, ...rest } = s.labels;
            out.push(le === undefined ? s : { ...s, labels: { le, ...rest } });
          }
        }
        return out;
      },
    );
  }
}

/** The server's cluster-watch metrics, published in its registry when it serves metrics. */
export const KUBE_CLIENT_METRICS = metricsKey(
  'kubernetes client metrics',
  () => new KubeClientMetrics(),
  (registry, m) => m.register(registry),
);
