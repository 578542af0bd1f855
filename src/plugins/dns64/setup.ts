import { directiveError } from '../../corefile/errors.js';
import type { Token } from '../../corefile/types.js';
import { parseIPv6 } from '../../dns/ip.js';
import type { PluginSetup } from '../plugin.js';
import { once } from '../../corefile/args.js';
import { DNS64_TRANSLATED, Dns64Handler, type Dns64Options } from './handler.js';

const LENGTHS = new Set([32, 40, 48, 56, 64, 96]);

function prefixArg(t: Token): Pick<Dns64Options, 'prefix' | 'prefixLen'> {
  const [addr, len] = t.text.split('/');
  const bytes = addr === undefined ? null : parseIPv6(addr);
  const n = Number(len);
  if (bytes === null || len === undefined || !/^\d+$/.test(len))
    throw directiveError(t, `dns64: invalid prefix "${t.text}"`);
  if (!LENGTHS.has(n)) throw directiveError(t, `dns64: invalid prefix length ${n} (must be 32, 40, 48, 56, 64 or 96)`);
  if (n < 96 ? bytes[8] !== 0 : false)
    throw directiveError(t, `dns64: prefix "${t.text}" has a non-zero octet 8 (RFC 6052 section 2.2)`);
  return { prefix: bytes, prefixLen: n as Dns64Options['prefixLen'] };
}

export const setup: PluginSetup = (ds, ctx) => {
  const d = once(ds, 'dns64');
  const o: Dns64Options = { prefix: parseIPv6('64:ff9b::')!, prefixLen: 96, translateAll: false, allowIpv4: false };
  if (d.args.length > 1) throw directiveError(d.args[1]!, `dns64: unexpected argument "${d.args[1]!.text}"`);
  if (d.args[0]) Object.assign(o, prefixArg(d.args[0]));
  for (const p of d.block ?? []) {
    switch (p.name) {
      case 'prefix':
        if (p.args.length !== 1) throw directiveError(p, 'dns64: prefix needs exactly one argument');
        Object.assign(o, prefixArg(p.args[0]!));
        break;
      case 'translate_all':
        o.translateAll = true;
        break;
      case 'allow_ipv4':
        o.allowIpv4 = true;
        break;
      default:
        throw directiveError(p, `dns64: unknown property '${p.name}'`);
    }
  }
  return { name: 'dns64', handler: new Dns64Handler(o, (req) => ctx.resolve(req), ctx.services.get(DNS64_TRANSLATED)) };
};
