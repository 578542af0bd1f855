// Routing a query to its server block: the longest zone containing the name, then the block's view.

import type { Request, HandlerResult } from './request.js';
import { serverStats, type ZoneStats } from './stats.js';

/** A server block as the listener sees it. */
export interface RoutedBlock {
  zone: string;
  serverLabel: string;
  chain: (req: Request) => HandlerResult;
  /** Where this block's queries are counted (absent in unit tests that route by hand). */
  stats?: ZoneStats;
  /** True when a plugin of the block answers classes other than IN (`chaos`); else they are REFUSED. */
  anyClass?: boolean;
  /** The `view` plugin's test: the block takes a query only when it passes. */
  filter?: (req: Request) => boolean;
  /** The next block on the same zone and port, tried when this one's filter says no. */
  nextView?: RoutedBlock;
}

/** Finds the block with the longest zone that contains a (lowercase) name. */
export class Router {
  private readonly zones = new Map<string, RoutedBlock>();
  /** Distinct lengths of the zones, longest first: a lookup tries one suffix per length. */
  private lengths: number[] = [];
  private root: RoutedBlock | undefined;
  /** Where queries that reach no chain are counted (CoreDNS's zone label "dropped"). */
  dropped: ZoneStats | null = null;

  add(routed: RoutedBlock): void {
    this.dropped ??= serverStats.zone(routed.serverLabel, 'dropped');
    // Each router links its own copies: the same block may sit behind several listeners.
    const block: RoutedBlock = { ...routed, nextView: undefined };
    if (block.zone === '.') {
      this.root = Router.chain(this.root, block);
      return;
    }
    this.zones.set(block.zone, Router.chain(this.zones.get(block.zone), block));
    if (!this.lengths.includes(block.zone.length))
      this.lengths = [...this.lengths, block.zone.length].sort((a, b) => b - a);
  }

  /** Blocks with a view are tried in the order they came; one without a view goes last. */
  private static chain(first: RoutedBlock | undefined, block: RoutedBlock): RoutedBlock {
    if (first === undefined) return block;
    if (first.filter === undefined) {
      block.nextView = first;
      return block;
    }
    let at = first;
    while (at.nextView !== undefined && at.nextView.filter !== undefined) at = at.nextView;
    block.nextView = at.nextView;
    at.nextView = block;
    return first;
  }

  /** The block for a query: the longest zone containing the name whose view (if any) accepts it. */
  route(req: Request): RoutedBlock | undefined {
    const lengths = this.lengths;
    const name = req.name;
    const n = name.length;
    for (let i = 0; i < lengths.length; i++) {
      const len = lengths[i]!;
      if (len > n) continue;
      if (len < n && name.charCodeAt(n - len - 1) !== 0x2e) continue;
      let b = this.zones.get(len === n ? name : name.slice(n - len));
      while (b !== undefined && b.filter !== undefined && !b.filter(req)) b = b.nextView;
      if (b !== undefined) return b;
    }
    let r = this.root;
    while (r !== undefined && r.filter !== undefined && !r.filter(req)) r = r.nextView;
    return r;
  }
}
