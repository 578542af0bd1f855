// Coherence between kept answers and changing data (core, so plugins stay removable). A plugin
// that answers from data it watches (kubernetes, file, etcd) tells its configuration's
// Invalidation what changed: names, a subtree, or the dependency keys its answers recorded. The
// one answer store (`answers`) drops every prepared answer built from a changed key, from every
// holder at once; caches attached as targets drop the entries under changed names. One per
// Runtime, handed to plugins in their SetupContext: two servers in one process, or a
// configuration and the one replacing it, never drop each other's answers.

import { canonicalZone } from '../dns/name.js';
import { AnswerStore } from './answer-store.js';
import { fastFlush } from './fast-answers.js';

/** What a cache offers to invalidation by name (CacheHandler implements it). */
export interface InvalidationTarget {
  /** Drops every entry whose qname is one of `names` (lowercase FQDNs); returns how many. */
  dropNames(names: readonly string[]): number;
  /** Drops every entry at or below `suffix` (a lowercase FQDN); returns how many. */
  dropSuffix(suffix: string): number;
}

export class Invalidation {
  private readonly targets = new Set<InvalidationTarget>();
  /** The configuration's prepared answers, by what they were built from. */
  readonly answers = new AnswerStore();

  /** Called by a store when it starts serving; the returned function detaches it. */
  attach(t: InvalidationTarget): () => void {
    this.targets.add(t);
    return () => {
      this.targets.delete(t);
    };
  }

  /**
   * Drops the entries for exactly these names, every qtype, DO/CD variant and rcode.
   * Cost: O(entries for those names). Queries for these names already in flight to the
   * next plugin are answered but not stored. Returns the number of entries dropped.
   */
  invalidateNames(names: Iterable<string>): number {
    fastFlush();
    const list: string[] = [];
    for (const n of names) list.push(canonicalZone(n));
    if (list.length === 0) return 0;
    let dropped = 0;
    for (const t of this.targets) dropped += t.dropNames(list);
    return dropped;
  }

  /**
   * Drops every entry at or below `zoneOrSuffix` ("ns.svc.cluster.local." drops the
   * namespace's services, their SRV, endpoint and pod names, and cached NXDOMAINs for
   * names that now exist). Cost: O(entries and names under it), not O(cache).
   */
  invalidateSuffix(zoneOrSuffix: string): number {
    fastFlush();
    const suffix = canonicalZone(zoneOrSuffix);
    let dropped = 0;
    for (const t of this.targets) dropped += t.dropSuffix(suffix);
    return dropped;
  }

  /**
   * Drops every answer built from any of these keys, whatever its name, from every holder: an
   * alias's answer goes with its target. Cost: O(answers that recorded them). Queries in flight
   * are answered but not stored when their answer records one of them (AnswerStore.changedSince).
   * Returns the number of answers dropped.
   */
  invalidateDependencies(keys: readonly string[]): number {
    if (keys.length === 0) return 0;
    fastFlush();
    return this.answers.dropDependencies(keys);
  }

  /** Number of stores currently attached (for tests and diagnostics). */
  get attached(): number {
    return this.targets.size;
  }
}
