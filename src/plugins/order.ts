// The one compiled-in execution order, after CoreDNS's plugin.cfg (v1.14.7). The order of
// directives in a Corefile does not matter: queries flow through plugins in this order.
// A plugin is removed by deleting its folder and its line here.

import type { PluginSetup } from './plugin.js';
import { setup as reload } from './reload/setup.js';
import { setup as bind } from './bind/setup.js';
import { setup as ready } from './ready/setup.js';
import { setup as health } from './health/setup.js';
import { setup as prometheus } from './prometheus/setup.js';
import { setup as routes } from './routes/setup.js';
import { setup as errors } from './errors/setup.js';
import { setup as log } from './log/setup.js';
import { setup as loadbalance } from './loadbalance/setup.js';
import { setup as autopath } from './autopath/setup.js';
import { setup as cache } from './cache/setup.js';
import { setup as hosts } from './hosts/setup.js';
import { setup as kubernetes } from './kubernetes/setup.js';
import { serveKubeRelay } from './kubernetes/relay.js';
import { setup as loop } from './loop/setup.js';
import { setup as searchfan } from './searchfan/setup.js';
import { setup as forward } from './forward/setup.js';
import { setup as whoami } from './whoami/setup.js';

/** [name, setup] in execution order. Names CoreDNS has that we do not are listed in `coreDnsOnly`. */
export const pluginOrder: ReadonlyArray<readonly [string, PluginSetup]> = [
  ['reload', reload],
  ['bind', bind],
  ['ready', ready],
  ['health', health],
  ['prometheus', prometheus],
  ['routes', routes],
  ['errors', errors],
  ['log', log],
  ['loadbalance', loadbalance],
  ['autopath', autopath],
  ['cache', cache],
  ['hosts', hosts],
  ['kubernetes', kubernetes],
  ['loop', loop],
  ['searchfan', searchfan],
  ['forward', forward],
  ['whoami', whoami],
];

/**
 * Services the primary process runs for its workers when there are several: the kubernetes
 * plugin's single shared watcher (its workers subscribe over IPC).
 */
export const primaryServices: ReadonlyArray<() => void> = [serveKubeRelay];

/** CoreDNS plugins not built into clusterdns (a Corefile using one gets a clear error). */
export const coreDnsOnly = new Set([
  'root', 'metadata', 'geoip', 'cancel', 'proxyproto', 'quic', 'grpc_server', 'https', 'https3',
  'timeouts', 'multisocket', 'nsid', 'bufsize', 'debug', 'trace', 'pprof', 'shed', 'dnstap',
  'local', 'dns64', 'any', 'chaos', 'tsig', 'rewrite', 'acl', 'header', 'dnssec', 'tls', 'minimal',
  'template', 'transfer', 'route53', 'azure', 'clouddns', 'k8s_external', 'file', 'auto',
  'secondary', 'etcd', 'grpc', 'erratic', 'on', 'sign', 'view', 'nomad',
]);

export const knownDirectives: ReadonlySet<string> = new Set(pluginOrder.map(([n]) => n));

export function pluginRank(name: string): number {
  return pluginOrder.findIndex(([n]) => n === name);
}
