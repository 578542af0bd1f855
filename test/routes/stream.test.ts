// The route stream in process: the routes plugin over a real HTTP listener, following a
// kubernetes instance whose index the test feeds directly, and read by a real HTTP client.
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { parseCorefile } from '../../src/corefile/parser.js';
import { Rcode } from '../../src/dns/constants.js';
import { ClusterIndex } from '../../src/cluster/clusterindex.js';
import { KubernetesHandler } from '../../src/plugins/kubernetes/handler.js';
import { clusterView } from '../../src/plugins/kubernetes/clusterview.js';
import type { PluginInstance } from '../../src/plugins/plugin.js';
import { RouteFeed } from '../../src/plugins/routes/feed.js';
import { setup } from '../../src/plugins/routes/setup.js';
import { HttpServices } from '../../src/server/http.js';
import { Response } from '../../src/server/request.js';
import { eventsFor, fakeContext, optionsFrom } from '../kubernetes/harness.js';
import { externalService, namespace, service, type Obj } from '../kubernetes/fixtures.js';
import { openRoutes, type Frame } from './client.js';
import { RouteStream as ConnectRouteStream } from '../../src/connect/route-stream.js';
import type { Route as ConnectRoute } from '../../src/connect/routes.js';
import { logger } from '../../src/log.js';

const ADDRESS = '127.0.0.1:0';

interface Running {
  index: ClusterIndex;
  port: number;
  instance: PluginInstance;
  apply(objs: Obj[]): void;
  remove(ns: string, name: string): void;
  stop(): Promise<void>;
}

/** The routes plugin from `body` (its block), following a kubernetes instance holding `objects`. */
async function start(body: string, objects: Obj[], synced = true): Promise<Running> {
  const http = new HttpServices();
  const index = new ClusterIndex();
  const options = optionsFrom('kubernetes cluster.local');
  const handler = new KubernetesHandler(
    options,
    index,
    () => Response.rcode(Rcode.SERVFAIL, ''),
    () => [],
  );
  // Routes finds the cluster through the view the instance publishes.
  const k8s: PluginInstance = { name: 'kubernetes', handler, clusterView: clusterView(index, handler.lookup, options) };
  for (const ev of eventsFor(objects)) index.apply(ev);
  if (synced) index.apply({ op: 'synced' });
  const ctx = { ...fakeContext(), http, instances: () => [k8s], blockInstances: () => [k8s] };
  const d = parseCorefile(`. {\nroutes ${ADDRESS} {\n${body}\n}\n}\n`, '/tmp/Corefile')[0]!.directives[0]!;
  const made = setup([d], ctx);
  const instance = Array.isArray(made) ? made[0]! : made;
  await instance.startup?.();
  return {
    index,
    port: http.boundPort(ADDRESS)!,
    instance,
    apply: (objs) => {
      for (const ev of eventsFor(objs)) index.apply(ev);
    },
    remove: (ns, name) => index.apply({ op: 'delete', kind: 'Service', key: `${ns}/${name}` }),
    async stop() {
      await instance.shutdown?.();
      await http.closeAll();
    },
  };
}

const CLUSTER: Obj[] = [
  namespace('default'),
  namespace('shop'),
  service('default', 'kubernetes', ['10.96.0.1']),
  service('default', 'backend', ['10.96.120.15', 'fd00:10:96::f']),
  service('default', 'mysql', 'None'),
  externalService('default', 'external', 'example.com'),
  service('shop', 'web', ['10.96.5.1']),
];

const routeOf = (ns: string, name: string, ips: string[]) => ({
  name,
  namespace: ns,
  clusterIP: ips[0]!,
  clusterIPs: ips,
});

describe('routes: the stream over HTTP', () => {
  const running: Running[] = [];
  after(async () => {
    for (const r of running) await r.stop();
  });
  const go = async (body: string, objects: Obj[] = CLUSTER, synced = true) => {
    const r = await start(body, objects, synced);
    running.push(r);
    return r;
  };

  it('refuses a missing or wrong token with 401, other methods with 405, bad namespaces with 400/403', async () => {
    const r = await go('token secret\nnamespaces default shop');
    const none = await openRoutes(r.port, '', null);
    assert.equal(none.status, 401);
    assert.match(none.headers['www-authenticate'] ?? '', /^Bearer/);
    assert.equal((await openRoutes(r.port, '', 'wrong')).status, 401);
    assert.equal((await openRoutes(r.port, '?namespaces=kube-system')).status, 403);
    assert.equal((await openRoutes(r.port, '?namespaces=Bad_Name')).status, 400);
    assert.equal((await openRoutes(r.port, '?resourceVersion=abc')).status, 400);
    const post = await fetch(`http://127.0.0.1:${r.port}/routes`, {
      method: 'POST',
      headers: { authorization: 'Bearer secret' },
    });
    assert.equal(post.status, 405);
    await post.body?.cancel();
  });

  it('starts with a SNAPSHOT of the ClusterIP Services of the asked namespaces (headless and ExternalName skipped), as chunked NDJSON', async () => {
    const r = await go('token secret');
    const all = await openRoutes(r.port);
    assert.equal(all.status, 200);
    assert.equal(all.headers['content-type'], 'application/x-ndjson');
    assert.equal(all.headers['transfer-encoding'], 'chunked');
    const snap = await all.next();
    assert.equal(snap.type, 'SNAPSHOT');
    assert.match(snap.resourceVersion, /^\d+$/);
    assert.deepEqual(snap.routes, [
      routeOf('default', 'backend', ['10.96.120.15', 'fd00:10:96::f']),
      routeOf('default', 'kubernetes', ['10.96.0.1']),
      routeOf('shop', 'web', ['10.96.5.1']),
    ]);
    all.close();
    const shop = await openRoutes(r.port, '?namespaces=shop');
    assert.deepEqual((await shop.next()).routes, [routeOf('shop', 'web', ['10.96.5.1'])]);
    shop.close();
  });

  it('then sends ADDED, MODIFIED and DELETED as they happen, each with a higher resourceVersion, only for the asked namespaces', async () => {
    const r = await go('token secret');
    const c = await openRoutes(r.port, '?namespaces=default,shop');
    const snap = await c.next();
    const other = await openRoutes(r.port, '?namespaces=shop');
    await other.next();
    r.apply([service('default', 'cart', ['10.96.7.7'])]);
    const added = await c.next();
    assert.deepEqual(
      { type: added.type, route: added.route },
      { type: 'ADDED', route: routeOf('default', 'cart', ['10.96.7.7']) },
    );
    assert.ok(Number(added.resourceVersion) > Number(snap.resourceVersion));
    r.apply([service('default', 'cart', ['10.96.7.8', 'fd00::78'])]);
    const modified = await c.next();
    assert.deepEqual(
      { type: modified.type, route: modified.route },
      { type: 'MODIFIED', route: routeOf('default', 'cart', ['10.96.7.8', 'fd00::78']) },
    );
    r.apply([service('default', 'cart', 'None')]);
    const deleted = await c.next();
    assert.deepEqual(
      { type: deleted.type, route: deleted.route },
      { type: 'DELETED', route: routeOf('default', 'cart', ['10.96.7.8', 'fd00::78']) },
      'a Service turned headless is no route any more',
    );
    r.apply([service('shop', 'pay', ['10.96.5.2'])]);
    assert.equal((await c.next()).route?.name, 'pay');
    r.remove('shop', 'pay');
    assert.equal((await c.next()).type, 'DELETED');
    const seen: Frame[] = [await other.next(), await other.next()];
    assert.deepEqual(
      seen.map((f) => `${f.type} ${f.route?.namespace}/${f.route?.name}`),
      ['ADDED shop/pay', 'DELETED shop/pay'],
      'the shop-only stream saw none of default',
    );
    assert.equal(other.pending.length, 0);
    r.apply([service('default', 'backend', ['10.96.120.15', 'fd00:10:96::f'])]);
    await new Promise((ok) => setTimeout(ok, 50));
    assert.equal(c.pending.length, 0, 'an update that changes no address sends nothing');
    c.close();
    other.close();
  });

  it('sends a BOOKMARK with the current resourceVersion every interval', async () => {
    const r = await go('token secret\nbookmark 100ms');
    const c = await openRoutes(r.port);
    const snap = await c.next();
    const t0 = Date.now();
    const b = await c.next(1000);
    assert.deepEqual(b, { type: 'BOOKMARK', resourceVersion: snap.resourceVersion });
    assert.ok(Date.now() - t0 < 400);
    c.close();
  });

  it('resumes from a resourceVersion: the changes after it from the log, or a fresh SNAPSHOT when it is older than the log or unknown', async () => {
    const r = await go('token secret\nhistory 3');
    const first = await openRoutes(r.port);
    const rv = (await first.next()).resourceVersion;
    first.close();
    r.apply([service('default', 'a1', ['10.96.1.1'])]);
    r.apply([service('shop', 'a2', ['10.96.1.2'])]);
    const resumed = await openRoutes(r.port, `?namespaces=default&resourceVersion=${rv}`);
    const f = await resumed.next();
    assert.deepEqual(
      { type: f.type, name: f.route?.name },
      { type: 'ADDED', name: 'a1' },
      'replayed, no SNAPSHOT; the shop change filtered out',
    );
    r.apply([service('default', 'a3', ['10.96.1.3'])]);
    assert.equal((await resumed.next()).route?.name, 'a3', 'then live');
    resumed.close();
    const upToDate = await openRoutes(r.port, `?resourceVersion=${Number(rv) + 3}`);
    await assert.rejects(upToDate.next(200), /no frame/, 'nothing missed, nothing sent');
    upToDate.close();
    for (let i = 4; i <= 8; i++) r.apply([service('default', `a${i}`, [`10.96.1.${i}`])]);
    const tooOld = await openRoutes(r.port, `?resourceVersion=${rv}`);
    const snap = await tooOld.next();
    assert.equal(snap.type, 'SNAPSHOT', 'the log holds only the last 3 changes');
    assert.equal(snap.routes!.filter((x) => x.name.startsWith('a')).length, 8);
    tooOld.close();
    const foreign = await openRoutes(r.port, '?resourceVersion=4294967296');
    assert.equal((await foreign.next()).type, 'SNAPSHOT', 'a version of another server process');
    foreign.close();
  });

  it('holds the SNAPSHOT until the cluster state has synced', async () => {
    const r = await go('token secret', CLUSTER, false);
    const c = await openRoutes(r.port);
    assert.equal(c.status, 200);
    await assert.rejects(c.next(150), /no frame/);
    assert.equal(r.instance.ready?.(), false);
    r.index.apply({ op: 'synced' });
    const snap = await c.next();
    assert.equal(snap.type, 'SNAPSHOT');
    assert.equal(snap.routes!.length, 3);
    assert.equal(r.instance.ready?.(), true);
    c.close();
  });

  it('cuts a client that does not read instead of buffering without bound', async () => {
    const r = await go('token secret\nhistory 10');
    const c = await openRoutes(r.port);
    await c.next();
    c.pause();
    const big = Array.from({ length: 40 }, (_, i) => `fd00:${i}::1`);
    for (let i = 0; i < 12_000; i++)
      r.apply([service('default', `svc-${i % 50}`, [`10.97.${(i >> 8) & 255}.${i & 255}`, ...big])]);
    await Promise.race([c.ended, new Promise((_, fail) => setTimeout(() => fail(new Error('still connected')), 3000))]);
  });

  it('ends every stream when the configuration goes away', async () => {
    const r = await start('token secret', CLUSTER);
    const c = await openRoutes(r.port);
    await c.next();
    await r.stop();
    await Promise.race([
      c.ended,
      new Promise((_, fail) => setTimeout(() => fail(new Error('stream still open')), 2000)),
    ]);
  });
});

describe('routes: the clusterdns connect client against the plugin', () => {
  it('follows the SNAPSHOT, ADDED and DELETED of the stream', async () => {
    const r = await start('token secret', CLUSTER);
    let seen: ReadonlyMap<string, ConnectRoute> = new Map();
    const stream = new ConnectRouteStream({
      url: new URL(`http://127.0.0.1:${r.port}/routes`),
      token: 'secret',
      namespaces: ['default'],
      log: logger('connect'),
      onChange: (routes) => {
        seen = new Map(routes);
      },
      backoffMinMs: 20,
      backoffMaxMs: 50,
    });
    const until = async (what: string, cond: () => boolean) => {
      const end = Date.now() + 3000;
      while (!cond()) {
        if (Date.now() > end) assert.fail(`timed out waiting for ${what}`);
        await new Promise((ok) => setTimeout(ok, 10));
      }
    };
    try {
      stream.start();
      await until('the snapshot', () => seen.size === 2);
      assert.deepEqual([...seen.keys()].sort(), ['default/backend', 'default/kubernetes']);
      r.apply([service('default', 'cart', ['10.96.7.7'])]);
      await until('cart', () => seen.has('default/cart'));
      assert.deepEqual(seen.get('default/cart'), routeOf('default', 'cart', ['10.96.7.7']));
      r.remove('default', 'cart');
      await until('cart deleted', () => !seen.has('default/cart'));
      assert.match(stream.resourceVersion ?? '', /^\d+$/);
      assert.equal(stream.connections, 1);
    } finally {
      await stream.stop();
      await r.stop();
    }
  });
});

describe('routes: resourceVersions', () => {
  it('are decimal safe integers that grow by one per change, and differ between feeds', () => {
    const a = new RouteFeed(new Set(), 10, 7);
    const b = new RouteFeed(new Set(), 10, 8);
    assert.equal(a.version, String(7 * 2 ** 32));
    assert.notEqual(a.version, b.version);
    assert.ok(Number.isSafeInteger(Number(new RouteFeed(new Set(), 10, 2 ** 21 - 1).version)));
  });
});
