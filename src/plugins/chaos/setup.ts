import { hostname } from 'node:os';
import type { PluginSetup } from '../plugin.js';
import { noBlock, once } from '../../corefile/args.js';
import { VERSION } from '../../version.js';
import { ChaosHandler } from './handler.js';

/** Who wrote clusterdns, for `authors.bind` when the Corefile names none. */
const AUTHORS = ['clusterdns maintainers'];

export const setup: PluginSetup = (ds) => {
  const d = once(ds, 'chaos');
  noBlock(d);
  const version = d.args[0]?.text ?? `clusterdns-${VERSION}`;
  const authors = d.args.length > 1 ? d.args.slice(1).map((t) => t.text) : AUTHORS;
  let host = process.env['HOSTNAME'] ?? '';
  if (host === '') host = hostname() || 'localhost';
  return { name: 'chaos', handler: new ChaosHandler(version, authors, host), anyClass: true };
};
