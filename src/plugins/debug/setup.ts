// `debug`: plugins' [DEBUG] lines are printed while a configuration with it runs.

import { setDebug } from '../../log.js';
import type { PluginSetup } from '../plugin.js';
import { noArgs, noBlock, once } from '../../corefile/args.js';

/** Running instances: a reload starts the new configuration before it stops the old one. */
let active = 0;

export const setup: PluginSetup = (ds) => {
  const d = once(ds, 'debug');
  noArgs(d);
  noBlock(d);
  let started = false;
  return {
    name: 'debug',
    startup: () => {
      if (started) return;
      started = true;
      active++;
      setDebug(true);
    },
    shutdown: () => {
      if (!started) return;
      started = false;
      active--;
      if (active === 0) setDebug(false);
    },
  };
};
