// The one compiled-in execution order, after CoreDNS's plugin.cfg (v1.14.7). The order of
// directives in a Corefile does not matter: queries flow through plugins in this order.
// A plugin is removed by deleting its folder and its line here.

import cluster, { type Worker } from 'node:cluster';
import type { PluginSetup } from './plugin.js';
import { RELAY_ACK, RELAY_SUBSCRIBE, RELAY_UNSUBSCRIBE } from '../cluster/events.js';
import type { ServerServices } from '../server/services.js';

type SetupModule = { setup: PluginSetup };

/**
 * [name, loader] in execution order. A plugin's code is loaded only when a Corefile uses it
 * (`loadPlugins`): a process pays for the plugins it runs, not for all of them (BENCHMARKS.md,
 * Memory).
 */
export const pluginOrder: ReadonlyArray<readonly [string, () => Promise<SetupModule>]> = [
  ['metadata', () => import('./metadata/setup.js')],
  ['reload', () => import('./reload/setup.js')],
  ['nsid', () => import('./nsid/setup.js')],
  ['bufsize', () => import('./bufsize/setup.js')],
  ['bind', () => import('./bind/setup.js')],
  ['debug', () => import('./debug/setup.js')],
  ['ready', () => import('./ready/setup.js')],
  ['health', () => import('./health/setup.js')],
  ['pprof', () => import('./pprof/setup.js')],
  ['prometheus', () => import('./prometheus/setup.js')],
  ['routes', () => import('./routes/setup.js')],
  ['errors', () => import('./errors/setup.js')],
  ['log', () => import('./log/setup.js')],
  ['local', () => import('./local/setup.js')],
  ['dns64', () => import('./dns64/setup.js')],
  ['any', () => import('./any/setup.js')],
  ['chaos', () => import('./chaos/setup.js')],
  ['loadbalance', () => import('./loadbalance/setup.js')],
  ['rewrite', () => import('./rewrite/setup.js')],
  ['autopath', () => import('./autopath/setup.js')],
  ['acl', () => import('./acl/setup.js')],
  ['cache', () => import('./cache/setup.js')],
  ['header', () => import('./header/setup.js')],
  ['minimal', () => import('./minimal/setup.js')],
  ['template', () => import('./template/setup.js')],
  ['transfer', () => import('./transfer/setup.js')],
  ['hosts', () => import('./hosts/setup.js')],
  ['k8s_external', () => import('./k8s_external/setup.js')],
  ['kubernetes', () => import('./kubernetes/setup.js')],
  ['file', () => import('./file/setup.js')],
  ['etcd', () => import('./etcd/setup.js')],
  ['loop', () => import('./loop/setup.js')],
  ['searchfan', () => import('./searchfan/setup.js')],
  ['forward', () => import('./forward/setup.js')],
  ['whoami', () => import('./whoami/setup.js')],
  ['view', () => import('./view/setup.js')],
];

const loaded = new Map<string, PluginSetup>();

/** Loads the code of the named plugins (unknown names are left to the Corefile checks). */
export async function loadPlugins(names: Iterable<string>): Promise<void> {
  const wanted = new Set(names);
  await Promise.all(
    pluginOrder
      .filter(([n]) => wanted.has(n) && !loaded.has(n))
      .map(async ([n, load]) => {
        loaded.set(n, (await load()).setup);
      }),
  );
}

/** The setup of a plugin `loadPlugins` has loaded. */
export function loadedSetup(name: string): PluginSetup {
  const s = loaded.get(name);
  if (s === undefined) throw new Error(`plugin ${name}: code not loaded (loadPlugins first)`);
  return s;
}

/**
 * Services the primary process runs for its workers when there are several: the single shared
 * cluster watch (src/cluster/relay.ts; the kubernetes and routes plugins subscribe over IPC). Its
 * code is loaded at the first subscription, so a primary whose workers do not use it never loads it.
 */
export const primaryServices: ReadonlyArray<(services: ServerServices) => void> = [
  (services) => {
    let relay: Promise<(w: Worker, m: unknown) => void> | null = null;
    cluster.on('message', (w: Worker, m: { type?: unknown } | null) => {
      if (m?.type !== RELAY_SUBSCRIBE && m?.type !== RELAY_UNSUBSCRIBE && m?.type !== RELAY_ACK) return;
      const handler = (relay ??= import('../cluster/relay.js').then((r) => r.serveKubeRelay(services)));
      // Messages that come while the code loads are handled in the order they came.
      void handler.then((handle) => handle(w, m));
    });
  },
];

/** CoreDNS plugins not built into clusterdns (a Corefile using one gets a clear error). */
export const coreDnsOnly = new Set([
  'root',
  'geoip',
  'cancel',
  'proxyproto',
  'quic',
  'grpc_server',
  'https',
  'https3',
  'timeouts',
  'multisocket',
  'trace',
  'shed',
  'dnstap',
  'tsig',
  'dnssec',
  'tls',
  'route53',
  'azure',
  'clouddns',
  'auto',
  'secondary',
  'grpc',
  'erratic',
  'on',
  'sign',
  'nomad',
]);

export const knownDirectives: ReadonlySet<string> = new Set(pluginOrder.map(([n]) => n));
