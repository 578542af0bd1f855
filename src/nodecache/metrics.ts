// node-cache's own metric, `coredns_nodecache_setup_errors_total{errortype}`, with all five
// labels present from the start (at 0) so alerts can use rate() at once. It is served on
// -metrics-listen-address (default :9353) and, being in the process registry, on :9253 too.

import { createServer, type Server } from 'node:http';
import { defineCollected } from '../metrics/collected.js';
import { metricsRegistry, registry, withoutInternalFamilies } from '../metrics/registry.js';
import { splitHostPort } from '../server/http.js';

export const SETUP_ERROR_TYPES = [
  'iptables',
  'iptables_lock',
  'interface_add',
  'interface_check',
  'configmap',
] as const;
export type SetupErrorType = (typeof SETUP_ERROR_TYPES)[number];

const setupErrors = new Map<SetupErrorType, number>(SETUP_ERROR_TYPES.map((t) => [t, 0]));

export function countSetupError(type: SetupErrorType): void {
  setupErrors.set(type, (setupErrors.get(type) ?? 0) + 1);
}

export function defineNodeCacheMetrics(): void {
  // node-cache always serves its metrics: load the registry now, as before.
  metricsRegistry();
  defineCollected(
    'coredns_nodecache_setup_errors_total',
    'The number of errors during periodic network setup for node-cache',
    'counter',
    () => SETUP_ERROR_TYPES.map((t) => ({ labels: { errortype: t }, value: setupErrors.get(t) ?? 0 })),
  );
}

/** `GET /metrics` on ADDRESS with the process registry. Resolves once listening. */
export async function serveSetupMetrics(address: string): Promise<Server> {
  const { host, port } = splitHostPort(address, 9353);
  const server = createServer((req, res) => {
    if ((req.url ?? '/').split('?')[0] !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain' });
      res.end('404 page not found\n');
      return;
    }
    registry.metrics().then(
      (text) => {
        res.writeHead(200, { 'content-type': registry.contentType });
        res.end(withoutInternalFamilies(text));
      },
      (e: Error) => {
        res.writeHead(500, { 'content-type': 'text/plain' });
        res.end(`error collecting metrics: ${e.message}\n`);
      },
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host: host || undefined, port }, () => {
      server.off('error', reject);
      resolve();
    });
  });
  server.unref();
  return server;
}
