// The route stream (`routes`) from the real binary: one block follows the test API server,
// another the demo cluster's manifests; a real HTTP client reads what `clusterdns connect`
// would read.
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { KubeApiServer } from '../helpers/kubeapi.js';
import { freePort } from '../helpers/ports.js';
import { startServer, type RunningServer } from '../helpers/server.js';
import { namespace, service } from '../kubernetes/fixtures.js';
import { openRoutes } from '../routes/client.js';

const route = (ns: string, name: string, ips: string[]) => ({
  name,
  namespace: ns,
  clusterIP: ips[0]!,
  clusterIPs: ips,
});

describe('routes e2e: the stream clusterdns connect follows', () => {
  let api: KubeApiServer;
  let s: RunningServer;
  let apiRoutes: number;
  let demoRoutes: number;

  before(async () => {
    api = await KubeApiServer.create();
    api.apply(namespace('default'));
    api.apply(namespace('shop'));
    api.apply(service('default', 'backend', ['10.96.120.15']));
    api.apply(service('shop', 'web', ['10.96.5.1']));
    api.apply(service('shop', 'db', 'None'));
    apiRoutes = await freePort();
    demoRoutes = await freePort();
    const demoPort = await freePort();
    s = await startServer({
      // The demo cluster, copied so the test can edit it.
      files: {
        'token.txt': 'demo-token\n',
        'cluster.yaml': readFileSync(resolve('examples/demo/cluster.yaml'), 'utf8'),
      },
      corefile: `.:PORT {
    bind 127.0.0.1
    kubernetes cluster.local {
        endpoint ${api.url}
    }
    routes 127.0.0.1:${apiRoutes} {
        token secret
        bookmark 300ms
    }
}
.:${demoPort} {
    bind 127.0.0.1
    kubernetes cluster.local {
        manifests cluster.yaml
    }
    routes 127.0.0.1:${demoRoutes} {
        tokenfile token.txt
    }
}
`,
    });
  });

  after(async () => {
    await s?.stop();
    await api?.close();
  });

  test('no token or a wrong one is 401', async () => {
    assert.equal((await openRoutes(apiRoutes, '', null)).status, 401);
    assert.equal(
      (await openRoutes(demoRoutes, '', 'secret')).status,
      401,
      "the demo block's token comes from its tokenfile",
    );
  });

  test('API: SNAPSHOT, then ADDED / MODIFIED / DELETED as the API server changes, and BOOKMARKs', async () => {
    const c = await openRoutes(apiRoutes, '?namespaces=default,shop');
    assert.equal(c.status, 200);
    const snap = await c.next();
    assert.equal(snap.type, 'SNAPSHOT');
    assert.deepEqual(snap.routes, [route('default', 'backend', ['10.96.120.15']), route('shop', 'web', ['10.96.5.1'])]);
    const t0 = Date.now();
    api.apply(service('shop', 'cart', ['10.96.5.7']));
    const added = await c.nextChange();
    assert.deepEqual(
      { type: added.type, route: added.route },
      { type: 'ADDED', route: route('shop', 'cart', ['10.96.5.7']) },
    );
    assert.ok(Date.now() - t0 < 1000, 'within a second of the API change');
    api.apply(service('shop', 'cart', ['10.96.5.8']));
    assert.deepEqual((await c.nextChange()).route, route('shop', 'cart', ['10.96.5.8']));
    api.remove('Service', 'shop', 'cart');
    const deleted = await c.nextChange();
    assert.equal(deleted.type, 'DELETED');
    const bookmark = await c.next(1000);
    assert.deepEqual(bookmark, { type: 'BOOKMARK', resourceVersion: deleted.resourceVersion });
    c.close();
  });

  test('API: a client that reconnects with its resourceVersion gets only what it missed', async () => {
    const c = await openRoutes(apiRoutes, '?namespaces=shop');
    const rv = (await c.next()).resourceVersion;
    c.close();
    api.apply(service('shop', 'search', ['10.96.5.9']));
    api.apply(service('default', 'mail', ['10.96.120.30']));
    await new Promise((r) => setTimeout(r, 300));
    const again = await openRoutes(apiRoutes, `?namespaces=shop&resourceVersion=${rv}`);
    const f = await again.nextChange();
    assert.deepEqual(
      { type: f.type, route: f.route },
      { type: 'ADDED', route: route('shop', 'search', ['10.96.5.9']) },
    );
    await assert.rejects(again.nextChange(400), /no frame/, 'default/mail is not in the namespaces asked for');
    again.close();
  });

  test('manifests (the demo cluster): ClusterIP Services only, and an edit of the file arrives as ADDED', async () => {
    const c = await openRoutes(demoRoutes, '', 'demo-token');
    const snap = await c.next();
    assert.deepEqual(snap.routes, [
      route('default', 'backend', ['10.96.120.15', 'fd00:10:96::f']),
      route('default', 'frontend', ['10.96.120.16']),
      route('default', 'kubernetes', ['10.96.0.1']),
      route('kube-system', 'kube-dns', ['10.96.0.10']),
    ]);
    const file = join(s.dir, 'cluster.yaml');
    writeFileSync(
      file,
      `${readFileSync(file, 'utf8')}
  - apiVersion: v1
    kind: Service
    metadata: { name: checkout, namespace: default }
    spec: { clusterIP: 10.96.120.40, ports: [{ port: 80 }] }
`,
    );
    const added = await c.nextChange(6000);
    assert.deepEqual(
      { type: added.type, route: added.route },
      { type: 'ADDED', route: route('default', 'checkout', ['10.96.120.40']) },
    );
    c.close();
  });
});
