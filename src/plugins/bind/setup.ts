import { networkInterfaces } from 'node:os';
import { directiveError } from '../../corefile/errors.js';
import { canonicalIP } from '../../dns/ip.js';
import type { PluginSetup } from '../plugin.js';
import { unknownProperty } from '../../corefile/args.js';

/** `bind ADDRESS|INTERFACE... { except ADDRESS... }`: listen only on these addresses. */
export const setup: PluginSetup = (ds, ctx) => {
  const addrs: string[] = [];
  const except = new Set<string>();
  const ifaces = networkInterfaces();
  for (const d of ds) {
    if (d.args.length === 0) throw directiveError(d, 'bind needs at least one address or interface');
    for (const a of d.args) {
      const ip = canonicalIP(a.text);
      if (ip) {
        addrs.push(ip);
        continue;
      }
      const iface = ifaces[a.text];
      if (!iface) throw directiveError(a, `bind: "${a.text}" is neither an IP address nor a network interface`);
      for (const i of iface) addrs.push(i.address);
    }
    for (const p of d.block ?? []) {
      if (p.name !== 'except') unknownProperty(p, 'bind');
      for (const a of p.args) {
        const ip = canonicalIP(a.text);
        if (!ip) throw directiveError(a, `bind: except "${a.text}" is not an IP address`);
        except.add(ip);
      }
    }
  }
  const final = [...new Set(addrs)].filter((a) => !except.has(a));
  if (final.length === 0) throw directiveError(ds[0]!, 'bind: no address left to listen on');
  ctx.block.bindAddresses = final;
  return { name: 'bind' };
};
