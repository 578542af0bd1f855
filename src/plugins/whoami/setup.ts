import type { PluginSetup } from '../plugin.js';
import { noArgs, noBlock, once } from '../../corefile/args.js';
import { WhoamiHandler } from './handler.js';

export const setup: PluginSetup = (ds) => {
  const d = once(ds, 'whoami');
  noArgs(d);
  noBlock(d);
  return { name: 'whoami', handler: new WhoamiHandler() };
};
