// Routing a query to its server block: the longest zone containing the name, then the block's view.

import type { Request, HandlerResult } from './request.js';
import type { DirectHandler } from './dispatcher.js';
import type { ServerStats, ZoneStats } from './stats.js';

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
  /** Every plugin of the chain is pure (FAST_SAFE_PLUGINS): the native table may keep its answers. */
  fast?: boolean;
  /** The chain's only plugin when it answers the dispatcher directly; used while `chain` is still this chain. */
  direct?: { chain: (req: Request) => HandlerResult; handler: DirectHandler };
}

/** Up to this many zones of one length are compared one by one; more are looked up by suffix. */
const FEW = 4;

/** Finds the block with the longest zone that contains a (lowercase) name. */
export class Router {
  private readonly zones = new Map<string, RoutedBlock>();
  /** The zones grouped by length, longest first: a lookup tries one suffix per length. */
  private groups: Array<{ len: number; zones: string[] }> = [];
  private root: RoutedBlock | undefined;
  /** Where queries that reach no chain are counted (CoreDNS's zone label "dropped"). */
  dropped: ZoneStats | null = null;
  /** Some block has a view: which block answers depends on the client, so nothing is kept natively. */
  views = false;

  /** `stats`: the server's counters (absent in unit tests that route by hand). */
  constructor(private readonly stats?: ServerStats) {}

  add(routed: RoutedBlock): void {
    this.dropped ??= this.stats?.zone(routed.serverLabel, 'dropped') ?? null;
    if (routed.filter !== undefined) this.views = true;
    // Each router links its own copies: the same block may sit behind several listeners.
    const block: RoutedBlock = { ...routed, nextView: undefined };
    if (block.zone === '.') {
      this.root = Router.chain(this.root, block);
      return;
    }
    this.zones.set(block.zone, Router.chain(this.zones.get(block.zone), block));
    const len = block.zone.length;
    let g = this.groups.find((x) => x.len === len);
    if (g === undefined) {
      g = { len, zones: [] };
      this.groups = [...this.groups, g].sort((a, b) => b.len - a.len);
    }
    if (!g.zones.includes(block.zone)) g.zones.push(block.zone);
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
    const groups = this.groups;
    const name = req.name;
    const n = name.length;
    for (let i = 0; i < groups.length; i++) {
      const g = groups[i]!;
      const len = g.len;
      if (len > n) continue;
      if (len < n && name.charCodeAt(n - len - 1) !== 0x2e) continue;
      let b: RoutedBlock | undefined;
      const zs = g.zones;
      if (zs.length <= FEW) {
        // Comparing in place: a slice of the name would be a new string to hash for the Map.
        for (let k = 0; k < zs.length; k++) {
          if (name.endsWith(zs[k]!)) {
            b = this.zones.get(zs[k]!);
            break;
          }
        }
      } else b = this.zones.get(len === n ? name : name.slice(n - len));
      while (b !== undefined && b.filter !== undefined && !b.filter(req)) b = b.nextView;
      if (b !== undefined) return b;
    }
    let r = this.root;
    while (r !== undefined && r.filter !== undefined && !r.filter(req)) r = r.nextView;
    return r;
  }
}
