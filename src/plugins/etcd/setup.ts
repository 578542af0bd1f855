import { directiveError } from '../../corefile/errors.js';
import { canonicalZone } from '../../dns/name.js';
import type { PluginSetup } from '../plugin.js';
import { once, zoneArgs } from '../../corefile/args.js';
import { Fallthrough } from '../fallthrough.js';
import { EtcdHandler, type EtcdPluginOptions } from './handler.js';

export const setup: PluginSetup = (ds, ctx) => {
  const d = once(ds, 'etcd');
  const o: EtcdPluginOptions = {
    zones: zoneArgs(d.args, ctx.block.zones),
    path: '/skydns',
    client: { endpoints: ['http://localhost:2379'] },
    fallthrough: new Fallthrough(null),
  };
  for (const p of d.block ?? []) {
    switch (p.name) {
      case 'path':
        if (p.args.length !== 1) throw directiveError(p, 'etcd: path needs one argument');
        o.path = p.args[0]!.text.replace(/\/+$/, '') || '/';
        break;
      case 'endpoint':
        if (p.args.length === 0) throw directiveError(p, 'etcd: endpoint needs at least one URL');
        for (const t of p.args) {
          let u: URL;
          try {
            u = new URL(t.text);
          } catch {
            throw directiveError(t, `etcd: endpoint "${t.text}" is not a URL`);
          }
          if (u.protocol !== 'http:' && u.protocol !== 'https:')
            throw directiveError(t, `etcd: endpoint "${t.text}" must be http:// or https://`);
        }
        o.client.endpoints = p.args.map((t) => t.text);
        break;
      case 'credentials':
        if (p.args.length !== 2) throw directiveError(p, 'etcd: credentials needs a user name and a password');
        o.client.username = p.args[0]!.text;
        o.client.password = p.args[1]!.text;
        break;
      case 'tls':
        if (p.args.length !== 3) throw directiveError(p, 'etcd: tls needs CERT KEY CACERT');
        o.client.tls = { cert: p.args[0]!.text, key: p.args[1]!.text, ca: p.args[2]!.text };
        break;
      case 'fallthrough':
        o.fallthrough = new Fallthrough(p.args.length ? p.args.map((t) => canonicalZone(t.text)) : ['.']);
        break;
      case 'stubzones':
      case 'upstream':
        throw directiveError(
          p,
          `etcd: '${p.name}' was removed from CoreDNS's etcd plugin; use forward for other names`,
        );
      default:
        throw directiveError(p, `etcd: unknown property '${p.name}'`);
    }
  }
  const h = new EtcdHandler(o, (req) => ctx.resolve(req), ctx.logger, ctx.invalidation);
  return { name: 'etcd', handler: h, startup: () => h.start(), shutdown: () => h.stop(), ready: () => h.ready };
};
