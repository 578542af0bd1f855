import type { PluginSetup } from '../plugin.js';
import { noArgs, noBlock, once } from '../../corefile/args.js';
import { LOCALHOST_REQUESTS, LocalHandler } from './handler.js';

export const setup: PluginSetup = (ds, ctx) => {
  const d = once(ds, 'local');
  noArgs(d);
  noBlock(d);
  return { name: 'local', handler: new LocalHandler(ctx.logger, ctx.services.get(LOCALHOST_REQUESTS)) };
};
