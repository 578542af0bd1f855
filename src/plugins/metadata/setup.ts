import { canonicalZone } from '../../dns/name.js';
import type { PluginSetup } from '../plugin.js';
import { noBlock, once } from '../../corefile/args.js';
import { MetadataHandler } from './handler.js';

export const setup: PluginSetup = (ds, ctx) => {
  const d = once(ds, 'metadata');
  noBlock(d);
  const zones = d.args.length ? d.args.map((t) => canonicalZone(t.text)) : ctx.block.zones;
  const h = new MetadataHandler(zones);
  return { name: 'metadata', handler: h, startup: () => h.collect(ctx.blockInstances()) };
};
