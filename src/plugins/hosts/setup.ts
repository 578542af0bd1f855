import { statSync } from 'node:fs';
import { resolve, dirname, isAbsolute } from 'node:path';
import { leadProcess, type Logger } from '../../log.js';
import { directiveError } from '../../corefile/errors.js';
import { canonicalIP } from '../../dns/ip.js';
import { canonicalZone } from '../../dns/name.js';
import type { PluginSetup } from '../plugin.js';
import { durationArg, intArg, once } from '../../corefile/args.js';
import { HostsHandler, type HostsOptions } from './handler.js';
import type { ParsedLine } from './hostsfile.js';

export const setup: PluginSetup = (ds, ctx) => {
  const d = once(ds, 'hosts');
  const opts: HostsOptions = {
    file: '/etc/hosts',
    zones: ctx.block.zones,
    inline: [],
    ttlSeconds: 3600,
    reverse: true,
    reloadMs: 5000,
    fallthrough: null,
  };
  if (d.args[0]) {
    const f = d.args[0].text;
    opts.file = isAbsolute(f) ? f : resolve(dirname(ctx.corefile), f);
  }
  if (d.args.length > 1) opts.zones = d.args.slice(1).map((t) => canonicalZone(t.text));
  for (const p of d.block ?? []) {
    switch (p.name) {
      case 'ttl':
        opts.ttlSeconds = intArg(p.args[0], p, 'ttl', 0, 2147483647);
        if (p.args.length !== 1) throw directiveError(p, 'ttl needs exactly one argument');
        break;
      case 'no_reverse':
        opts.reverse = false;
        break;
      case 'reload':
        opts.reloadMs = durationArg(p.args[0], p, 'reload');
        break;
      case 'fallthrough':
        opts.fallthrough = p.args.length ? p.args.map((t) => canonicalZone(t.text)) : ['.'];
        break;
      default: {
        // Anything else is an inline hosts line: IP name...
        const ip = canonicalIP(p.name);
        if (!ip) throw directiveError(p, `hosts: unknown property '${p.name}' (not an option nor an IP address)`);
        if (p.args.length === 0) throw directiveError(p, `hosts: no name after ${p.name}`);
        const line: ParsedLine = { ip, names: p.args.map((t) => canonicalZone(t.text)) };
        opts.inline.push(line);
      }
    }
  }
  const h = new HostsHandler(opts, ctx.logger);
  return {
    name: 'hosts',
    handler: h,
    startup: () => {
      if (leadProcess()) warnIfUnusable(opts.file, ctx.logger);
      return h.start();
    },
    shutdown: () => h.stop(),
  };
};

/** CoreDNS's warnings for a hosts file that is not there (yet) or is a directory; serving goes on. */
function warnIfUnusable(file: string, log: Logger): void {
  try {
    if (statSync(file).isDirectory()) log.warn(`Hosts file "${file}" is a directory`);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') log.warn(`File does not exist: ${file}`);
  }
}
