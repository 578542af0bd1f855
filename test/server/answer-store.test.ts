// The answer store: a producer's table holds one answer per (name, qtype slot); every held
// answer is found by the dependency keys it recorded and dropped from every holder at once; the
// bytes of kept answers live in slabs that are compacted once they hold mostly dropped answers.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { QType } from '../../src/dns/constants.js';
import { AnswerStore } from '../../src/server/answer-store.js';
import { PreparedAnswer, type AnswerHolder } from '../../src/server/prepared-reply.js';

function answer(name: string, qtype: number, text: string, deps: string[]): PreparedAnswer {
  const p = new PreparedAnswer(name, qtype, Buffer.from(text), 1, 0, 0, 0x0400, new Uint16Array([6]), 12);
  p.dependencies = deps;
  return p;
}

describe('prepared answers', () => {
  test('one name, several qtypes; other qtypes and names miss; AXFR is never kept', () => {
    const p = new AnswerStore().table();
    p.set(answer('a.ns.svc.cluster.local.', QType.A, 'A', ['s:ns/a']));
    assert.equal(p.get('a.ns.svc.cluster.local.', QType.A)?.body.toString(), 'A');
    assert.equal(p.get('a.ns.svc.cluster.local.', QType.SRV), undefined);
    p.set(answer('a.ns.svc.cluster.local.', QType.SRV, 'SRV', ['s:ns/a']));
    p.set(answer('a.ns.svc.cluster.local.', QType.MX, 'other', ['s:ns/a']));
    assert.equal(p.get('a.ns.svc.cluster.local.', QType.A)?.body.toString(), 'A');
    assert.equal(p.get('a.ns.svc.cluster.local.', QType.SRV)?.body.toString(), 'SRV');
    // Every type without a slot of its own shares the NODATA slot.
    assert.equal(p.get('a.ns.svc.cluster.local.', QType.HINFO)?.body.toString(), 'other');
    assert.equal(p.get('b.ns.svc.cluster.local.', QType.A), undefined);
    p.set(answer('a.ns.svc.cluster.local.', QType.AXFR, 'no', ['s:ns/a']));
    assert.equal(p.get('a.ns.svc.cluster.local.', QType.AXFR), undefined);
    // A new answer for a kept (name, qtype) replaces it.
    p.set(answer('a.ns.svc.cluster.local.', QType.A, 'A2', ['s:ns/a']));
    assert.equal(p.get('a.ns.svc.cluster.local.', QType.A)?.body.toString(), 'A2');
    assert.equal(p.size, 1);
  });

  test('a change to what answers were built from drops every name that recorded it, and nothing else', () => {
    const p = new AnswerStore().table();
    p.set(answer('a.ns.svc.cluster.local.', QType.A, '1', ['s:ns/a']));
    p.set(answer('_http._tcp.a.ns.svc.cluster.local.', QType.SRV, '2', ['s:ns/a']));
    p.set(answer('b.ns.svc.cluster.local.', QType.A, '3', ['s:ns/b']));
    assert.equal(p.store.dropDependencies(['s:ns/a']), 2);
    assert.equal(p.get('a.ns.svc.cluster.local.', QType.A), undefined);
    assert.equal(p.get('_http._tcp.a.ns.svc.cluster.local.', QType.SRV), undefined);
    assert.equal(p.get('b.ns.svc.cluster.local.', QType.A)?.body.toString(), '3');
    p.clear();
    assert.equal(p.size, 0);
  });

  test('kept bytes survive churn and compaction unchanged; the bound clears at maxNames', () => {
    const p = new AnswerStore().table(5_000);
    const text = (i: number) => `answer-${i}-`.padEnd(40 + (i % 50), 'x');
    // Keep 2,000 names, then churn: drop and re-add half of them many times over.
    for (let i = 0; i < 2_000; i++) p.set(answer(`n${i}.`, QType.A, text(i), [`s:${i}`]));
    for (let round = 0; round < 20; round++) {
      for (let i = round % 2; i < 2_000; i += 2) {
        p.store.dropDependencies([`s:${i}`]);
        p.set(answer(`n${i}.`, QType.A, text(i), [`s:${i}`]));
      }
    }
    for (let i = 0; i < 2_000; i++) assert.equal(p.get(`n${i}.`, QType.A)?.body.toString(), text(i), `n${i}`);
    // Large answers keep memory of their own.
    const big = 'y'.repeat(5_000);
    p.set(answer('big.', QType.SRV, big, ['s:big']));
    assert.equal(p.get('big.', QType.SRV)?.body.toString(), big);
    for (let i = 2_000; i < 5_000; i++) p.set(answer(`n${i}.`, QType.A, text(i), [`s:${i}`]));
    assert.equal(p.size, 1, 'at maxNames the answers are cleared, then the new one kept');
  });

  test('an answer a cache holds too is one object: dropped by its key from the table and the cache at once', () => {
    const store = new AnswerStore();
    const table = store.table();
    const a = answer('web.ns.svc.cluster.local.', QType.A, 'A', ['s:ns/web']);
    table.set(a);
    const dropped: PreparedAnswer[] = [];
    const cache: AnswerHolder = { answerDropped: (x) => dropped.push(x) };
    // A cache keeps what the table gave it: the same object, its bytes in the table's slab.
    const kept = table.get('web.ns.svc.cluster.local.', QType.A)!;
    assert.equal(kept, a);
    store.hold(kept, cache);
    assert.equal(store.dependencyCount, 1, 'indexed once, whoever holds it');
    // The table replaced or cleared lets go; the cache still holds the answer, still found by its key.
    table.clear();
    assert.equal(table.get('web.ns.svc.cluster.local.', QType.A), undefined);
    assert.equal(store.dependencyCount, 1);
    table.set(a);
    assert.equal(store.dropDependencies(['s:ns/web']), 1, 'one answer, however many hold it');
    assert.deepEqual(dropped, [a], 'the cache was told');
    assert.equal(table.get('web.ns.svc.cluster.local.', QType.A), undefined, 'the table let it go');
    assert.equal(store.dependencyCount, 0);
    assert.equal(a.holders, null);
  });

  test('a change while an answer was being built is remembered for it (changedSince), within a bound', () => {
    const store = new AnswerStore();
    const before = store.epoch;
    store.dropDependencies(['s:ns/web']);
    assert.equal(store.changedSince(['s:ns/web'], before), true);
    assert.equal(store.changedSince(['s:ns/db'], before), false);
    assert.equal(store.changedSince(['s:ns/web'], store.epoch), false, 'a trip that began after it');
    // Past the bound every older trip is refused rather than the keys remembered.
    const mid = store.epoch;
    for (let i = 0; i < 5_000; i++) store.dropDependencies([`s:ns/k${i}`]);
    assert.equal(store.changedSince(['s:ns/unrelated'], mid), true);
    assert.equal(store.changedSince(['s:ns/unrelated'], store.epoch), false);
  });
});
