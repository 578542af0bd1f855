// The page's numbers in one process, end to end without sockets: the server's counters and
// the sketches go through the clusterdns_status_* metrics and the metrics text into the
// report, with plugin state read from capabilities the running instances offer.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { PluginInstance } from '../../src/plugins/plugin.js';
import type { ApiSyncState, UpstreamHealth } from '../../src/status/sources.js';
import { STATUS_RECORDER } from '../../src/status/recorder.js';
import { statusReporter } from '../../src/status/serve.js';
import { ServerServices } from '../../src/server/services.js';

test('counters, names and plugin state reach /status.json; counting stops with the last page', async () => {
  let down = false;
  const forwardHandler = {
    name: 'forward',
    serveDNS: () => null,
    upstreamHealth: (): UpstreamHealth[] => [{ to: '192.0.2.53:53', state: down ? 'down' : 'up' }],
  };
  const sync: ApiSyncState = {
    zones: ['cluster.local.'],
    source: 'manifests x.yaml',
    synced: true,
    connected: true,
    services: 3,
    endpointSlices: 2,
    namespaces: 1,
    pods: 0,
    lastChange: 1_700_000_000,
  };
  const instances = [
    { name: 'forward', handler: forwardHandler },
    { name: 'kubernetes', apiSync: () => sync },
    { name: 'whoami' },
  ] as unknown as PluginInstance[];
  const services = new ServerServices();
  const { stats: serverStats, queryNames } = services;
  const statusRecorder = services.get(STATUS_RECORDER);
  const statusReport = statusReporter(services);
  assert.equal(queryNames.enabled, false);
  const release = statusRecorder.acquire(() => instances);
  assert.equal(serverStats.enabled, true);
  assert.equal(queryNames.enabled, true);
  await statusRecorder.tick();

  const zone = serverStats.zone('dns://:53', '.');
  for (let i = 0; i < 30; i++) {
    zone.record(0, 1, 1, false, 40, 60, 0, 'hosts', 0.0001);
    queryNames.record('a.example.', 0);
  }
  for (let i = 0; i < 10; i++) {
    zone.record(0, 1, 1, false, 40, 60, 3, 'kubernetes', 0.003);
    queryNames.record('nx.cluster.local.', 3);
  }
  await new Promise((r) => setTimeout(r, 50));
  await statusRecorder.tick();
  down = true;

  const r = await statusReport();
  assert.equal(r.workers, 1);
  assert.equal(r.queries.total, 40);
  assert.equal(r.queries.recent, 40);
  assert.ok(r.queries.perSecond > 100, `rate over 50 ms of 40 queries: ${r.queries.perSecond}`);
  assert.deepEqual(r.rcodes.total, { NOERROR: 30, NXDOMAIN: 10 });
  assert.equal(r.latency.total.count, 40);
  assert.ok(r.latency.total.p50! <= 0.00025 && r.latency.total.p99! > 0.002 && r.latency.total.p99! <= 0.004);
  assert.equal(r.topNames[0]!.name, 'a.example.');
  assert.deepEqual(
    r.topNxdomain.map((n) => n.name),
    ['nx.cluster.local.'],
  );
  assert.equal(r.upstreams[0]!.to, '192.0.2.53:53');
  assert.equal(r.upstreams[0]!.state, 'down', 'plugin state is read when the report is made');
  assert.equal(r.kubernetes[0]!.state, 'up');
  assert.equal(r.kubernetes[0]!.services, 3);
  assert.equal(r.kubernetes[0]!.source, 'manifests x.yaml');

  release();
  assert.equal(queryNames.enabled, false);
  assert.equal(queryNames.all.size, 0);
  const text = await services.metrics().metrics();
  assert.doesNotMatch(text, /^clusterdns_status_workers \d/m, 'no samples once no page is configured');
});
