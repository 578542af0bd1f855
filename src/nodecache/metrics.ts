// node-cache's own metric, `coredns_nodecache_setup_errors_total{errortype}`, with all five
// labels present from the start (at 0) so alerts can use rate() at once. It is served on
// -metrics-listen-address (default :9353) and, being in the process registry, on :9253 too.

import { registerCollected } from '../metrics/collected.js';
import { serveMetrics } from '../metrics/cluster.js';
import { metricsRegistry, PlainCounter } from '../metrics/registry.js';
import { HttpServices } from '../server/http.js';

export const SETUP_ERROR_TYPES = [
  'iptables',
  'iptables_lock',
  'interface_add',
  'interface_check',
  'configmap',
] as const;
export type SetupErrorType = (typeof SETUP_ERROR_TYPES)[number];

const setupErrors = new PlainCounter();

export function countSetupError(type: SetupErrorType): void {
  setupErrors.inc(type);
}

export function defineNodeCacheMetrics(): void {
  // node-cache always serves its metrics: load the registry now, as before.
  registerCollected(
    metricsRegistry(),
    'coredns_nodecache_setup_errors_total',
    'The number of errors during periodic network setup for node-cache',
    'counter',
    () => SETUP_ERROR_TYPES.map((t) => ({ labels: { errortype: t }, value: setupErrors.get(t) })),
  );
}

/** `GET /metrics` on ADDRESS (HOST:PORT), the prometheus plugin's handler; resolves, once listening, to its closer. */
export function serveSetupMetrics(address: string): Promise<() => Promise<void>> {
  return new HttpServices().route(address, '/metrics', serveMetrics);
}
