// Serves /status (the page) and /status.json (the report) on an HTTP listener. The report
// is built from the metrics text of the server: with several workers, metricsText() asks the
// primary, which sums every worker's registries as it does for /metrics.

import type { IncomingMessage, ServerResponse } from 'node:http';
import type { HttpServices } from '../server/http.js';
import type { PluginInstance } from '../plugins/plugin.js';
import type { ServerServices } from '../server/services.js';
import { metricsText } from '../metrics/cluster.js';
import { parseExposition } from './exposition.js';
import { STATUS_PAGE_CSP, STATUS_PAGE_HTML } from './page.js';
import { STATUS_RECORDER } from './recorder.js';
import { buildReport, wantedFamily, type StatusReport } from './report.js';

export const STATUS_PATH = '/status';
export const STATUS_JSON_PATH = '/status.json';

/** The report of `services`'s server: one for every request that arrives while it is being made. */
export function statusReporter(services: ServerServices): () => Promise<StatusReport> {
  let building: Promise<StatusReport> | null = null;
  return () =>
    (building ??= metricsText([services.metrics()])
      .then((text) => buildReport(parseExposition(text, wantedFamily)))
      .finally(() => {
        building = null;
      }));
}

const COMMON_HEADERS = { 'cache-control': 'no-store', 'x-content-type-options': 'nosniff' };

function servePage(_req: IncomingMessage, res: ServerResponse): void {
  res.writeHead(200, {
    ...COMMON_HEADERS,
    'content-type': 'text/html; charset=utf-8',
    'content-security-policy': STATUS_PAGE_CSP,
  });
  res.end(STATUS_PAGE_HTML);
}

function serveJson(statusReport: () => Promise<StatusReport>, res: ServerResponse): void {
  statusReport().then(
    (report) => {
      res.writeHead(200, { ...COMMON_HEADERS, 'content-type': 'application/json; charset=utf-8' });
      res.end(JSON.stringify(report));
    },
    (e: Error) => {
      res.writeHead(503, { ...COMMON_HEADERS, 'content-type': 'application/json; charset=utf-8' });
      res.end(JSON.stringify({ error: `status unavailable: ${e.message}` }));
    },
  );
}

/**
 * Adds the status routes on `address` and starts counting for them; the returned function
 * removes both and stops counting when no other configuration shows a page.
 * `instances` lists the running configuration's plugins (for upstream and API state); `services`
 * are its server's.
 */
export async function serveStatus(
  http: HttpServices,
  address: string,
  instances: () => readonly PluginInstance[],
  services: ServerServices,
): Promise<() => Promise<void>> {
  const stopCounting = services.get(STATUS_RECORDER).acquire(instances);
  const report = statusReporter(services);
  const releases: Array<() => Promise<void>> = [];
  try {
    // Handlers of their own: a route is removed only by the configuration that added it, so
    // the old configuration's release after a reload leaves the new one's routes in place.
    releases.push(await http.route(address, STATUS_PATH, (req, res) => servePage(req, res)));
    releases.push(await http.route(address, STATUS_JSON_PATH, (_req, res) => serveJson(report, res)));
  } catch (e) {
    stopCounting();
    for (const r of releases) await r();
    throw e;
  }
  return async () => {
    stopCounting();
    for (const r of releases) await r();
  };
}
