// CoreDNS's core metrics: names, labels and buckets as CoreDNS exports them. The process's
// metrics (prom-client's defaults, build info) go to the process registry; the per-query
// counters and the enabled plugins are a server's own (services.ts), in a registry of its own.

import { registerCollected, histogramSamples, type Sample } from '../../metrics/collected.js';
import { metricsRegistry, promClient, type Registry } from '../../metrics/registry.js';
import { DURATION_BUCKETS, MONITORED_TYPES, NT, SIZE_BUCKETS } from '../../server/stats.js';
import { ServiceKey, type ServerServices } from '../../server/services.js';
import { rcodeToString } from '../../dns/constants.js';
import { VERSION } from '../../version.js';

/** A family prom-client's default metrics always have: present means they are registered. */
const DEFAULT_METRIC = 'process_cpu_user_seconds_total';

/** Registers the process's own metrics once (the registry remembers they are there). */
export function defineProcessMetrics(): void {
  const registry = metricsRegistry();
  if (registry.getSingleMetric(DEFAULT_METRIC)) return;
  promClient().collectDefaultMetrics({ register: registry });
  // Gauges named like counters (promtool rejects them); nodejs_active_*{type} carry the same numbers.
  for (const name of ['nodejs_active_handles_total', 'nodejs_active_requests_total', 'nodejs_active_resources_total'])
    registry.removeSingleMetric(name);
  registerCollected(
    registry,
    'coredns_build_info',
    "A metric with a constant '1' value labeled by version, revision, and goversion from which CoreDNS was built.",
    'gauge',
    () => [{ labels: { version: VERSION, revision: '', goversion: process.version }, value: 1 }],
    'first',
  );
}

/** A server's core metrics, in its own registry, defined when its first prometheus instance starts. */
export const SERVER_METRICS = new ServiceKey<Registry>('prometheus core metrics', (services) => {
  const r = services.metrics();
  defineServerMetrics(r, services);
  return r;
});

function defineServerMetrics(registry: Registry, services: ServerServices): void {
  const serverStats = services.stats;
  const enabledPlugins = services.enabledPlugins;
  const defineCollected = (
    name: string,
    help: string,
    type: 'counter' | 'gauge' | 'histogram',
    collect: () => Sample[],
    aggregator: 'sum' | 'max' | 'first' = 'sum',
  ) => registerCollected(registry, name, help, type, collect, aggregator);
  const view = '';
  defineCollected(
    'coredns_dns_requests_total',
    'Counter of DNS requests made per zone, protocol and family.',
    'counter',
    () => {
      const out: Sample[] = [];
      for (const z of serverStats.all()) {
        for (let p = 0; p < 2; p++)
          for (let f = 0; f < 2; f++)
            for (let t = 0; t < NT; t++) {
              const v = z.requests[(p * 2 + f) * NT + t]!;
              if (v > 0)
                out.push({
                  labels: {
                    server: z.server,
                    zone: z.zone,
                    view,
                    proto: p ? 'tcp' : 'udp',
                    family: f + 1,
                    type: MONITORED_TYPES[t]!,
                  },
                  value: v,
                });
            }
      }
      return out;
    },
  );
  defineCollected('coredns_dns_do_requests_total', 'Counter of DNS requests with DO bit set per zone.', 'counter', () =>
    [...serverStats.all()]
      .filter((z) => z.doRequests > 0)
      .map((z) => ({ labels: { server: z.server, zone: z.zone, view }, value: z.doRequests })),
  );
  defineCollected('coredns_dns_responses_total', 'Counter of response status codes.', 'counter', () => {
    const out: Sample[] = [];
    for (const z of serverStats.all())
      for (const [plugin, counts] of z.responses)
        counts.forEach((v, rc) => {
          if (v > 0)
            out.push({ labels: { server: z.server, zone: z.zone, view, rcode: rcodeToString(rc), plugin }, value: v });
        });
    return out;
  });
  defineCollected(
    'coredns_dns_request_duration_seconds',
    'Histogram of the time (in seconds) each request took per zone.',
    'histogram',
    () => {
      const out: Sample[] = [];
      const nb = DURATION_BUCKETS.length + 1;
      for (const z of serverStats.all())
        for (let t = 0; t < NT; t++) {
          let n = 0;
          for (let b = 0; b < nb; b++) n += z.durations[t * nb + b]!;
          if (n > 0)
            out.push(
              ...histogramSamples(
                'coredns_dns_request_duration_seconds',
                { server: z.server, zone: z.zone, view, type: MONITORED_TYPES[t]! },
                DURATION_BUCKETS,
                z.durations,
                t * nb,
                z.durationSums[t]!,
              ),
            );
        }
      return out;
    },
  );
  for (const [name, help, field, sums] of [
    [
      'coredns_dns_request_size_bytes',
      'Size of the EDNS0 UDP buffer in bytes (64K for TCP) per zone and protocol.',
      'requestSizes',
      'requestSizeSums',
    ],
    ['coredns_dns_response_size_bytes', 'Size of the returned response in bytes.', 'responseSizes', 'responseSizeSums'],
  ] as const) {
    defineCollected(name, help, 'histogram', () => {
      const out: Sample[] = [];
      const ns = SIZE_BUCKETS.length + 1;
      for (const z of serverStats.all())
        for (let p = 0; p < 2; p++) {
          let n = 0;
          for (let b = 0; b < ns; b++) n += z[field][p * ns + b]!;
          if (n > 0)
            out.push(
              ...histogramSamples(
                name,
                { server: z.server, zone: z.zone, view, proto: p ? 'tcp' : 'udp' },
                SIZE_BUCKETS,
                z[field],
                p * ns,
                z[sums][p]!,
              ),
            );
        }
      return out;
    });
  }
  defineCollected('coredns_panics_total', 'A metrics that counts the number of panics.', 'counter', () => [
    { labels: {}, value: serverStats.panics },
  ]);
  defineCollected(
    'coredns_plugin_enabled',
    'A metric that indicates whether a plugin is enabled on per server and zone basis.',
    'gauge',
    () =>
      Array.from(enabledPlugins.entries(), (e) => ({
        labels: { server: e.server, zone: e.zone, view, name: e.plugin },
        value: 1,
      })),
    'first',
  );
}
