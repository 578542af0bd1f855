// searchfan's metrics. Counts are plain numbers per server (kept across reloads, so counters
// never go backwards) read only when /metrics is scraped.

import { defineCollected, type Sample } from '../../metrics/collected.js';
import { PlainCounter } from '../../metrics/registry.js';

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

const byServer = new Map<string, SearchFanCounters>();
/** Live instances' cache sizes, for the entries gauge. */
const liveStores = new Map<object, { server: string; size(): number }>();

export function countersFor(server: string): SearchFanCounters {
  let c = byServer.get(server);
  if (c === undefined) byServer.set(server, (c = new SearchFanCounters()));
  return c;
}

export function trackEntries(owner: object, server: string, size: () => number): void {
  liveStores.set(owner, { server, size });
}

export function untrackEntries(owner: object): void {
  liveStores.delete(owner);
}

function perServer(pick: (c: SearchFanCounters) => number): () => Sample[] {
  return () => [...byServer].map(([server, c]) => ({ labels: { server }, value: pick(c) }));
}

defineCollected(
  'coredns_searchfan_requests_total',
  'Queries the searchfan plugin answered.',
  'counter',
  perServer((c) => c.requests),
);
defineCollected(
  'coredns_searchfan_cache_hits_total',
  'Queries answered from the searchfan cache.',
  'counter',
  perServer((c) => c.cacheHits),
);
defineCollected(
  'coredns_searchfan_coalesced_total',
  'Cache misses that joined an identical lookup already in flight.',
  'counter',
  perServer((c) => c.coalesced),
);
defineCollected(
  'coredns_searchfan_cancelled_total',
  'Upstream queries cancelled once the answer was known.',
  'counter',
  perServer((c) => c.cancelled),
);
defineCollected(
  'coredns_searchfan_failures_total',
  'Queries answered SERVFAIL because no candidate name could be resolved.',
  'counter',
  perServer((c) => c.failures),
);
defineCollected(
  'coredns_searchfan_max_concurrent_rejects_total',
  'Queries refused because max_concurrent lookups were in flight.',
  'counter',
  perServer((c) => c.refused),
);
defineCollected('coredns_searchfan_upstream_requests_total', 'Queries sent to each upstream.', 'counter', () => {
  const out: Sample[] = [];
  for (const [server, c] of byServer)
    for (const [to, n] of c.sentTo.entries()) out.push({ labels: { server, to }, value: n });
  return out;
});
defineCollected(
  'coredns_searchfan_cache_entries',
  'Answers held in the searchfan cache.',
  'gauge',
  () => {
    const sums = new Map<string, number>();
    for (const s of liveStores.values()) sums.set(s.server, (sums.get(s.server) ?? 0) + s.size());
    return [...sums].map(([server, value]) => ({ labels: { server }, value }));
  },
  'sum',
);
