import { logger } from '../../log.js';
import { noArgs, noBlock, once } from '../../corefile/args.js';
import type { PluginSetup } from '../plugin.js';
import { fatalExit, LoopHandler } from './handler.js';

export const setup: PluginSetup = (ds, ctx) => {
  const d = once(ds, 'loop');
  noArgs(d);
  noBlock(d);
  // CoreDNS probes the first zone of the block's first key.
  const h = new LoopHandler(ctx.block.zones[0] ?? '.', fatalExit(logger('loop')), ctx.services.selfProbes);
  return {
    name: 'loop',
    handler: h,
    startup: () => {
      const port = ctx.block.port;
      if (port === 0) {
        ctx.logger.warn('no fixed port to probe; loop detection is off');
        h.disabled = true;
        return;
      }
      // CoreDNS dials its first listen host; with none it dials ":PORT", i.e. this host.
      const bound = ctx.block.bindAddresses[0];
      if (bound === undefined) h.start('127.0.0.1', port, '');
      else if (bound === '0.0.0.0' || bound === '::') h.start(bound === '::' ? '::1' : '127.0.0.1', port, bound);
      else h.start(bound, port, bound);
    },
    shutdown: () => h.stop(),
  };
};
