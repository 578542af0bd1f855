// A rewritten answer is kept by the name the client asked (by rewrite itself, and by a cache in
// front of it), yet it goes when the Service it was built from changes: the real binary, a test
// API server and dig, a ClusterIP changed under a custom domain rewritten onto svc.cluster.local.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { KubeApiServer } from '../helpers/kubeapi.js';
import { startServer, type RunningServer } from '../helpers/server.js';
import { dig, type DigResult } from '../helpers/dns.js';
import { namespace, service } from '../kubernetes/fixtures.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Asks until `ok` holds or `ms` pass; returns the last answer. */
async function askUntil(ask: () => Promise<DigResult>, ok: (r: DigResult) => boolean, ms: number): Promise<DigResult> {
  const start = Date.now();
  let last = await ask();
  while (!ok(last) && Date.now() - start < ms) {
    await sleep(50);
    last = await ask();
  }
  return last;
}

const aData = (r: DigResult) =>
  r.answer
    .map((l) => l.split(' '))
    .filter((f) => f[3] === 'A')
    .map((f) => f[4]);

/** The answer section without TTLs (a cached record ages). */
const records = (r: DigResult) =>
  r.answer.map((l) =>
    l
      .split(' ')
      .filter((_, i) => i !== 1)
      .join(' '),
  );

const REWRITE = '    rewrite name regex (.*)\\.example\\.org {1}.svc.cluster.local answer auto\n';

for (const [label, front] of [
  ['rewrite in front of kubernetes', ''],
  ['cache in front of rewrite in front of kubernetes', '    cache 60\n'],
] as const) {
  describe(`${label}: a rewritten answer follows its Service`, () => {
    let api: KubeApiServer;
    let s: RunningServer;
    const A = (name: string, ...opts: string[]) => dig(s.port, [name, 'A', ...opts]);

    before(async () => {
      api = await KubeApiServer.create();
      api.apply(namespace('shop'));
      api.apply(service('shop', 'web', ['10.96.9.1'], [['http', 'TCP', 80]]));
      api.apply(service('shop', 'db', ['10.96.9.5'], [['pg', 'TCP', 5432]]));
      // TTL 60: an answer that changes within seconds was dropped, not expired.
      s = await startServer({
        corefile:
          `example.org:PORT {\n    bind 127.0.0.1\n${front}${REWRITE}` +
          `    kubernetes cluster.local {\n        endpoint ${api.url}\n        ttl 60\n    }\n}\n`,
      });
    });

    after(async () => {
      await s?.stop();
      await api?.close();
    });

    test('a new ClusterIP reaches the next asker of the rewritten name at once, not after the TTL', async () => {
      const first = await A('web.shop.example.org');
      assert.equal(first.status, 'NOERROR');
      assert.deepEqual(records(first), ['web.shop.example.org. IN A 10.96.9.1']);
      // Asked again (kept now), in other letters and without EDNS: the asker's question and no OPT.
      const again = await A('WEB.Shop.example.ORG', '+noedns');
      assert.deepEqual(records(again), ['WEB.Shop.example.ORG. IN A 10.96.9.1']);
      assert.ok(!again.raw.includes('OPT PSEUDOSECTION'), again.raw);
      assert.deepEqual(aData(await A('web.shop.example.org')), ['10.96.9.1']);

      api.apply(service('shop', 'web', ['10.96.9.2'], [['http', 'TCP', 80]]));
      const after = await askUntil(
        () => A('web.shop.example.org'),
        (r) => aData(r).join() === '10.96.9.2',
        2000,
      );
      assert.deepEqual(records(after), ['web.shop.example.org. IN A 10.96.9.2']);
      assert.deepEqual(aData(await A('WEB.Shop.example.ORG', '+noedns')), ['10.96.9.2']);
    });

    test('a Service that goes away takes its rewritten name with it (NXDOMAIN)', async () => {
      assert.deepEqual(aData(await A('db.shop.example.org')), ['10.96.9.5']);
      assert.deepEqual(aData(await A('db.shop.example.org')), ['10.96.9.5']);
      api.remove('Service', 'shop', 'db');
      const after = await askUntil(
        () => A('db.shop.example.org'),
        (r) => r.status === 'NXDOMAIN',
        2000,
      );
      assert.equal(after.status, 'NXDOMAIN');
      assert.deepEqual(after.answer, []);
    });
  });
}

describe('rewrite in front of acl: a kept answer never skips the acl for another client', () => {
  let api: KubeApiServer;
  let s: RunningServer;

  before(async () => {
    api = await KubeApiServer.create();
    api.apply(namespace('shop'));
    api.apply(service('shop', 'web', ['10.96.9.1'], [['http', 'TCP', 80]]));
    s = await startServer({
      corefile:
        `example.org:PORT {\n    bind 127.0.0.1\n${REWRITE}    acl cluster.local {\n        block net 127.0.0.2/32\n    }\n` +
        `    kubernetes cluster.local {\n        endpoint ${api.url}\n        ttl 60\n    }\n}\n`,
    });
  });

  after(async () => {
    await s?.stop();
    await api?.close();
  });

  test('127.0.0.1 gets the address, 127.0.0.2 REFUSED, each time', async () => {
    for (let i = 0; i < 3; i++) {
      assert.deepEqual(aData(await dig(s.port, ['web.shop.example.org', 'A'])), ['10.96.9.1']);
      const blocked = await dig(s.port, ['-b', '127.0.0.2', 'web.shop.example.org', 'A']);
      assert.equal(blocked.status, 'REFUSED');
      assert.deepEqual(blocked.answer, []);
    }
  });
});
