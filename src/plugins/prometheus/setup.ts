import { directiveError } from '../../corefile/errors.js';
import type { PluginSetup } from '../plugin.js';
import { noBlock, once } from '../../corefile/args.js';
import { metricsHandler } from '../../metrics/cluster.js';
import { defineProcessMetrics, SERVER_METRICS } from './metrics.js';

/** `prometheus [ADDRESS]` (default localhost:9153): CoreDNS's metrics on /metrics. */
export const setup: PluginSetup = (ds, ctx) => {
  const d = once(ds, 'prometheus');
  noBlock(d);
  if (d.args.length > 1) throw directiveError(d.args[1]!, 'prometheus takes at most one address');
  const address = d.args[0]?.text ?? 'localhost:9153';
  const services = ctx.services;
  let release: (() => Promise<void>) | null = null;
  // What this configuration turned on in the server: undone when it is replaced, so a reload shows the new one.
  const holds: Array<() => void> = [];
  return {
    name: 'prometheus',
    async startup() {
      defineProcessMetrics();
      const own = services.get(SERVER_METRICS);
      holds.push(services.stats.count());
      holds.push(
        services.enabledPlugins.hold(
          ctx
            .blockInstances()
            .flatMap((inst) =>
              ctx.block.zones.map((zone) => ({ server: ctx.block.serverLabel, zone, plugin: inst.name })),
            ),
        ),
      );
      release = await ctx.http.route(address, '/metrics', metricsHandler([own]));
    },
    async shutdown() {
      for (const undo of holds.splice(0)) undo();
      await release?.();
    },
  };
};
