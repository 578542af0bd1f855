// autopath @kubernetes in the real binary: pods in the test API server have 127.0.0.x
// addresses, and dig sends from those addresses (-b), so the server sees each query come
// from a known pod and walks that pod's search path itself.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { FakeUpstream } from '../forward/upstreams.js';
import { dig } from '../helpers/dns.js';
import { KubeApiServer } from '../helpers/kubeapi.js';
import { freePort } from '../helpers/ports.js';
import { startServer, type RunningServer } from '../helpers/server.js';
import { namespace, pod, service } from '../kubernetes/fixtures.js';
import { zone } from '../searchfan/zone.js';

const SHOP_POD = '127.0.0.5';
const DEFAULT_POD = '127.0.0.6';
const NOT_A_POD = '127.0.0.9';

/** Answer lines with the TTL taken out (the cache lowers it). */
const lines = (answer: string[]) => answer.map((l) => l.replace(/ \d+ IN /, ' IN '));

describe("autopath @kubernetes e2e: one round trip for a pod's first search expansion", () => {
  let api: KubeApiServer;
  let external: FakeUpstream;
  let s: RunningServer;
  let metricsPort: number;

  before(async () => {
    api = await KubeApiServer.create();
    for (const ns of ['default', 'shop']) api.apply(namespace(ns));
    api.apply(service('default', 'backend', ['10.96.120.15', 'fd00:10:96::f']));
    api.apply(service('default', 'frontend', ['10.96.120.16']));
    api.apply(pod('shop', 'cart-7d9f', SHOP_POD));
    api.apply(pod('default', 'web-5c8b', DEFAULT_POD));
    external = await FakeUpstream.start();
    external.behaviour = zone({
      records: {
        'api.example.com.': { a: ['203.0.113.10'], aaaa: ['2001:db8::10'], ttl: 60 },
        'intranet.corp.internal.': { a: ['10.20.0.1'], ttl: 60 },
      },
    });
    metricsPort = await freePort();
    s = await startServer({
      files: { 'server-resolv.conf': 'nameserver 10.0.0.2\nsearch corp.internal\n' },
      corefile: `.:PORT {
    bind 127.0.0.1
    autopath @kubernetes {
        resolvconf server-resolv.conf
    }
    cache 30
    kubernetes cluster.local {
        endpoint ${api.url}
        pods verified
    }
    forward . 127.0.0.1:${external.port}
    prometheus 127.0.0.1:${metricsPort}
}
`,
    });
  });

  after(async () => {
    await s?.stop();
    await external?.close();
    await api?.close();
  });

  const from = (ip: string, name: string, type: string) => dig(s.port, ['-b', ip, name, type]);

  test('api.example.com asked by a pod in shop: CNAME to api.example.com., question as asked, for A and AAAA, also from the cache', async () => {
    const asked = 'api.example.com.shop.svc.cluster.local.';
    for (let round = 0; round < 2; round++) {
      const a = await from(SHOP_POD, asked, 'A');
      assert.equal(a.status, 'NOERROR');
      assert.match(a.raw, /;api\.example\.com\.shop\.svc\.cluster\.local\.\s+IN\s+A\n/);
      assert.deepEqual(lines(a.answer), [`${asked} IN CNAME api.example.com.`, 'api.example.com. IN A 203.0.113.10']);
      const aaaa = await from(SHOP_POD, asked, 'AAAA');
      assert.deepEqual(
        lines(aaaa.answer),
        [`${asked} IN CNAME api.example.com.`, 'api.example.com. IN AAAA 2001:db8::10'],
        `round ${round}`,
      );
    }
  });

  test('a Service of another namespace: backend.default asked from shop lands on backend.default.svc.cluster.local', async () => {
    const r = await from(SHOP_POD, 'backend.default.shop.svc.cluster.local.', 'A');
    assert.deepEqual(lines(r.answer), [
      'backend.default.shop.svc.cluster.local. IN CNAME backend.default.svc.cluster.local.',
      'backend.default.svc.cluster.local. IN A 10.96.120.15',
    ]);
  });

  test('NODATA stops the walk: AAAA of the IPv4-only frontend.default from shop is NOERROR with no records', async () => {
    const r = await from(SHOP_POD, 'frontend.default.shop.svc.cluster.local.', 'AAAA');
    assert.equal(r.status, 'NOERROR');
    assert.deepEqual(r.answer, []);
    assert.match(r.raw, /;frontend\.default\.shop\.svc\.cluster\.local\.\s+IN\s+AAAA\n/);
  });

  test("the pod's own namespace answers directly: no CNAME when the first name exists", async () => {
    const r = await from(DEFAULT_POD, 'frontend.default.svc.cluster.local.', 'A');
    assert.deepEqual(lines(r.answer), ['frontend.default.svc.cluster.local. IN A 10.96.120.16']);
  });

  test("the server's own resolv.conf search list follows the cluster domains", async () => {
    const r = await from(SHOP_POD, 'intranet.shop.svc.cluster.local.', 'A');
    assert.deepEqual(lines(r.answer), [
      'intranet.shop.svc.cluster.local. IN CNAME intranet.corp.internal.',
      'intranet.corp.internal. IN A 10.20.0.1',
    ]);
  });

  test('a client that is no pod, or a name that is not its first expansion, is answered as asked', async () => {
    assert.equal(
      (await from(NOT_A_POD, 'api.example.com.shop.svc.cluster.local.', 'A')).status,
      'NXDOMAIN',
      'unknown source address',
    );
    assert.equal(
      (await from(DEFAULT_POD, 'api.example.com.shop.svc.cluster.local.', 'A')).status,
      'NXDOMAIN',
      "shop is not the default pod's namespace",
    );
  });

  test('every name NXDOMAIN: the first answer as it was, and coredns_autopath_success_total counts the walks that found something', async () => {
    const r = await from(SHOP_POD, 'nothing-here.shop.svc.cluster.local.', 'A');
    assert.equal(r.status, 'NXDOMAIN');
    assert.match(r.raw, /;nothing-here\.shop\.svc\.cluster\.local\.\s+IN\s+A\n/);
    const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    const m = new RegExp(`coredns_autopath_success_total\\{server="dns://:${s.port}"\\} (\\d+)`).exec(text);
    assert.ok(m !== null && Number(m[1]) >= 8, `success counted (${m?.[1]})`);
  });
});
