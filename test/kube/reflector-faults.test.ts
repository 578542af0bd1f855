// Reflector under failure: error statuses, outages, silent and cut streams, bad objects.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { KubeApiError, WatchIdleError } from '../../src/kube/http.js';
import { KubeApiServer } from '../helpers/kubeapi.js';
import { delay, service, serviceReflector, waitFor } from '../helpers/kubeapi-fixtures.js';

describe('Reflector faults', () => {
  let server: KubeApiServer;
  before(async () => {
    server = await KubeApiServer.create({ bookmarkIntervalMs: 3_600_000 });
    server.apply(service('web', '10.0.0.1'));
    server.apply(service('db', '10.0.0.2'));
  });
  after(() => server.close());

  it('retries 5xx with growing backoff and syncs once the server recovers', async () => {
    const before = server.listRequests;
    server.failNext(4, 503, undefined, '/api/v1/services');
    const started = Date.now();
    const t = await serviceReflector(server, { backoff: { initialMs: 40, maxMs: 1000 } });
    try {
      await t.reflector.waitForSync();
      const elapsed = Date.now() - started;
      assert.equal(server.listRequests - before, 5);
      assert.equal(t.rec.errors.length, 4);
      assert.ok(t.rec.errors.every((e) => e instanceof KubeApiError && e.status === 503));
      // Delays are ≥ half of 40, 80, 160, 320 ms.
      assert.ok(elapsed >= 300, `synced after ${elapsed} ms: backoff not applied`);
      const gaps = server.requestLog
        .filter((r) => r.verb === 'list')
        .slice(-5)
        .map((r, i, a) => (i ? r.time - a[i - 1]!.time : 0));
      assert.ok(gaps[4]! > gaps[1]!, `gaps should grow: ${gaps.join(',')}`);
      assert.equal(t.reflector.store.size, 2);
    } finally {
      await t.close();
    }
  });

  it('does not hot-loop while the API keeps failing, and says it is disconnected', async () => {
    const t = await serviceReflector(server, { backoff: { initialMs: 50, maxMs: 200 } });
    try {
      await t.reflector.waitForSync();
      assert.deepEqual(t.rec.connection, [true]);
      const before = server.requestCount('/api/v1/services');
      server.failNext(10_000, 500, undefined, '/api/v1/services');
      server.closeAllWatches();
      await delay(1000);
      const made = server.requestCount('/api/v1/services') - before;
      // 1 s of 25–200 ms backoff allows about 8 attempts; a hot loop would make thousands.
      assert.ok(made >= 3 && made <= 15, `${made} requests in 1 s`);
      assert.equal(t.reflector.connected, false);
      assert.deepEqual(t.rec.connection, [true, false]);
      assert.equal(t.reflector.store.size, 2, 'store kept while failing');
      server.clearFailures();
      await waitFor(() => t.reflector.connected, 'reconnect after failures stop', 1000);
    } finally {
      server.clearFailures();
      await t.close();
    }
  });

  it('honours Retry-After on 429', async () => {
    server.failNext(1, 429, 1, '/api/v1/services');
    const t = await serviceReflector(server, { backoff: { initialMs: 10, maxMs: 5000 } });
    try {
      await t.reflector.waitForSync();
      const lists = server.requestLog.filter((r) => r.verb === 'list').slice(-2);
      assert.deepEqual(
        lists.map((r) => r.status),
        [429, 200],
      );
      const gap = lists[1]!.time - lists[0]!.time;
      assert.ok(gap >= 950, `retried after ${gap} ms, Retry-After was 1 s`);
      const err = t.rec.errors[0];
      assert.ok(err instanceof KubeApiError && err.status === 429 && err.retryAfterMs === 1000);
    } finally {
      await t.close();
    }
  });

  it('keeps the store through an outage and catches up afterwards without relisting', async () => {
    const t = await serviceReflector(server, { backoff: { initialMs: 20, maxMs: 200 } });
    try {
      await t.reflector.waitForSync();
      const lists = server.listRequests;
      await server.stop();
      await waitFor(() => !t.reflector.connected, 'disconnect noticed');
      server.apply(service('during-outage', '10.0.9.1'));
      server.remove('Service', 'default', 'db');
      await delay(1500);
      assert.equal(t.reflector.store.size, 2, 'stale store kept during the outage');
      assert.ok(t.reflector.store.has('default/db'));
      assert.ok(t.rec.errors.length >= 3, 'connection errors reported');
      assert.ok(
        t.rec.errors.some((e) => 'code' in e && e.code === 'ECONNREFUSED'),
        t.rec.errors.map((e) => e.message).join('; '),
      );
      assert.ok(t.rec.errors.length <= 15, `${t.rec.errors.length} attempts in 1.5 s`);
      await server.start();
      await waitFor(
        () => t.reflector.store.has('default/during-outage') && !t.reflector.store.has('default/db'),
        'caught up',
        1000,
      );
      assert.equal(server.listRequests, lists, 'the watch resumed from its resourceVersion');
      assert.equal(t.reflector.connected, true);
    } finally {
      await t.close();
      server.remove('Service', 'default', 'during-outage');
      server.apply(service('db', '10.0.0.2'));
    }
  });

  it('detects a silent watch with the idle timeout and re-establishes it', async () => {
    const t = await serviceReflector(server, { idleTimeoutMs: 300 });
    try {
      await t.reflector.waitForSync();
      await waitFor(() => server.activeWatches === 1, 'watch open');
      const watches = server.watchRequests;
      server.stallWatches(true);
      server.apply(service('unheard', '10.0.0.7'));
      await delay(100);
      assert.equal(t.reflector.store.has('default/unheard'), false, 'a stalled watch delivers nothing');
      server.stallWatches(false);
      await waitFor(() => t.reflector.store.has('default/unheard'), 'event after re-watch', 1000);
      assert.ok(t.rec.errors.some((e) => e instanceof WatchIdleError));
      assert.equal(server.watchRequests, watches + 1);
      assert.equal(t.reflector.counters.relists, 0);
    } finally {
      await t.close();
      server.remove('Service', 'default', 'unheard');
    }
  });

  it('keeps a quiet watch open when bookmarks arrive within the idle timeout', async () => {
    const chatty = await KubeApiServer.create({ bookmarkIntervalMs: 100 });
    chatty.apply(service('web', '10.0.0.1'));
    const t = await serviceReflector(chatty, { idleTimeoutMs: 300 });
    try {
      await t.reflector.waitForSync();
      await delay(800);
      assert.equal(chatty.watchRequests, 1);
      assert.equal(t.rec.errors.length, 0);
      assert.ok(t.reflector.counters.events >= 5, `bookmarks seen: ${t.reflector.counters.events}`);
    } finally {
      await t.close();
      await chatty.close();
    }
  });

  it('survives a watch cut in the middle of a line and ignores the half line', async () => {
    const t = await serviceReflector(server);
    try {
      await t.reflector.waitForSync();
      await waitFor(() => server.activeWatches === 1, 'watch open');
      assert.equal(server.cutMidLine(), 1);
      server.apply(service('after-cut', '10.0.0.8'));
      await waitFor(() => t.reflector.store.has('default/after-cut'), 'event after reconnect', 1000);
      assert.equal(t.reflector.store.has('default/cut-mid-line'), false);
      assert.equal(t.rec.errors.length, 1);
      assert.match(t.rec.errors[0]!.message, /mid-stream|cut|aborted|reset/);
      assert.equal(t.reflector.counters.relists, 0);
    } finally {
      await t.close();
      server.remove('Service', 'default', 'after-cut');
    }
  });

  it('skips malformed objects with a warning naming them, in lists and in watch events', async () => {
    server.apply({ kind: 'Service', metadata: { name: 'broken', namespace: 'default' }, spec: { clusterIP: 42 } });
    const t = await serviceReflector(server);
    try {
      await t.reflector.waitForSync();
      assert.equal(t.reflector.store.has('default/broken'), false);
      assert.ok(
        t.rec.warnings.some((w) => w.includes('default/broken')),
        t.rec.warnings.join('\n'),
      );

      server.apply({ kind: 'Service', metadata: { name: 'broken2', namespace: 'kube-system' }, spec: null });
      server.apply(service('fine', '10.0.0.10'));
      await waitFor(() => t.reflector.store.has('default/fine'), 'good object after a bad one', 1000);
      assert.ok(
        t.rec.warnings.some((w) => w.includes('Service kube-system/broken2')),
        t.rec.warnings.join('\n'),
      );

      // An update that breaks a known object removes its stale entry.
      server.apply({ kind: 'Service', metadata: { name: 'fine', namespace: 'default' }, spec: { clusterIP: ['x'] } });
      await waitFor(() => !t.reflector.store.has('default/fine'), 'now-malformed object dropped', 1000);
      assert.deepEqual(t.rec.deletes.at(-1), ['default/fine', { clusterIP: '10.0.0.10' }]);
      assert.equal(t.reflector.counters.malformed, 3);
      assert.equal(t.rec.errors.length, 0);
    } finally {
      await t.close();
      for (const n of ['broken', 'fine']) server.remove('Service', 'default', n);
      server.remove('Service', 'kube-system', 'broken2');
    }
  });

  it('treats a garbage line as a broken stream and re-watches from the last good resourceVersion', async () => {
    const t = await serviceReflector(server);
    try {
      await t.reflector.waitForSync();
      await waitFor(() => server.activeWatches === 1, 'watch open');
      const rv = t.reflector.resourceVersion;
      server.writeRawToWatches('{"type":"MODIFIED","object":null}'); // valid JSON, not an event: skipped
      server.writeRawToWatches('{"type":"MODIFIED","object":');
      server.writeRawToWatches('<html>502 Bad Gateway</html>');
      server.apply(service('after-garbage', '10.0.0.11'));
      await waitFor(() => t.reflector.store.has('default/after-garbage'), 'event replayed after garbage', 1000);
      const rewatch = server.requestLog.filter((r) => r.verb === 'watch').at(-1);
      assert.equal(rewatch?.query.resourceVersion, rv);
      assert.ok(t.rec.errors.some((e) => e.name === 'WatchDecodeError'));
      assert.ok(t.rec.warnings.some((w) => w.includes('skipping malformed watch event')));
      assert.equal(t.reflector.counters.relists, 0);
    } finally {
      await t.close();
      server.remove('Service', 'default', 'after-garbage');
    }
  });

  it('reports a 401 and recovers once the token is accepted', async () => {
    server.token = 'secret';
    const t = await serviceReflector(server);
    try {
      await waitFor(() => t.rec.errors.length >= 2, 'unauthorized retries');
      assert.ok(t.rec.errors.every((e) => e instanceof KubeApiError && e.status === 401));
      assert.equal(t.reflector.hasSynced, false);
      server.token = undefined;
      await t.reflector.waitForSync();
    } finally {
      server.token = undefined;
      await t.close();
    }
  });
});
