import { directiveError } from '../../corefile/errors.js';
import type { Token } from '../../corefile/types.js';
import { canonicalIP } from '../../dns/ip.js';
import type { PluginSetup } from '../plugin.js';
import { zoneArgs } from '../../corefile/args.js';
import { TransferHandler, type TransferRule, type TransferTarget } from './handler.js';

function target(t: Token): TransferTarget {
  if (t.text === '*') return { any: true, host: '', port: 0 };
  let host = t.text;
  let port = 53;
  const v6 = /^\[(.+)\](?::(\d+))?$/.exec(host);
  if (v6) {
    host = v6[1]!;
    if (v6[2]) port = Number(v6[2]);
  } else if (host.split(':').length === 2) {
    const [h, p] = host.split(':');
    host = h!;
    port = Number(p);
  }
  const ip = canonicalIP(host);
  if (ip === null || !Number.isInteger(port) || port < 1 || port > 65535)
    throw directiveError(t, `transfer: to: "${t.text}" is not an IP address with an optional port, nor *`);
  return { any: false, host: ip, port };
}

export const setup: PluginSetup = (ds, ctx) => {
  const rules: TransferRule[] = ds.map((d) => {
    const zones = zoneArgs(d.args, ctx.block.zones);
    const to: TransferTarget[] = [];
    for (const p of d.block ?? []) {
      if (p.name !== 'to') throw directiveError(p, `transfer: unknown property '${p.name}'`);
      if (p.args.length === 0) throw directiveError(p, 'transfer: to needs at least one address');
      to.push(...p.args.map(target));
    }
    if (to.length === 0) throw directiveError(d, 'transfer: needs a block with at least one "to"');
    return { zones, to };
  });
  const h = new TransferHandler(rules, () => ctx.blockInstances(), ctx.logger);
  return { name: 'transfer', handler: h, startup: () => h.start(), shutdown: () => h.stop() };
};
