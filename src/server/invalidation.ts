// Coherence between kept answers and changing data (core, so plugins stay removable). A plugin
// that answers from data it watches (kubernetes, file, etcd) tells its server's Invalidation what
// changed: names, a subtree, or the dependency keys its answers recorded. Every store of answers
// attached to it (the cache plugin's, the kubernetes plugin's prepared answers) drops what may be
// wrong. One per Runtime, handed to plugins in their SetupContext: two servers in one process, or
// a configuration and the one replacing it, never drop each other's answers.

import { canonicalZone } from '../dns/name.js';

/** What a store of answers offers to invalidation (CacheHandler implements it). */
export interface InvalidationTarget {
  /** Drops every entry whose qname is one of `names` (lowercase FQDNs); returns how many. */
  dropNames(names: readonly string[]): number;
  /** Drops every entry at or below `suffix` (a lowercase FQDN); returns how many. */
  dropSuffix(suffix: string): number;
  /** Drops every entry that recorded one of these dependency keys; returns how many. */
  dropDependencies(keys: readonly string[]): number;
}

/**
 * What the plugin that built a reply knows about it, handed to the plugins before it on the
 * Response: the keys of the data it was built from (for a store that keeps it) and, for wire
 * records, the facts a cache needs so that it does not walk the bytes again.
 */
export interface PreparedAnswer {
  /**
   * Keys of what the answer was built from (a Service, an IP, an alias's target), in the
   * builder's own words: `invalidateDependencies` with any of them drops every kept copy.
   */
  readonly dependencies: readonly string[];
  /** Where each record's TTL field sits, counted from the end of the question; null: not described, walk the reply. */
  readonly ttlOffsets: Uint16Array | null;
  /** Length of the records after the question (OPT excluded). */
  readonly recordsLength: number;
  readonly an: number;
  readonly ns: number;
  /** Additional records, OPT not counted. */
  readonly ar: number;
  /** Smallest TTL of any record; -1 when there is none. */
  readonly minTtl: number;
  /** An SOA in the authority section. */
  readonly hasSoa: boolean;
  /** NS records in the authority section (a referral). */
  readonly nsInAuthority: number;
  /** min(every record's TTL, SOA MINIMUM) when there is an SOA; -1 otherwise. */
  readonly negativeTtl: number;
  /** The answer section ends in a record of the asked type (a complete answer, not a partial CNAME chain). */
  readonly answerHasQtype: boolean;
}

/** An answer whose dependencies are known but whose bytes are not described (a Message reply). */
export function dependenciesOnly(dependencies: readonly string[]): PreparedAnswer {
  return {
    dependencies,
    ttlOffsets: null,
    recordsLength: 0,
    an: 0,
    ns: 0,
    ar: 0,
    minTtl: -1,
    hasSoa: false,
    nsInAuthority: 0,
    negativeTtl: -1,
    answerHasQtype: false,
  };
}

export class Invalidation {
  private readonly targets = new Set<InvalidationTarget>();

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
    const suffix = canonicalZone(zoneOrSuffix);
    let dropped = 0;
    for (const t of this.targets) dropped += t.dropSuffix(suffix);
    return dropped;
  }

  /**
   * Drops every entry built from any of these keys, whatever its name: an alias's answer goes
   * with its target. Cost: O(entries that recorded them). Queries in flight are answered but
   * not stored when their answer records one of them.
   */
  invalidateDependencies(keys: readonly string[]): number {
    if (keys.length === 0) return 0;
    let dropped = 0;
    for (const t of this.targets) dropped += t.dropDependencies(keys);
    return dropped;
  }

  /** Number of stores currently attached (for tests and diagnostics). */
  get attached(): number {
    return this.targets.size;
  }
}
