// The kubernetes plugin's API client as a user sees it through the real binary and dig: a relist
// never answers from a half-applied state, a WatchList server is never LISTed, and an RBAC denial
// is named in the log and on /ready (kubernetes-quiet-watch.test.ts has the quiet watch). The
// test API server follows the Kubernetes documentation, "API Concepts" (https://kubernetes.io/docs/reference/using-api/api-concepts/).
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { KubeApiServer } from '../helpers/kubeapi.js';
import { startServer } from '../helpers/server.js';
import { dig } from '../helpers/dns.js';
import { freePort } from '../helpers/ports.js';
import { namespace, service } from '../kubernetes/fixtures.js';

const execFileP = promisify(execFile);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** One dig run asking A for every name; the addresses in order (+short). */
async function digShort(port: number, names: string[]): Promise<string[]> {
  const { stdout } = await execFileP(
    'dig',
    ['@127.0.0.1', '-p', String(port), '+short', '+tries=1', '+time=2', ...names.flatMap((n) => [n, 'A'])],
    { timeout: 10000 },
  );
  return stdout.split('\n').filter(Boolean);
}

async function waitUntil(cond: () => Promise<boolean> | boolean, what: string, ms: number): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await cond()) return;
    await sleep(50);
  }
  assert.fail(`not within ${ms} ms: ${what}`);
}

describe('kubernetes client through the binary', () => {
  // API Concepts › Retrieving large results sets in chunks; the relist is built aside (client-go's Replace).
  test('a slow, paged relist that fails half-way never answers from a mixed state', { timeout: 90000 }, async () => {
    const N = 1200;
    // No watch cache: lists are paged from storage, 500 a page.
    const api = await KubeApiServer.create({ watchCache: false, bookmarkIntervalMs: 0 });
    api.apply(namespace('default'));
    const ip = (gen: number, i: number) => `10.${gen}.${i >> 8}.${i & 255}`;
    for (let i = 0; i < N; i++) api.apply(service('default', `svc-${i}`, [ip(1, i)], [['http', 'TCP', 80]]));
    // One name from each end of each page (the server pages in key order).
    const keys = Array.from({ length: N }, (_, i) => `svc-${i}`).sort();
    const sample = [0, 250, 499, 500, 999, 1000, 1199].map((k) => keys[k]!);
    const names = sample.map((n) => `${n}.default.svc.cluster.local.`);
    const gen = (addresses: string[]) => new Set(addresses.map((a) => a.split('.')[1] ?? a));
    const s = await startServer({
      corefile: `cluster.local:PORT {\n    bind 127.0.0.1\n    kubernetes {\n        endpoint ${api.url}\n    }\n}\n`,
    });
    try {
      assert.deepEqual([...gen(await digShort(s.port, names))], ['1']);
      let pages = 0;
      api.pageDelayMs = 400;
      // The third page of every Services list fails.
      api.onRequest = (r) => {
        if (r.path === '/api/v1/services' && r.verb === 'list' && r.query.continue && ++pages % 2 === 0)
          api.failNext(1, 500, undefined, (x) => x === r);
      };
      const lists = api.requestCount('/api/v1/services', 'list');
      // While the API is away its history is compacted and every Service gets a new address.
      await api.stop();
      api.compact();
      for (let i = 0; i < N; i++) api.apply(service('default', `svc-${i}`, [ip(2, i)], [['http', 'TCP', 80]]));
      await api.start();
      const seen = new Set<string>();
      let rounds = 0;
      // Ask throughout two relists that each fail at their third page (pages counts continue pages).
      const until = Date.now() + 40_000;
      while (pages < 4 && Date.now() < until) {
        const answers = await digShort(s.port, names);
        assert.equal(answers.length, names.length, `every sampled name answers: ${answers.join(' ')}`);
        for (const g of gen(answers)) seen.add(g);
        rounds++;
      }
      assert.ok(
        pages >= 4 && api.requestCount('/api/v1/services', 'list') - lists >= 6,
        'two relists ran and failed meanwhile',
      );
      assert.deepEqual([...seen], ['1'], `only the old state answered, over ${rounds} rounds`);
      api.onRequest = undefined;
      await waitUntil(
        async () => (await digShort(s.port, names)).every((a) => a.startsWith('10.2.')),
        'the new state after a complete relist',
        15000,
      );
      assert.deepEqual([...gen(await digShort(s.port, names))], ['2']);
    } finally {
      api.onRequest = undefined;
      await s.stop();
      await api.close();
    }
  });

  // API Concepts › Streaming lists.
  test(
    'with a WatchList server nothing is LISTed; without one, one 422 per resource and an [INFO] line, then LISTs',
    { timeout: 60000 },
    async () => {
      for (const watchList of [true, false]) {
        const api = await KubeApiServer.create({ watchList, bookmarkIntervalMs: 0 });
        api.apply(namespace('default'));
        api.apply(service('default', 'web', ['10.96.0.50'], [['http', 'TCP', 80]]));
        const s = await startServer({
          corefile: `cluster.local:PORT {\n    bind 127.0.0.1\n    kubernetes {\n        endpoint ${api.url}\n    }\n}\n`,
        });
        try {
          const r = await dig(s.port, ['web.default.svc.cluster.local', 'A']);
          assert.deepEqual(
            r.answer.map((l) => l.split(' ').pop()),
            ['10.96.0.50'],
          );
          const paths = ['/api/v1/services', '/api/v1/namespaces', '/apis/discovery.k8s.io/v1/endpointslices'];
          for (const p of paths) {
            const reqs = api.requestLog.filter((x) => x.path === p);
            if (watchList) {
              assert.deepEqual(
                reqs.map((x) => [x.verb, x.status, x.query.sendInitialEvents]),
                [['watch', 200, 'true']],
                p,
              );
            } else {
              assert.deepEqual(
                reqs.map((x) => [x.verb, x.status]).slice(0, 3),
                [
                  ['watch', 422],
                  ['list', 200],
                  ['watch', 200],
                ],
                p,
              );
              assert.equal(reqs[1]!.query.resourceVersion, '0');
            }
          }
          if (!watchList)
            assert.match(
              s.output(),
              /\[INFO\] plugin\/kubernetes: .*\/api\/v1\/services: the server refused a streaming list .*; using LIST/,
            );
          assert.doesNotMatch(s.output(), /\[WARNING\]/);
          api.apply(service('default', 'web', ['10.96.0.51'], [['http', 'TCP', 80]]));
          await waitUntil(
            async () => (await digShort(s.port, ['web.default.svc.cluster.local.']))[0] === '10.96.0.51',
            'a change after the list',
            5000,
          );
        } finally {
          await s.stop();
          await api.close();
        }
      }
    },
  );

  // A 403 carries Kubernetes' Status body (the authorizer's "forbidden" message).
  test(
    'a missing RBAC permission is named, verb and resource, in the log and on /ready',
    { timeout: 60000 },
    async () => {
      const api = await KubeApiServer.create({ bookmarkIntervalMs: 0 });
      api.apply(namespace('default'));
      api.apply(service('default', 'web', ['10.96.0.50'], [['http', 'TCP', 80]]));
      api.deny('list', 'endpointslices');
      const readyPort = await freePort();
      const s = await startServer({
        corefile: `cluster.local:PORT {\n    bind 127.0.0.1\n    ready 127.0.0.1:${readyPort}\n    kubernetes {\n        endpoint ${api.url}\n    }\n}\n`,
      });
      try {
        await s.waitFor('forbidden: cannot list endpointslices.discovery.k8s.io', 15000);
        assert.match(
          s.output(),
          /\[WARNING\] plugin\/kubernetes: .*\/apis\/discovery\.k8s\.io\/v1\/endpointslices: forbidden: cannot list endpointslices\.discovery\.k8s\.io \(endpointslices\.discovery\.k8s\.io is forbidden: User "system:serviceaccount:kube-system:coredns" cannot list resource "endpointslices" in API group "discovery\.k8s\.io" at the cluster scope\)/,
        );
        const res = await fetch(`http://127.0.0.1:${readyPort}/ready`);
        const body = await res.text();
        assert.equal(res.status, 503);
        const lines = body.split('\n');
        assert.equal(lines[0], 'kubernetes', "the first line is CoreDNS's list of names");
        assert.match(lines[1] ?? '', /^kubernetes: forbidden: cannot list endpointslices\.discovery\.k8s\.io /);
        api.allow('list', 'endpointslices');
        await waitUntil(
          async () => (await fetch(`http://127.0.0.1:${readyPort}/ready`)).status === 200,
          'ready once granted',
          40000,
        );
        const r = await dig(s.port, ['web.default.svc.cluster.local', 'A']);
        assert.deepEqual(
          r.answer.map((l) => l.split(' ').pop()),
          ['10.96.0.50'],
        );
      } finally {
        await s.stop();
        await api.close();
      }
    },
  );
});
