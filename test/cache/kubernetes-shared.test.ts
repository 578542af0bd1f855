// cache in front of kubernetes is one answer path: the answer the cache keeps is the kubernetes
// plugin's own object (its bytes held once, not copied), the configuration's answer store indexes
// it once, and a change to anything it was built from (here an EndpointSlice) drops it from the
// plugin and the cache at once. What a client sees is unchanged: hits, misses, the SOA serial.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { QClass, QType, Rcode } from '../../src/dns/constants.js';
import { decodeMessage } from '../../src/dns/message.js';
import { finalizeReply } from '../../src/server/reply.js';
import { Response } from '../../src/server/request.js';
import { Invalidation } from '../../src/server/invalidation.js';
import { advanceClock, freezeClock } from '../../src/server/clock.js';
import { CacheHandler } from '../../src/plugins/cache/handler.js';
import { cacheOptionsFrom } from './harness.js';
import { makeRequest, rig } from '../kubernetes/harness.js';
import { namespace, sectionText, service, slice } from '../kubernetes/fixtures.js';

const Z = 'cluster.local.';
const SERVICES = 50;
const name = (i: number) => `svc-${i}.shop.svc.${Z}`;
const PODS = `pods.shop.svc.${Z}`;

/** `cache` in front of `kubernetes`, sharing one configuration's Invalidation, asked in-process. */
function cached() {
  const invalidation = new Invalidation();
  const objects = [namespace('shop')];
  for (let i = 0; i < SERVICES; i++) objects.push(service('shop', `svc-${i}`, [`10.96.0.${i + 1}`]));
  objects.push(service('shop', 'pods', 'None', [['http', 'TCP', 80]]));
  objects.push(slice('shop', 'pods-1', 'pods', 'IPv4', [{ ip: '10.244.0.1' }], [['http', 'TCP', 80]]));
  const k = rig('kubernetes cluster.local', objects, undefined, invalidation);
  const cache = new CacheHandler(cacheOptionsFrom('cache 60'));
  cache.start(invalidation);
  const next = () => Response.rcode(Rcode.SERVFAIL, 'next');
  const ask = async (qname: string, qtype: number = QType.A) => {
    const req = makeRequest(qname, qtype);
    const res = await cache.serveDNS(req, (r) => k.handler.serveDNS(r, next));
    return decodeMessage(finalizeReply(req, res));
  };
  return { invalidation, k, cache, ask };
}

describe('cache in front of kubernetes: one answer, held once', () => {
  test("the answer the cache keeps is the kubernetes plugin's own: one object, its bytes held once, indexed once", async () => {
    const { invalidation, k, cache, ask } = cached();
    try {
      for (let i = 0; i < SERVICES; i++) {
        assert.deepEqual(sectionText((await ask(name(i))).answers), [`${name(i)} 5 A 10.96.0.${i + 1}`]);
        assert.deepEqual(sectionText((await ask(name(i))).answers), [`${name(i)} 5 A 10.96.0.${i + 1}`]);
      }
      assert.equal(cache.counters.misses, SERVICES);
      assert.equal(cache.counters.hitsSuccess, SERVICES);
      for (let i = 0; i < SERVICES; i++) {
        const entry = cache.store.find(name(i), QType.A, QClass.IN, 0);
        const kept = k.handler.prepared.get(name(i), QType.A);
        assert.ok(entry !== null && kept !== undefined, name(i));
        assert.equal(entry.answer, kept, `${name(i)}: the cache entry refers to the plugin's answer, not a copy`);
      }
      assert.equal(invalidation.answers.dependencyCount, SERVICES, 'one key per Service, however many hold its answer');
    } finally {
      cache.stop();
    }
  });

  test('a change to an EndpointSlice drops the answer from the plugin and the cache at once', async () => {
    const { k, cache, ask } = cached();
    try {
      assert.deepEqual(sectionText((await ask(PODS)).answers), [`${PODS} 5 A 10.244.0.1`]);
      await ask(PODS);
      assert.equal(cache.counters.hitsSuccess, 1);
      const entries = cache.entries('success');
      k.apply([slice('shop', 'pods-1', 'pods', 'IPv4', [{ ip: '10.244.0.2' }], [['http', 'TCP', 80]])]);
      assert.equal(cache.store.find(PODS, QType.A, QClass.IN, 0), null, 'gone from the cache');
      assert.equal(k.handler.prepared.get(PODS, QType.A), undefined, 'gone from the plugin');
      assert.equal(cache.entries('success'), entries - 1, 'coredns_cache_entries counts it gone');
      assert.deepEqual(sectionText((await ask(PODS)).answers), [`${PODS} 5 A 10.244.0.2`]);
      assert.equal(cache.counters.misses, 2, 'the next asker was a miss, answered anew');
      assert.equal(cache.store.find(PODS, QType.A, QClass.IN, 0)?.answer, k.handler.prepared.get(PODS, QType.A));
    } finally {
      cache.stop();
    }
  });

  test('a NODATA answer from the cache carries the SOA serial it was stored with', async () => {
    const { k, cache, ask } = cached();
    try {
      k.index.serial = 1000;
      const first = await ask(name(0), QType.AAAA);
      k.index.serial = 2000;
      const hit = await ask(name(0), QType.AAAA);
      assert.equal(cache.counters.hitsDenial, 1);
      // The shared answer's bytes hold no serial: each reply writes the one it was sent with.
      assert.equal((first.authorities[0]!.data as { serial: number }).serial, 1000);
      assert.equal((hit.authorities[0]!.data as { serial: number }).serial, 1000);
      const fresh = await k.serve(makeRequest(name(0), QType.AAAA));
      assert.ok(!(fresh instanceof Promise));
      const now = decodeMessage(fresh.peekWire()!).authorities[0]!.data as { serial: number };
      assert.equal(now.serial, 2000, 'the plugin itself: the current serial');
    } finally {
      cache.stop();
    }
  });

  // Last: it stops the clock, which the tests above leave running.
  test('an expired entry asked again starts over as the same entry, with the current SOA serial', async () => {
    freezeClock();
    const { k, cache, ask } = cached();
    try {
      await ask(name(1));
      k.index.serial = 1000;
      await ask(name(1), QType.AAAA);
      const success = cache.store.find(name(1), QType.A, QClass.IN, 0);
      const denial = cache.store.find(name(1), QType.AAAA, QClass.IN, 0);
      assert.ok(success !== null && denial !== null);
      advanceClock(5_000); // both TTLs (5 s) run out
      k.index.serial = 2000;
      assert.deepEqual(sectionText((await ask(name(1))).answers), [`${name(1)} 5 A 10.96.0.2`]);
      const nodata = await ask(name(1), QType.AAAA);
      assert.equal((nodata.authorities[0]!.data as { serial: number }).serial, 2000);
      assert.equal(cache.counters.misses, 4, 'both were asked of the plugin again');
      // The same entries (nothing new to keep), still referring to the plugin's own answers.
      assert.equal(cache.store.find(name(1), QType.A, QClass.IN, 0), success);
      assert.equal(cache.store.find(name(1), QType.AAAA, QClass.IN, 0), denial);
      assert.equal(success.answer, k.handler.prepared.get(name(1), QType.A));
      advanceClock(2_000);
      const hit = await ask(name(1), QType.AAAA);
      assert.equal(cache.counters.hitsDenial, 1);
      assert.equal((hit.authorities[0]!.data as { serial: number }).serial, 2000, 'a hit: the serial of the refresh');
      assert.equal(hit.authorities[0]!.ttl, 3, 'its lifetime began at the refresh');
    } finally {
      cache.stop();
    }
  });
});
