// An answer kept by `cache` in front of `kubernetes` goes when anything it was built from changes,
// not only its own name: an ExternalName's answer carries its in-cluster target's addresses, so a
// change to the target Service (its ClusterIP, its EndpointSlices) must reach the next asker of the
// ExternalName well within the TTL, with the real binary, a test API server and dig.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { KubeApiServer } from '../helpers/kubeapi.js';
import { startServer, type RunningServer } from '../helpers/server.js';
import { dig, type DigResult } from '../helpers/dns.js';
import { externalService, namespace, service, slice } from '../kubernetes/fixtures.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Asks with dig until `ok` holds or `ms` pass; returns the last answer. */
async function askUntil(ask: () => Promise<DigResult>, ok: (r: DigResult) => boolean, ms: number): Promise<DigResult> {
  const start = Date.now();
  let last = await ask();
  while (!ok(last) && Date.now() - start < ms) {
    await sleep(50);
    last = await ask();
  }
  return last;
}

/** The answer section without TTLs (a record from the cache has aged by a second or two). */
const records = (r: DigResult) =>
  r.answer.map((l) =>
    l
      .split(' ')
      .filter((_, i) => i !== 1)
      .join(' '),
  );

const aData = (r: DigResult) =>
  r.answer
    .map((l) => l.split(' '))
    .filter((f) => f[3] === 'A')
    .map((f) => f[4]);

describe('cache in front of kubernetes: an answer goes when what it was built from changes', () => {
  let api: KubeApiServer;
  let s: RunningServer;
  const A = (name: string) => dig(s.port, [name, 'A']);

  before(async () => {
    api = await KubeApiServer.create();
    api.apply(namespace('shop'));
    api.apply(service('shop', 'target', ['10.96.7.1'], [['http', 'TCP', 80]]));
    api.apply(externalService('shop', 'alias', 'target.shop.svc.cluster.local'));
    api.apply(service('shop', 'pods', 'None', [['http', 'TCP', 80]]));
    api.apply(slice('shop', 'pods-1', 'pods', 'IPv4', [{ ip: '10.244.7.1' }], [['http', 'TCP', 80]]));
    api.apply(externalService('shop', 'podalias', 'pods.shop.svc.cluster.local'));
    api.apply(externalService('shop', 'hop', 'alias.shop.svc.cluster.local'));
    // TTL 60 everywhere: whatever the cache serves after a change within seconds, it did not expire.
    s = await startServer({
      corefile:
        `.:PORT {\n    bind 127.0.0.1\n    cache 60\n` +
        `    kubernetes cluster.local {\n        endpoint ${api.url}\n        ttl 60\n    }\n}\n`,
    });
  });

  after(async () => {
    await s?.stop();
    await api?.close();
  });

  test("an ExternalName's answer follows its target Service's new ClusterIP at once, not after the TTL", async () => {
    const first = await A('alias.shop.svc.cluster.local');
    assert.equal(first.status, 'NOERROR');
    assert.deepEqual(records(first), [
      'alias.shop.svc.cluster.local. IN CNAME target.shop.svc.cluster.local.',
      'target.shop.svc.cluster.local. IN A 10.96.7.1',
    ]);
    const cached = await A('alias.shop.svc.cluster.local');
    assert.deepEqual(aData(cached), ['10.96.7.1']);
    assert.ok(cached.answer.every((l) => Number(l.split(' ')[1]) <= 60));

    api.apply(service('shop', 'target', ['10.96.7.2'], [['http', 'TCP', 80]]));
    // The target itself changes within a second (its own names are invalidated)...
    const target = await askUntil(
      () => A('target.shop.svc.cluster.local'),
      (r) => aData(r).join() === '10.96.7.2',
      2000,
    );
    assert.deepEqual(aData(target), ['10.96.7.2']);
    // ...and so does the alias that embeds its address, though its own Service did not change.
    const after = await askUntil(
      () => A('alias.shop.svc.cluster.local'),
      (r) => aData(r).join() === '10.96.7.2',
      2000,
    );
    assert.deepEqual(records(after), [
      'alias.shop.svc.cluster.local. IN CNAME target.shop.svc.cluster.local.',
      'target.shop.svc.cluster.local. IN A 10.96.7.2',
    ]);
  });

  test('an alias of an alias follows the last target too', async () => {
    const first = await A('hop.shop.svc.cluster.local');
    assert.deepEqual(records(first).slice(0, 2), [
      'hop.shop.svc.cluster.local. IN CNAME alias.shop.svc.cluster.local.',
      'alias.shop.svc.cluster.local. IN CNAME target.shop.svc.cluster.local.',
    ]);
    const before = aData(first);
    assert.equal(before.length, 1);
    const next = before[0] === '10.96.7.3' ? '10.96.7.4' : '10.96.7.3';
    api.apply(service('shop', 'target', [next], [['http', 'TCP', 80]]));
    const after = await askUntil(
      () => A('hop.shop.svc.cluster.local'),
      (r) => aData(r).join() === next,
      2000,
    );
    assert.deepEqual(aData(after), [next]);
  });

  test("an ExternalName of a headless Service follows the target's EndpointSlice", async () => {
    const first = await A('podalias.shop.svc.cluster.local');
    assert.deepEqual(aData(first), ['10.244.7.1']);
    api.apply(slice('shop', 'pods-1', 'pods', 'IPv4', [{ ip: '10.244.7.9' }], [['http', 'TCP', 80]]));
    const after = await askUntil(
      () => A('podalias.shop.svc.cluster.local'),
      (r) => aData(r).join() === '10.244.7.9',
      2000,
    );
    assert.deepEqual(aData(after), ['10.244.7.9']);
  });

  test('an ExternalName whose target goes away answers without the old address', async () => {
    assert.equal(aData(await A('podalias.shop.svc.cluster.local')).length, 1);
    api.remove('Service', 'shop', 'pods');
    const after = await askUntil(
      () => A('podalias.shop.svc.cluster.local'),
      (r) => aData(r).length === 0,
      2000,
    );
    assert.deepEqual(aData(after), []);
  });
});

describe('cache in front of kubernetes across a reload', () => {
  test("the new configuration's cache is the one the watch keeps coherent (the watch outlives the reload)", async () => {
    const api = await KubeApiServer.create();
    api.apply(namespace('shop'));
    api.apply(service('shop', 'target', ['10.96.8.1']));
    api.apply(externalService('shop', 'alias', 'target.shop.svc.cluster.local'));
    const conf = (cacheTtl: number) =>
      `.:PORT {\n    bind 127.0.0.1\n    reload 1h\n    cache ${cacheTtl}\n` +
      `    kubernetes cluster.local {\n        endpoint ${api.url}\n        ttl 60\n    }\n}\n`;
    const s = await startServer({ corefile: conf(60) });
    try {
      const A = (name: string) => dig(s.port, [name, 'A']);
      assert.deepEqual(aData(await A('alias.shop.svc.cluster.local')), ['10.96.8.1']);
      writeFileSync(s.corefile, conf(50).replaceAll('PORT', String(s.port)));
      s.proc.kill('SIGUSR1');
      // The new cache (max TTL 50) answers once the reload is done.
      const reloaded = await askUntil(
        () => A('alias.shop.svc.cluster.local'),
        (r) => r.answer.length > 0 && r.answer.every((l) => Number(l.split(' ')[1]) <= 50),
        5000,
      );
      assert.ok(
        reloaded.answer.every((l) => Number(l.split(' ')[1]) <= 50),
        'the reload took effect',
      );
      assert.deepEqual(aData(await A('alias.shop.svc.cluster.local')), ['10.96.8.1'], 'kept by the new cache');
      api.apply(service('shop', 'target', ['10.96.8.2']));
      const after = await askUntil(
        () => A('alias.shop.svc.cluster.local'),
        (r) => aData(r).join() === '10.96.8.2',
        2000,
      );
      assert.deepEqual(aData(after), ['10.96.8.2']);
    } finally {
      await s.stop();
      await api.close();
    }
  });
});
