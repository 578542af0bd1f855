import type { PluginSetup } from '../plugin.js';
import { intArg, noBlock, once } from '../../corefile/args.js';
import { directiveError } from '../../corefile/errors.js';
import { BufsizeHandler, DEFAULT_BUFSIZE } from './handler.js';

export const setup: PluginSetup = (ds) => {
  const d = once(ds, 'bufsize');
  noBlock(d);
  if (d.args.length > 1) throw directiveError(d.args[1]!, 'bufsize: takes one argument, the buffer size');
  const size = d.args.length === 0 ? DEFAULT_BUFSIZE : intArg(d.args[0], d, 'bufsize', 512, 4096);
  return { name: 'bufsize', handler: new BufsizeHandler(size) };
};
