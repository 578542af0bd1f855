// searchfan's metrics. Counts are plain numbers per server block label, kept by the server
// (SEARCHFAN_METRICS) across reloads, so counters never go backwards, and read only when
// /metrics is scraped.

import { registerCollected, type Sample } from '../../metrics/collected.js';
import { PlainCounter, type Registry } from '../../metrics/registry.js';
import { metricsKey } from '../../server/services.js';

export class SearchFanCounters {
  requests = 0;
  cacheHits = 0;
  /** Misses that joined a lookup already in flight. */
  coalesced = 0;
  /** Branches cancelled before they finished. */
  cancelled = 0;
  /** Answers that were SERVFAIL (every candidate failed or timed out). */
  failures = 0;
  /** Misses refused because max_concurrent lookups were in flight. */
  refused = 0;
  /** Queries sent upstream, by `to`. */
  readonly sentTo = new PlainCounter();

  readonly sent = (to: string): void => this.sentTo.inc(to);
}

/** A server's searchfan counters by `server` label, and its running instances' cache sizes. */
export class SearchFanMetrics {
  readonly byServer = new Map<string, SearchFanCounters>();
  /** Live instances' cache sizes, for the entries gauge. */
  readonly liveStores = new Map<object, { server: string; size(): number }>();

  countersFor(server: string): SearchFanCounters {
    let c = this.byServer.get(server);
    if (c === undefined) this.byServer.set(server, (c = new SearchFanCounters()));
    return c;
  }

  trackEntries(owner: object, server: string, size: () => number): void {
    this.liveStores.set(owner, { server, size });
  }

  untrackEntries(owner: object): void {
    this.liveStores.delete(owner);
  }
}

/** The server's searchfan counters, published in its registry when it serves metrics. */
export const SEARCHFAN_METRICS = metricsKey(
  'searchfan metrics',
  () => new SearchFanMetrics(),
  registerSearchFanMetrics,
);

function registerSearchFanMetrics(registry: Registry, m: SearchFanMetrics): void {
  const perServer =
    (pick: (c: SearchFanCounters) => number): (() => Sample[]) =>
    () =>
      [...m.byServer].map(([server, c]) => ({ labels: { server }, value: pick(c) }));
  registerCollected(
    registry,
    'coredns_searchfan_requests_total',
    'Queries the searchfan plugin answered.',
    'counter',
    perServer((c) => c.requests),
  );
  registerCollected(
    registry,
    'coredns_searchfan_cache_hits_total',
    'Queries answered from the searchfan cache.',
    'counter',
    perServer((c) => c.cacheHits),
  );
  registerCollected(
    registry,
    'coredns_searchfan_coalesced_total',
    'Cache misses that joined an identical lookup already in flight.',
    'counter',
    perServer((c) => c.coalesced),
  );
  registerCollected(
    registry,
    'coredns_searchfan_cancelled_total',
    'Upstream queries cancelled once the answer was known.',
    'counter',
    perServer((c) => c.cancelled),
  );
  registerCollected(
    registry,
    'coredns_searchfan_failures_total',
    'Queries answered SERVFAIL because no candidate name could be resolved.',
    'counter',
    perServer((c) => c.failures),
  );
  registerCollected(
    registry,
    'coredns_searchfan_max_concurrent_rejects_total',
    'Queries refused because max_concurrent lookups were in flight.',
    'counter',
    perServer((c) => c.refused),
  );
  registerCollected(
    registry,
    'coredns_searchfan_upstream_requests_total',
    'Queries sent to each upstream.',
    'counter',
    () => {
      const out: Sample[] = [];
      for (const [server, c] of m.byServer)
        for (const [to, n] of c.sentTo.entries()) out.push({ labels: { server, to }, value: n });
      return out;
    },
  );
  registerCollected(
    registry,
    'coredns_searchfan_cache_entries',
    'Answers held in the searchfan cache.',
    'gauge',
    () => {
      const sums = new Map<string, number>();
      for (const s of m.liveStores.values()) sums.set(s.server, (sums.get(s.server) ?? 0) + s.size());
      return [...sums].map(([server, value]) => ({ labels: { server }, value }));
    },
    'sum',
  );
}
