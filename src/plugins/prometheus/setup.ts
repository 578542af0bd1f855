import { directiveError } from '../../corefile/errors.js';
import type { PluginSetup } from '../plugin.js';
import { noBlock, once } from '../../corefile/args.js';
import { serverStats } from '../../server/stats.js';
import { serveMetrics } from '../../metrics/cluster.js';
import { defineCoreMetrics, enabledPlugins } from './metrics.js';

/** `prometheus [ADDRESS]` (default localhost:9153): CoreDNS's metrics on /metrics. */
export const setup: PluginSetup = (ds, ctx) => {
  const d = once(ds, 'prometheus');
  noBlock(d);
  if (d.args.length > 1) throw directiveError(d.args[1]!, 'prometheus takes at most one address');
  const address = d.args[0]?.text ?? 'localhost:9153';
  let release: (() => Promise<void>) | null = null;
  return {
    name: 'prometheus',
    async startup() {
      defineCoreMetrics();
      serverStats.enabled = true;
      for (const inst of ctx.blockInstances())
        for (const z of ctx.block.zones) enabledPlugins.add(`${ctx.block.serverLabel} ${z} ${inst.name}`);
      release = await ctx.http.route(address, '/metrics', serveMetrics);
    },
    async shutdown() {
      await release?.();
    },
  };
};
