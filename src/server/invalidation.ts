// Coherence between answer caches and changing data (core, so plugins stay removable): the kubernetes plugin calls these when a Service,
// EndpointSlice, Namespace or Pod changes, so no cache (in any server block of this
// process) keeps answering with what was true before. Process-wide on purpose: the
// watcher does not need to know which blocks have a cache.

import { canonicalZone } from '../dns/name.js';

/** What a cache instance offers to invalidation (CacheHandler implements it). */
export interface InvalidationTarget {
  /** Drops every entry whose qname is one of `names` (lowercase FQDNs); returns how many. */
  dropNames(names: readonly string[]): number;
  /** Drops every entry at or below `suffix` (a lowercase FQDN); returns how many. */
  dropSuffix(suffix: string): number;
}

const targets = new Set<InvalidationTarget>();

/** Called by a cache when it starts serving; the returned function detaches it. */
export function attachCache(t: InvalidationTarget): () => void {
  targets.add(t);
  return () => {
    targets.delete(t);
  };
}

/**
 * Drops the entries for exactly these names, every qtype, DO/CD variant and rcode.
 * Cost: O(entries for those names). Queries for these names already in flight to the
 * next plugin are answered but not stored. Returns the number of entries dropped.
 */
export function invalidateNames(names: Iterable<string>): number {
  const list: string[] = [];
  for (const n of names) list.push(canonicalZone(n));
  if (list.length === 0) return 0;
  let dropped = 0;
  for (const t of targets) dropped += t.dropNames(list);
  return dropped;
}

/**
 * Drops every entry at or below `zoneOrSuffix` ("ns.svc.cluster.local." drops the
 * namespace's services, their SRV, endpoint and pod names, and cached NXDOMAINs for
 * names that now exist). Cost: O(entries and names under it), not O(cache).
 */
export function invalidateSuffix(zoneOrSuffix: string): number {
  const suffix = canonicalZone(zoneOrSuffix);
  let dropped = 0;
  for (const t of targets) dropped += t.dropSuffix(suffix);
  return dropped;
}
