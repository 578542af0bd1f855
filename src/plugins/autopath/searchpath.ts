// Where autopath's search path comes from: a resolv.conf file (the same list for every
// client), or `@kubernetes`: the asking pod's own list, found by its source address in the
// kubernetes plugin's pod index (`pods verified`), as CoreDNS's Kubernetes.AutoPath builds it:
// [<ns>.svc.<zone>, svc.<zone>, <zone>, <this server's resolv.conf search...>, ""].

import { unmappedIP } from '../../dns/ip.js';
import { matchZone } from '../fallthrough.js';
import type { ClusterView } from '../plugin.js';
import type { Request } from '../../server/request.js';

export interface SearchPathSource {
  /** The client's search path (FQDNs, "" last for the bare name), or null to leave the query alone. */
  pathFor(req: Request): readonly string[] | null;
}

/** The same path for everyone: `autopath /etc/resolv.conf`. */
export class StaticSearchPath implements SearchPathSource {
  constructor(private readonly path: readonly string[]) {}

  pathFor(): readonly string[] {
    return this.path;
  }
}

/** Bounds the per-namespace lists kept (they are rebuilt when dropped). */
const MAX_KEPT_PATHS = 10_000;

/** `@kubernetes`: each pod's own path, by the namespace of the pod at the query's source address. */
export class PodSearchPath implements SearchPathSource {
  private readonly byZoneNs = new Map<string, Map<string, readonly string[]>>();
  private kept = 0;

  constructor(
    private readonly view: ClusterView,
    /** This server's own resolv.conf search domains (FQDNs). */
    private readonly serverSearch: readonly string[],
  ) {}

  pathFor(req: Request): readonly string[] | null {
    const v = this.view;
    if (v.pods !== 'verified') return null;
    const zone = matchZone(v.zones, req.name);
    if (zone === undefined) return null;
    const ns = v.podNamespace(clientIp(req.client.remoteAddress));
    if (ns === null) return null;
    let byNs = this.byZoneNs.get(zone);
    if (byNs === undefined) this.byZoneNs.set(zone, (byNs = new Map<string, readonly string[]>()));
    let path = byNs.get(ns);
    if (path === undefined) {
      if (this.kept >= MAX_KEPT_PATHS) {
        this.byZoneNs.clear();
        this.kept = 0;
        this.byZoneNs.set(zone, (byNs = new Map<string, readonly string[]>()));
      }
      const z = zone === '.' ? '' : zone;
      path = [`${ns}.svc.${z}`, `svc.${z}`, zone, ...this.serverSearch, ''];
      byNs.set(ns, path);
      this.kept++;
    }
    return path;
  }
}

/** The address as the pod index keeps it: IPv4-mapped IPv6 (dual-stack sockets) unwrapped. */
export function clientIp(address: string): string {
  return unmappedIP(address);
}
