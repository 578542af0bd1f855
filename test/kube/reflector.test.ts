// List/watch behaviour of Reflector against the test API server over real HTTP.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { KubeApiServer } from '../helpers/kubeapi.js';
import { delay, nthIp, service, serviceReflector, waitFor } from '../helpers/kubeapi-fixtures.js';

describe('Reflector list', () => {
  let server: KubeApiServer;
  before(async () => {
    // No watch cache (kube-apiserver --watch-cache=false): lists are read from storage and paged.
    server = await KubeApiServer.create({ watchCache: false });
  });
  after(() => server.close());

  // API Concepts › Retrieving large results sets in chunks.
  it('pages through 1,201 services with limit 500 and continue tokens', async () => {
    for (let i = 0; i < 1201; i++) server.apply(service(`svc-${i}`, nthIp(i), `ns-${i % 7}`));
    const t = await serviceReflector(server);
    try {
      await t.reflector.waitForSync();
      assert.equal(t.reflector.store.size, 1201);
      assert.equal(t.rec.adds.length, 1201);
      assert.equal(t.rec.synced, 1);
      assert.equal(t.reflector.store.get('ns-3/svc-10')?.clusterIP, nthIp(10));
      const lists = server.requestLog.filter((r) => r.verb === 'list');
      assert.equal(lists.length, 3);
      assert.deepEqual(
        lists.map((r) => r.query.limit),
        ['500', '500', '500'],
      );
      assert.equal(lists[0]?.query.continue, undefined);
      // The first page asks for any version (API Concepts › Resource versions): the cache would serve it.
      assert.equal(lists[0]?.query.resourceVersion, '0');
      assert.equal(lists[0]?.query.resourceVersionMatch, 'NotOlderThan');
      assert.equal(
        lists[1]?.query.resourceVersion,
        undefined,
        'a continue page names no version (the server answers 400)',
      );
      assert.ok(lists[1]?.query.continue && lists[2]?.query.continue);
      assert.equal(t.reflector.resourceVersion, String(server.resourceVersion));
    } finally {
      await t.close();
    }
  });

  it('restarts the list when a continue token expires mid-way, ending with every object once', async () => {
    const before = server.listRequests;
    let compacted = false;
    server.onRequest = (r) => {
      if (r.verb === 'list' && r.query.continue && !compacted) {
        compacted = true;
        server.remove('Service', 'ns-0', 'svc-0'); // changes made while the first pass was paging
        server.compact();
      }
    };
    const t = await serviceReflector(server);
    try {
      await t.reflector.waitForSync();
      assert.equal(t.reflector.store.size, 1200);
      assert.equal(t.reflector.store.has('ns-0/svc-0'), false);
      const statuses = server.requestLog
        .slice(-(server.listRequests - before))
        .filter((r) => r.verb === 'list')
        .map((r) => r.status);
      assert.deepEqual(statuses, [200, 410, 200, 200, 200]);
    } finally {
      server.onRequest = undefined;
      await t.close();
    }
  });
});

describe('Reflector watch', () => {
  let server: KubeApiServer;
  before(async () => {
    server = await KubeApiServer.create({ bookmarkIntervalMs: 3_600_000 });
    server.apply(service('web', '10.0.0.1'));
    server.apply(service('db', '10.0.0.2', 'prod'));
  });
  after(() => server.close());

  it('sees add, update and delete within a second, with old and new values', async () => {
    const t = await serviceReflector(server);
    try {
      await t.reflector.waitForSync();
      assert.equal(t.rec.adds.length, 2);
      server.apply(service('api', '10.0.0.3'));
      await waitFor(() => t.reflector.store.has('default/api'), 'ADDED default/api', 1000);
      assert.deepEqual(t.rec.adds.at(-1), ['default/api', { clusterIP: '10.0.0.3' }]);

      server.apply(service('api', '10.0.0.33'));
      await waitFor(() => t.rec.updates.length === 1, 'MODIFIED default/api', 1000);
      assert.deepEqual(t.rec.updates[0], ['default/api', { clusterIP: '10.0.0.3' }, { clusterIP: '10.0.0.33' }]);

      server.remove('Service', 'default', 'api');
      await waitFor(() => !t.reflector.store.has('default/api'), 'DELETED default/api', 1000);
      assert.deepEqual(t.rec.deletes, [['default/api', { clusterIP: '10.0.0.33' }]]);
      assert.equal(t.reflector.resourceVersion, String(server.resourceVersion));
    } finally {
      await t.close();
    }
  });

  it('emits no update when a change does not alter the projection', async () => {
    const t = await serviceReflector(server);
    try {
      await t.reflector.waitForSync();
      server.apply(service('web', '10.0.0.1', 'default', { team: 'blue' }));
      const rv = String(server.resourceVersion);
      await waitFor(() => t.reflector.resourceVersion === rv, 'RV of the label-only change', 1000);
      assert.equal(t.rec.updates.length, 0);
    } finally {
      await t.close();
    }
  });

  it('asks for bookmarks and advances its resourceVersion from them', async () => {
    const t = await serviceReflector(server);
    try {
      await t.reflector.waitForSync();
      await waitFor(() => server.activeWatches > 0, 'watch open');
      const watch = server.requestLog.filter((r) => r.verb === 'watch').at(-1);
      assert.equal(watch?.query.allowWatchBookmarks, 'true');
      assert.equal(watch?.query.watch, '1');
      const timeout = Number(watch?.query.timeoutSeconds);
      assert.ok(timeout >= 300 && timeout <= 600, `timeoutSeconds ${timeout}`);
      // Changes to another resource move the global RV without any Service event.
      server.apply({ kind: 'ConfigMap', metadata: { name: 'a', namespace: 'default' }, data: { x: '1' } });
      server.apply({ kind: 'ConfigMap', metadata: { name: 'a', namespace: 'default' }, data: { x: '2' } });
      const before = t.reflector.resourceVersion;
      server.sendBookmarks();
      await waitFor(() => t.reflector.resourceVersion === String(server.resourceVersion), 'bookmark RV', 1000);
      assert.notEqual(before, t.reflector.resourceVersion);
      assert.equal(t.rec.adds.length + t.rec.updates.length + t.rec.deletes.length, 2); // just the initial list
    } finally {
      await t.close();
    }
  });

  it('resumes a cleanly closed watch from the last resourceVersion without relisting', async () => {
    const t = await serviceReflector(server);
    try {
      await t.reflector.waitForSync();
      await waitFor(() => server.activeWatches === 1, 'watch open');
      const lists = server.listRequests;
      const watches = server.watchRequests;
      const rv = t.reflector.resourceVersion;
      assert.equal(server.closeAllWatches(), 1);
      await waitFor(() => server.watchRequests === watches + 1, 're-watch');
      assert.equal(server.requestLog.filter((r) => r.verb === 'watch').at(-1)?.query.resourceVersion, rv);
      server.apply(service('late', '10.0.0.9'));
      await waitFor(() => t.reflector.store.has('default/late'), 'event after resume', 1000);
      assert.equal(server.listRequests, lists);
      assert.equal(t.rec.errors.length, 0);
      server.remove('Service', 'default', 'late');
    } finally {
      await t.close();
    }
  });

  // API Concepts › Efficient detection of changes: a watch from a compacted resourceVersion gets 410 Gone.
  for (const mode of ['event', 'status'] as const) {
    it(`relists after 410 Gone (${mode === 'event' ? 'in-stream ERROR event' : 'HTTP status'}), dropping objects deleted meanwhile`, async () => {
      server.expiredWatch = mode;
      server.apply(service('keep', '10.1.0.1'));
      server.apply(service('gone', '10.1.0.2'));
      server.apply(service('changes', '10.1.0.3'));
      const t = await serviceReflector(server);
      try {
        await t.reflector.waitForSync();
        const lists = server.listRequests;
        await server.stop();
        await waitFor(() => t.rec.connection.at(-1) === false, 'disconnected');
        server.remove('Service', 'default', 'gone');
        server.apply(service('changes', '10.1.0.33'));
        server.apply(service('born', '10.1.0.4'));
        server.compact(); // the reflector's RV is now too old to watch from
        const [adds, updates] = [t.rec.adds.length, t.rec.updates.length];
        await server.start();
        await waitFor(() => server.listRequests === lists + 1 && t.reflector.store.has('default/born'), 'relist', 2000);
        assert.equal(t.reflector.store.has('default/gone'), false);
        assert.deepEqual(t.rec.deletes.at(-1), ['default/gone', { clusterIP: '10.1.0.2' }]);
        assert.deepEqual(t.rec.updates.slice(updates), [
          ['default/changes', { clusterIP: '10.1.0.3' }, { clusterIP: '10.1.0.33' }],
        ]);
        assert.deepEqual(t.rec.adds.slice(adds), [['default/born', { clusterIP: '10.1.0.4' }]]);
        assert.equal(t.reflector.store.get('default/keep')?.clusterIP, '10.1.0.1');
        assert.equal(t.reflector.counters.relists, 1);
        const watches = server.requestLog.filter((r) => r.verb === 'watch');
        assert.ok(watches.some((w) => w.status === (mode === 'status' ? 410 : 200)));
        await waitFor(() => t.rec.connection.at(-1) === true, 'connected again');
      } finally {
        await t.close();
        for (const n of ['keep', 'changes', 'born']) server.remove('Service', 'default', n);
        server.expiredWatch = 'event';
      }
    });
  }

  it('keeps running when an event handler throws', async () => {
    let calls = 0;
    const t = await serviceReflector(server, {
      onAdd: () => {
        calls++;
        throw new Error('handler bug');
      },
    });
    try {
      await t.reflector.waitForSync();
      server.apply(service('after-bug', '10.0.0.50'));
      await waitFor(() => t.reflector.store.has('default/after-bug'), 'add after a throwing handler');
      assert.ok(calls >= 3);
      assert.ok(t.rec.warnings.some((w) => w.includes('onAdd handler threw: handler bug')));
      server.remove('Service', 'default', 'after-bug');
    } finally {
      await t.close();
    }
  });

  it('passes label and field selectors to both list and watch', async () => {
    server.apply(service('blue', '10.2.0.1', 'default', { tier: 'blue' }));
    server.apply(service('red', '10.2.0.2', 'default', { tier: 'red' }));
    const t = await serviceReflector(server, {
      labelSelector: 'tier=blue',
      fieldSelector: 'metadata.namespace=default',
    });
    try {
      await t.reflector.waitForSync();
      assert.deepEqual([...t.reflector.store.keys()], ['default/blue']);
      // Relabelling out of the selector reaches the watcher as a DELETED event.
      server.apply(service('blue', '10.2.0.1', 'default', { tier: 'green' }));
      await waitFor(() => t.reflector.store.size === 0, 'selector exit → delete', 1000);
      const w = server.requestLog.filter((r) => r.verb === 'watch').at(-1);
      assert.equal(w?.query.labelSelector, 'tier=blue');
      assert.equal(w?.query.fieldSelector, 'metadata.namespace=default');
    } finally {
      await t.close();
    }
  });

  it('leaves no timers or sockets behind after stop()', async () => {
    const count = (what: string) => process.getActiveResourcesInfo().filter((r) => r === what).length;
    await delay(50);
    const [timers, sockets] = [count('Timeout'), count('TCPSocketWrap')];
    const t = await serviceReflector(server, { idleTimeoutMs: 1000 });
    await t.reflector.waitForSync();
    await waitFor(() => server.activeWatches === 1, 'watch open');
    assert.ok(count('Timeout') > timers, 'the watch has an idle timer while running');
    await t.close();
    await waitFor(() => server.activeWatches === 0, 'server saw the watch close');
    await delay(20);
    assert.equal(count('Timeout'), timers);
    assert.equal(count('TCPSocketWrap'), sockets);
  });

  it('stop() ends the loop promptly even in a long backoff, leaving the store', async () => {
    const t = await serviceReflector(server, { backoff: { initialMs: 30_000, maxMs: 30_000 } });
    await t.reflector.waitForSync();
    const size = t.reflector.store.size;
    server.failNext(1, 500, undefined, '/api/v1/services');
    server.closeAllWatches();
    await waitFor(() => t.rec.errors.length === 1, 'failed re-watch');
    const started = Date.now();
    await t.close();
    assert.ok(Date.now() - started < 200, 'stop waited for the backoff');
    assert.equal(t.reflector.store.size, size);
    await delay(10);
  });
});
