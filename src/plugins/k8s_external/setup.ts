import { directiveError } from '../../corefile/errors.js';
import { canonicalZone } from '../../dns/name.js';
import type { PluginSetup } from '../plugin.js';
import { intArg, once, zoneArgs } from '../../corefile/args.js';
import { Fallthrough } from '../fallthrough.js';
import { ExternalHandler, type ExternalOptions } from './handler.js';

export const setup: PluginSetup = (ds, ctx) => {
  const d = once(ds, 'k8s_external');
  const o: ExternalOptions = {
    zones: zoneArgs(d.args, ctx.block.zones),
    apex: 'dns',
    ttl: 5,
    headless: false,
    fallthrough: new Fallthrough(null),
  };
  for (const p of d.block ?? []) {
    switch (p.name) {
      case 'apex':
        if (p.args.length !== 1) throw directiveError(p, 'k8s_external: apex needs one name');
        o.apex = canonicalZone(p.args[0]!.text).slice(0, -1);
        break;
      case 'ttl':
        if (p.args.length !== 1) throw directiveError(p, 'k8s_external: ttl needs one number');
        o.ttl = intArg(p.args[0], p, 'k8s_external: ttl', 0, 3600);
        break;
      case 'headless':
        o.headless = true;
        break;
      case 'fallthrough':
        o.fallthrough = new Fallthrough(p.args.length ? p.args.map((t) => canonicalZone(t.text)) : ['.']);
        break;
      default:
        throw directiveError(p, `k8s_external: unknown property '${p.name}'`);
    }
  }
  const view = () => ctx.blockInstances().find((i) => i.clusterView !== undefined)?.clusterView;
  const h = new ExternalHandler(o, view, (req) => ctx.resolve(req), ctx.invalidation);
  return {
    name: 'k8s_external',
    handler: h,
    startup() {
      if (view() === undefined)
        throw directiveError(d, 'k8s_external: needs the kubernetes plugin in the same server block');
      h.start();
    },
    shutdown: () => h.shutdown(),
  };
};
