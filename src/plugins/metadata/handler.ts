// Gives each query in its zones a metadata store and lets every provider in the block fill it
// before the rest of the chain runs (CoreDNS's metadata plugin).

import { isSubdomain } from '../../dns/name.js';
import { Metadata } from '../../server/metadata.js';
import type { Handler, HandlerResult, Next, Request } from '../../server/request.js';
import type { PluginInstance } from '../plugin.js';

export class MetadataHandler implements Handler {
  readonly name = 'metadata';
  private providers: PluginInstance[] = [];

  constructor(private readonly zones: readonly string[]) {}

  /** The block's plugins that publish labels, found once the block is complete. */
  collect(instances: readonly PluginInstance[]): void {
    this.providers = instances.filter((i) => typeof i.metadata === 'function');
  }

  serveDNS(req: Request, next: Next): HandlerResult {
    // A re-entered query (autopath, ExternalName) keeps the store of the query it came from.
    if (req.metadata === null && this.inZones(req.name)) {
      const md = new Metadata();
      req.metadata = md;
      for (const p of this.providers) p.metadata!(req, md);
    }
    return next(req);
  }

  private inZones(name: string): boolean {
    for (const z of this.zones) if (isSubdomain(name, z)) return true;
    return false;
  }
}
