// CoreDNS's cache metrics, with its names and labels. Caches count with plain numbers on
// the hot path; these metrics read them when /metrics is scraped. Counts of a cache that
// a reload replaced are kept by the server (CACHE_METRICS), so counters never go backwards.

import type { Counter } from 'prom-client';
import { labelKey, promClient, splitLabelKey, type Registry } from '../../metrics/registry.js';
import { metricsKey } from '../../server/services.js';

/** Plain counters of one cache instance. */
export class CacheCounters {
  requests = 0;
  hitsSuccess = 0;
  hitsDenial = 0;
  misses = 0;
  prefetches = 0;
  drops = 0;
  servedStale = 0;
  evictionsSuccess = 0;
  evictionsDenial = 0;

  add(o: CacheCounters): void {
    this.requests += o.requests;
    this.hitsSuccess += o.hitsSuccess;
    this.hitsDenial += o.hitsDenial;
    this.misses += o.misses;
    this.prefetches += o.prefetches;
    this.drops += o.drops;
    this.servedStale += o.servedStale;
    this.evictionsSuccess += o.evictionsSuccess;
    this.evictionsDenial += o.evictionsDenial;
  }
}

/** What a live cache exposes to the metrics. */
export interface CacheMetricSource {
  /** server, zones, view label values joined with labelKey. */
  readonly metricLabels: string;
  readonly counters: CacheCounters;
  entries(type: 'success' | 'denial'): number;
}

/** A server's caches as its metrics read them: the running ones, and the counts of those a reload replaced. */
export class CacheMetrics {
  private readonly live = new Set<CacheMetricSource>();
  private readonly retired = new Map<string, CacheCounters>();

  track(src: CacheMetricSource): void {
    this.live.add(src);
  }

  /** Stops reading a cache; its counts so far stay in the totals. */
  untrack(src: CacheMetricSource): void {
    if (!this.live.delete(src)) return;
    let r = this.retired.get(src.metricLabels);
    if (r === undefined) this.retired.set(src.metricLabels, (r = new CacheCounters()));
    r.add(src.counters);
  }

  totals(): Map<string, CacheCounters> {
    const out = new Map<string, CacheCounters>();
    const get = (k: string): CacheCounters => {
      let c = out.get(k);
      if (c === undefined) out.set(k, (c = new CacheCounters()));
      return c;
    };
    for (const [k, c] of this.retired) get(k).add(c);
    for (const s of this.live) get(s.metricLabels).add(s.counters);
    return out;
  }

  running(): IterableIterator<CacheMetricSource> {
    return this.live.values();
  }
}

/** The server's cache counters, published in its registry when it serves metrics. */
export const CACHE_METRICS = metricsKey('cache metrics', () => new CacheMetrics(), registerCacheMetrics);

type Labels3 = 'server' | 'zones' | 'view';
type Labels4 = 'server' | 'type' | 'zones' | 'view';

function labels3(key: string): Record<Labels3, string> {
  const [server = '', zones = '', view = ''] = splitLabelKey(key);
  return { server, zones, view };
}

// The prom-client metrics are made with the server's registry: only a configuration that
// serves metrics loads prom-client.
function registerCacheMetrics(registry: Registry, m: CacheMetrics): void {
  const { Counter, Gauge } = promClient();
  const counter3 = (name: string, help: string, pick: (c: CacheCounters) => number): Counter<Labels3> =>
    new Counter<Labels3>({
      name,
      help,
      labelNames: ['server', 'zones', 'view'],
      registers: [registry],
      collect() {
        this.reset();
        for (const [k, c] of m.totals()) this.inc(labels3(k), pick(c));
      },
    });

  const counter4 = (
    name: string,
    help: string,
    success: (c: CacheCounters) => number,
    denial: (c: CacheCounters) => number,
  ): Counter<Labels4> =>
    new Counter<Labels4>({
      name,
      help,
      labelNames: ['server', 'type', 'zones', 'view'],
      registers: [registry],
      collect() {
        this.reset();
        for (const [k, c] of m.totals()) {
          const l = labels3(k);
          this.inc({ server: l.server, type: 'success', zones: l.zones, view: l.view }, success(c));
          this.inc({ server: l.server, type: 'denial', zones: l.zones, view: l.view }, denial(c));
        }
      },
    });

  new Gauge<Labels4>({
    name: 'coredns_cache_entries',
    help: 'The number of elements in the cache.',
    labelNames: ['server', 'type', 'zones', 'view'],
    registers: [registry],
    collect() {
      this.reset();
      const sums = new Map<string, [number, number]>();
      for (const s of m.running()) {
        const v = sums.get(s.metricLabels) ?? [0, 0];
        v[0] += s.entries('success');
        v[1] += s.entries('denial');
        sums.set(s.metricLabels, v);
      }
      for (const [k, [succ, den]] of sums) {
        const l = labels3(k);
        this.set({ server: l.server, type: 'success', zones: l.zones, view: l.view }, succ);
        this.set({ server: l.server, type: 'denial', zones: l.zones, view: l.view }, den);
      }
    },
  });

  counter3('coredns_cache_requests_total', 'The count of cache requests.', (c) => c.requests);
  counter4(
    'coredns_cache_hits_total',
    'The count of cache hits.',
    (c) => c.hitsSuccess,
    (c) => c.hitsDenial,
  );
  counter3(
    'coredns_cache_misses_total',
    'The count of cache misses. Deprecated, derive misses from cache hits/requests counters.',
    (c) => c.misses,
  );
  counter3(
    'coredns_cache_prefetch_total',
    'The number of times the cache has prefetched a cached item.',
    (c) => c.prefetches,
  );
  counter3(
    'coredns_cache_drops_total',
    'The number responses that are not cached, because the reply is malformed.',
    (c) => c.drops,
  );
  counter3(
    'coredns_cache_served_stale_total',
    'The number of requests served from stale cache entries.',
    (c) => c.servedStale,
  );
  counter4(
    'coredns_cache_evictions_total',
    'The count of cache evictions.',
    (c) => c.evictionsSuccess,
    (c) => c.evictionsDenial,
  );
}

export function metricLabels(server: string, zones: readonly string[], view = ''): string {
  return labelKey(server, zones.join(','), view);
}
