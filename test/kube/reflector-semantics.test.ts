// The Reflector held to client-go's reflector semantics against the test API server, which
// answers as kube-apiserver does. Each test names the section of the Kubernetes documentation
// ("API Concepts", https://kubernetes.io/docs/reference/using-api/api-concepts/) it follows.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ForbiddenError, Reflector } from '../../src/kube/reflector.js';
import { KubeClient } from '../../src/kube/http.js';
import { endpointConnection } from '../../src/kube/connection.js';
import { projectService } from '../helpers/kubeapi-fixtures.js';
import { KubeApiServer, forbiddenBody, RESOURCE_TYPES } from '../helpers/kubeapi.js';
import {
  delay,
  nthIp,
  recordingReflector,
  service,
  serviceReflector,
  waitFor,
  type ServiceRecord,
} from '../helpers/kubeapi-fixtures.js';

/** Changes made while the API is away (connections cut), so the client learns of them only by relisting. */
async function whileAway(server: KubeApiServer, change: () => void): Promise<void> {
  await server.stop();
  change();
  await server.start();
}

/** Every key of `store` maps to one generation's address: `10.1.x` (old) or `10.2.x` (new), never both. */
function generations(store: ReadonlyMap<string, ServiceRecord>): Set<string> {
  return new Set([...store.values()].map((v) => v.clusterIP.split('.').slice(0, 2).join('.')));
}

describe('Reflector lists from the watch cache (API Concepts › Resource versions › Semantics for get and list)', () => {
  let server: KubeApiServer;
  before(async () => {
    server = await KubeApiServer.create({ bookmarkIntervalMs: 0, tooLargeWaitMs: 100 });
    for (let i = 0; i < 1201; i++) server.apply(service(`svc-${i}`, nthIp(i)));
  });
  after(() => server.close());

  it('asks for resourceVersion=0 NotOlderThan; the cache ignores limit and answers whole', async () => {
    const before = server.listRequests;
    const t = await serviceReflector(server);
    try {
      await t.reflector.waitForSync();
      const lists = server.requestLog.filter((r) => r.verb === 'list').slice(before);
      assert.equal(lists.length, 1, 'one request: RV=0 is served from the cache, unpaged');
      assert.equal(lists[0]?.query.resourceVersion, '0');
      assert.equal(lists[0]?.query.resourceVersionMatch, 'NotOlderThan');
      assert.equal(t.reflector.store.size, 1201);
    } finally {
      await t.close();
    }
  });

  it('a whole-list answer over the body limit falls back to pages from etcd, and stays there', async () => {
    const client = new KubeClient(await endpointConnection(server.url), { maxBodyBytes: 64 * 1024 });
    const warnings: string[] = [];
    const r = new Reflector({
      client,
      path: '/api/v1/services',
      project: projectService,
      pageSize: 200,
      watchList: false,
      warn: (m) => warnings.push(m),
      onError: () => {},
    }).start();
    const before = server.requestLog.length;
    try {
      await r.waitForSync(AbortSignal.timeout(10_000));
      assert.equal(r.store.size, 1201);
      const lists = server.requestLog.slice(before).filter((x) => x.verb === 'list');
      assert.equal(lists[0]?.query.resourceVersion, '0');
      assert.equal(lists[1]?.query.resourceVersion, undefined);
      assert.equal(lists[1]?.query.limit, '200');
      assert.equal(lists.length, 1 + 7, 'the failed whole list, then 7 pages');
      assert.ok(
        warnings.some((w) => /exceeds 65536 bytes; listing in pages/.test(w)),
        warnings.join('\n'),
      );
    } finally {
      await r.stop();
      client.close();
    }
  });

  it('relists after a 410 NotOlderThan its last version, unpaged (the cache), never going back in time', async () => {
    const t = await serviceReflector(server);
    try {
      await t.reflector.waitForSync();
      await waitFor(() => server.activeWatches === 1, 'watch open');
      const rv = t.reflector.resourceVersion;
      const before = server.listRequests;
      // While the API is away its history is compacted: the watch cannot resume.
      await server.stop();
      server.compact();
      server.apply(service('after-compaction', '10.0.9.9'));
      await server.start();
      await waitFor(() => t.reflector.store.has('default/after-compaction'), 'relist after 410', 10_000);
      const relist = server.requestLog.filter((r) => r.verb === 'list').slice(before);
      assert.equal(relist.length, 1);
      assert.equal(relist[0]?.query.resourceVersion, rv);
      assert.equal(relist[0]?.query.resourceVersionMatch, 'NotOlderThan');
      assert.equal(relist[0]?.query.limit, undefined, 'a limit with a version other than 0 sends the list to etcd');
      assert.equal(t.reflector.counters.relists, 1);
    } finally {
      server.remove('Service', 'default', 'after-compaction');
      await t.close();
    }
  });
});

// API Concepts › Resource versions › Unavailable resource versions: "Too large resource version".
describe('Reflector after an etcd restore: "Too large resource version" relists from a quorum read after the backoff', () => {
  for (const form of ['cause', 'legacy-cause', 'message'] as const) {
    for (const where of ['event', 'status'] as const) {
      it(`watch answered with the ${form} form ${where === 'event' ? 'as an in-stream ERROR event' : 'as HTTP 504'}`, async () => {
        const server = await KubeApiServer.create({
          bookmarkIntervalMs: 0,
          tooLargeWaitMs: 100,
          tooLargeForm: form,
          expiredWatch: where,
        });
        server.apply(service('web', '10.0.0.1'));
        server.apply(service('db', '10.0.0.2'));
        const t = await serviceReflector(server, { backoff: { initialMs: 20, maxMs: 5000 } });
        try {
          await t.reflector.waitForSync();
          await waitFor(() => server.activeWatches === 1, 'watch open');
          const held = Number(t.reflector.resourceVersion);
          // While the API is away etcd is restored from a backup older than what the client saw, without `db`.
          await server.stop();
          server.remove('Service', 'default', 'db');
          server.rewindResourceVersion(held - 1);
          const before = server.requestLog.length;
          await server.start();
          await waitFor(() => !t.reflector.store.has('default/db'), 'relist after too-large', 10_000);
          const after = server.requestLog.slice(before);
          const refused = after.find((r) => r.verb === 'watch');
          assert.equal(refused?.query.resourceVersion, String(held));
          const relist = after.filter((r) => r.verb === 'list');
          assert.equal(relist.length, 1, JSON.stringify(after.map((r) => [r.verb, r.query, r.status])));
          assert.equal(relist[0]?.query.resourceVersion, undefined, 'a quorum list names no version');
          // retryAfterSeconds: 1 in the Status is honoured.
          assert.ok(
            relist[0]!.time - refused.time >= 1050,
            `relisted ${relist[0]!.time - refused.time} ms after the 504`,
          );
          assert.ok(
            t.rec.warnings.some((w) => w.includes('Too large resource version')),
            t.rec.warnings.join('\n'),
          );
          // And it watches on from the restored store's version.
          server.apply(service('later', '10.0.0.3'));
          await waitFor(() => t.reflector.store.has('default/later'), 'event after the relist');
        } finally {
          await t.close();
          await server.close();
        }
      });
    }
  }

  it('a relist NotOlderThan a version the cache does not reach gets 504 and falls back to a quorum list', async () => {
    const server = await KubeApiServer.create({ bookmarkIntervalMs: 0, tooLargeWaitMs: 100 });
    server.apply(service('web', '10.0.0.1'));
    const t = await serviceReflector(server);
    try {
      await t.reflector.waitForSync();
      await waitFor(() => server.activeWatches === 1, 'watch open');
      server.apply(service('seen', '10.0.0.4'));
      await waitFor(() => t.reflector.store.has('default/seen'), 'event');
      const held = t.reflector.resourceVersion;
      // The restored store stops short of the version the client holds.
      server.rewindResourceVersion(Number(held) - 2);
      const before = server.requestLog.length;
      // A 410 ends the watch; the relist asks NotOlderThan `held`, which the store no longer has.
      server.writeRawToWatches(
        JSON.stringify({
          type: 'ERROR',
          object: {
            kind: 'Status',
            apiVersion: 'v1',
            metadata: {},
            status: 'Failure',
            message: 'too old resource version: 1 (2)',
            reason: 'Expired',
            code: 410,
          },
        }),
      );
      await waitFor(() => t.reflector.resourceVersion === String(server.resourceVersion), 'quorum relist', 10_000);
      const lists = server.requestLog.slice(before).filter((r) => r.verb === 'list');
      assert.deepEqual(
        lists.map((r) => [r.query.resourceVersion, r.status]),
        [
          [held, 504],
          [undefined, 200],
        ],
      );
      assert.equal(t.reflector.counters.relists, 2, 'two attempts: from the cache, then from etcd');
      assert.equal(t.reflector.store.size, 2);
    } finally {
      await t.close();
      await server.close();
    }
  });
});

// API Concepts › Streaming lists.
describe('Reflector with the streaming WatchList', () => {
  it('lists through one watch with sendInitialEvents, swapping the state in at the initial-events-end bookmark', async () => {
    const server = await KubeApiServer.create({ bookmarkIntervalMs: 0, watchList: true });
    for (let i = 0; i < 300; i++) server.apply(service(`svc-${i}`, nthIp(i)));
    const t = await serviceReflector(server, { watchList: true });
    try {
      await t.reflector.waitForSync();
      assert.equal(t.reflector.store.size, 300);
      assert.equal(server.listRequests, 0, 'no LIST at all');
      const w = server.requestLog.find((r) => r.verb === 'watch');
      assert.equal(w?.query.sendInitialEvents, 'true');
      assert.equal(w?.query.resourceVersionMatch, 'NotOlderThan');
      assert.equal(w?.query.allowWatchBookmarks, 'true');
      assert.equal(w?.query.resourceVersion, undefined, 'the first WatchList is a consistent read');
      assert.equal(t.reflector.resourceVersion, String(server.resourceVersion));
      // The same stream goes on as a watch.
      server.apply(service('later', '10.0.0.3'));
      await waitFor(() => t.reflector.store.has('default/later'), 'event on the same stream');
      assert.equal(server.watchRequests, 1);
      // After a compaction, the relist is a WatchList NotOlderThan the last version.
      const rv = t.reflector.resourceVersion;
      await whileAway(server, () => {
        server.compact();
        server.remove('Service', 'default', 'svc-0');
      });
      await waitFor(() => !t.reflector.store.has('default/svc-0'), 'relist by WatchList', 10_000);
      const again = server.requestLog.filter((r) => r.verb === 'watch').at(-1);
      assert.equal(again?.query.sendInitialEvents, 'true');
      assert.ok(Number(again?.query.resourceVersion) >= Number(rv));
      assert.equal(server.listRequests, 0);
    } finally {
      await t.close();
      await server.close();
    }
  });

  it("a server without WatchList answers 422 with Kubernetes' Status; the reflector LISTs from then on", async () => {
    const server = await KubeApiServer.create({ bookmarkIntervalMs: 0 });
    server.apply(service('web', '10.0.0.1'));
    const t = await serviceReflector(server, { watchList: true });
    try {
      await t.reflector.waitForSync();
      const first = server.requestLog[0]!;
      assert.equal(first.verb, 'watch');
      assert.equal(first.status, 422);
      assert.equal(server.listRequests, 1);
      assert.ok(
        t.rec.warnings.some((w) =>
          /refused a streaming list.*sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled/.test(
            w,
          ),
        ),
        t.rec.warnings.join('\n'),
      );
      assert.equal(t.rec.errors.length, 0, 'a refusal is not an error');
      server.compact();
      server.closeAllWatches();
      await waitFor(() => server.listRequests === 2, 'relist');
      assert.equal(server.requestLog.filter((r) => r.query.sendInitialEvents).length, 1, 'WatchList tried once');
    } finally {
      await t.close();
      await server.close();
    }
    // The body, as kube-apiserver sends it.
    const raw = await KubeApiServer.create();
    try {
      const res = await fetch(
        `${raw.url}/api/v1/services?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true`,
      );
      assert.equal(res.status, 422);
      assert.deepEqual(await res.json(), {
        kind: 'Status',
        apiVersion: 'v1',
        metadata: {},
        status: 'Failure',
        message:
          'ListOptions.meta.k8s.io "" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled',
        reason: 'Invalid',
        details: {
          group: 'meta.k8s.io',
          kind: 'ListOptions',
          causes: [
            {
              reason: 'FieldValueForbidden',
              message:
                'Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled',
              field: 'sendInitialEvents',
            },
          ],
        },
        code: 422,
      });
    } finally {
      await raw.close();
    }
  });

  it('a WatchList cut before its bookmark leaves the previous state whole', async () => {
    const server = await KubeApiServer.create({ bookmarkIntervalMs: 0, watchList: true });
    for (let i = 0; i < 20; i++) server.apply(service(`svc-${i}`, `10.1.0.${i}`));
    const t = await serviceReflector(server, { watchList: true });
    try {
      await t.reflector.waitForSync();
      await waitFor(() => server.activeWatches === 1, 'watch open');
      // A new generation, then a relist whose streams are cut after 7 of 20 initial events.
      server.cutInitialEventsAfter = 7;
      const watches = server.watchRequests;
      await whileAway(server, () => {
        server.compact();
        for (let i = 0; i < 20; i++) server.apply(service(`svc-${i}`, `10.2.0.${i}`));
      });
      await waitFor(() => server.watchRequests >= watches + 3, 'three cut WatchLists', 15_000);
      assert.deepEqual([...generations(t.reflector.store)], ['10.1'], 'the old state, whole');
      assert.equal(t.reflector.store.size, 20);
      assert.equal(t.rec.updates.length, 0);
      server.cutInitialEventsAfter = undefined;
      await waitFor(() => generations(t.reflector.store).has('10.2'), 'the new state', 5000);
      assert.deepEqual([...generations(t.reflector.store)], ['10.2']);
    } finally {
      await t.close();
      await server.close();
    }
  });
});

// API Concepts › Retrieving large results sets in chunks, with the relist built aside (client-go's Replace).
describe('Reflector relists atomically', () => {
  it('a slow, paged relist that fails half-way never shows a mixed state and keeps the old one', async () => {
    const server = await KubeApiServer.create({ bookmarkIntervalMs: 0, watchCache: false });
    for (let i = 0; i < 30; i++) server.apply(service(`svc-${i}`, `10.1.0.${i}`));
    const t = await serviceReflector(server, { pageSize: 10, backoff: { initialMs: 200, maxMs: 400 } });
    try {
      await t.reflector.waitForSync();
      await waitFor(() => server.activeWatches === 1, 'watch open');
      server.pageDelayMs = 150;
      // The third page of every relist fails.
      let pages = 0;
      server.onRequest = (r) => {
        if (r.verb === 'list' && r.query.continue && ++pages % 2 === 0)
          server.failNext(1, 500, undefined, (x) => x === r);
      };
      const lists = server.listRequests;
      await whileAway(server, () => {
        server.compact();
        // The new generation: 10 services renumbered, 10 gone, 5 new; every old one renumbered too.
        for (let i = 0; i < 10; i++) server.apply(service(`svc-${i}`, `10.2.0.${i}`));
        for (let i = 10; i < 20; i++) server.remove('Service', 'default', `svc-${i}`);
        for (let i = 20; i < 35; i++) server.apply(service(`svc-${i}`, `10.2.0.${i}`));
      });
      const seen = new Set<string>();
      const sizes = new Set<number>();
      // Look throughout two relists that each fail at their third page.
      const until = Date.now() + 20_000;
      while (pages < 4 && Date.now() < until) {
        for (const g of generations(t.reflector.store)) seen.add(g);
        sizes.add(t.reflector.store.size);
        await delay(5);
      }
      assert.ok(
        pages >= 4 && server.listRequests - lists >= 6,
        `two relists were tried: ${server.listRequests - lists} pages`,
      );
      assert.deepEqual([...seen], ['10.1'], 'only the old state was ever visible');
      assert.deepEqual([...sizes], [30]);
      assert.equal(t.rec.deletes.length, 0);
      server.onRequest = undefined;
      await waitFor(() => generations(t.reflector.store).has('10.2'), 'the relist completes', 5000);
      assert.deepEqual([...generations(t.reflector.store)], ['10.2']);
      assert.equal(t.reflector.store.size, 25);
    } finally {
      server.onRequest = undefined;
      await t.close();
      await server.close();
    }
  });
});

describe('Reflector announces its lists to its owner (the heap policy lives there)', () => {
  it('onListBegin/onListEnd frame each list: completed, or not when it failed', async () => {
    const server = await KubeApiServer.create({ bookmarkIntervalMs: 0 });
    server.apply(service('web', '10.0.0.1'));
    const calls: string[] = [];
    const t = await serviceReflector(server, {
      onListBegin: () => calls.push('begin'),
      onListEnd: (done) => calls.push(done ? 'end' : 'failed'),
    });
    try {
      await t.reflector.waitForSync();
      assert.deepEqual(calls, ['begin', 'end']);
      server.failNext(1, 500, undefined, (r) => r.verb === 'list');
      await whileAway(server, () => server.compact());
      await waitFor(() => calls.length === 6, 'a failed relist, then a good one', 10_000);
      assert.deepEqual(calls, ['begin', 'end', 'begin', 'failed', 'begin', 'end']);
    } finally {
      await t.close();
      await server.close();
    }
  });
});

// RBAC: API Concepts › (status codes) and "Using RBAC Authorization": a 403 Forbidden Status names user, verb and resource.
describe('Reflector under RBAC denials', () => {
  it('names the verb and the resource it may not use', async () => {
    const server = await KubeApiServer.create({ bookmarkIntervalMs: 0 });
    server.deny('list', 'endpointslices');
    const t = await recordingReflector(server, {
      path: '/apis/discovery.k8s.io/v1/endpointslices',
      project: (o) => ({ key: String((o as { metadata: { name: string } }).metadata.name), value: o }),
    });
    try {
      await waitFor(() => t.rec.errors.length >= 1, 'a 403');
      const err = t.rec.errors[0];
      assert.ok(err instanceof ForbiddenError, String(err));
      assert.equal(err.verb, 'list');
      assert.match(
        err.message,
        /forbidden: cannot list endpointslices\.discovery\.k8s\.io \(endpointslices\.discovery\.k8s\.io is forbidden: User "system:serviceaccount:kube-system:coredns" cannot list resource "endpointslices" in API group "discovery\.k8s\.io" at the cluster scope\)/,
      );
      server.allow('list', 'endpointslices');
      server.deny('watch', 'endpointslices');
      await waitFor(
        () => t.rec.errors.some((e) => e instanceof ForbiddenError && e.verb === 'watch'),
        'a 403 on watch',
      );
      assert.match(t.rec.errors.at(-1)!.message, /forbidden: cannot watch endpointslices\.discovery\.k8s\.io/);
      assert.equal(t.reflector.hasSynced, true);
    } finally {
      await t.close();
      await server.close();
    }
    // The body, byte for byte what kube-apiserver's authorizer sends.
    const raw = await KubeApiServer.create();
    raw.deny('list', 'services');
    try {
      const res = await fetch(`${raw.url}/api/v1/namespaces/kube-system/services`);
      assert.equal(res.status, 403);
      assert.equal(
        await res.text(),
        '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"services is forbidden: User \\"system:serviceaccount:kube-system:coredns\\" cannot list resource \\"services\\" in API group \\"\\" in the namespace \\"kube-system\\"","reason":"Forbidden","details":{"kind":"services"},"code":403}',
      );
      assert.deepEqual(
        forbiddenBody('u', 'watch', RESOURCE_TYPES[0]!, undefined).message,
        'services is forbidden: User "u" cannot watch resource "services" in API group "" at the cluster scope',
      );
    } finally {
      await raw.close();
    }
  });
});
