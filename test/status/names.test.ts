// The top-names sketch: heavy hitters found among many distinct names in fixed memory,
// counts within Space-Saving's bound, and decay that lets today's names replace yesterday's.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { QueryNames, TOP_SLOTS, TopNames } from '../../src/status/names.js';

describe('top names sketch', () => {
  test('finds the names asked most among 100k queries for 20k distinct names, holding only 64', () => {
    const s = new TopNames();
    const truth = new Map<string, number>();
    let seed = 7;
    const rand = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const add = (n: string) => {
      s.add(n);
      truth.set(n, (truth.get(n) ?? 0) + 1);
    };
    for (let i = 0; i < 100_000; i++) {
      const r = rand();
      if (r < 0.2) add('kubernetes.default.svc.cluster.local.');
      else if (r < 0.3) add('api.example.com.');
      else if (r < 0.35) add('metrics.kube-system.svc.cluster.local.');
      else add(`x${Math.floor(rand() * 20_000)}.random.example.`);
    }
    assert.equal(s.size, TOP_SLOTS);
    const top = s.top(3).map((e) => e.name);
    assert.deepEqual(top, [
      'kubernetes.default.svc.cluster.local.',
      'api.example.com.',
      'metrics.kube-system.svc.cluster.local.',
    ]);
    // Space-Saving's bound: no count is off by more than the smallest slot (at most total/slots).
    for (const e of s.top(3))
      assert.ok(
        Math.abs(e.count - truth.get(e.name)!) <= 100_000 / TOP_SLOTS,
        `${e.name}: ${e.count} vs ${truth.get(e.name)}`,
      );
    assert.equal(s.total, 100_000);
    // Every query is counted somewhere: the slots sum to the total.
    assert.equal(
      s.top().reduce((a, e) => a + e.count, 0),
      100_000,
    );
  });

  test('decay halves counts, and a name that stopped being asked gives way to one asked now', () => {
    const s = new TopNames(4);
    for (let i = 0; i < 100; i++) s.add('old.example.');
    for (const n of ['b.', 'c.', 'd.']) s.add(n);
    s.decay(0.5);
    assert.equal(s.top(1)[0]!.count, 50);
    assert.equal(s.total, 51.5);
    for (let i = 0; i < 20; i++) s.decay(0.5);
    for (let i = 0; i < 10; i++) s.add('new.example.');
    assert.equal(s.top(1)[0]!.name, 'new.example.');
    assert.ok(s.size <= 4);
  });

  test('NXDOMAIN answers are counted in their own list as well as among all names', () => {
    const q = new QueryNames();
    q.record('a.example.', 0);
    q.record('gone.example.', 3);
    q.record('gone.example.', 3);
    assert.deepEqual(
      q.nxdomain.top().map((e) => [e.name, e.count]),
      [['gone.example.', 2]],
    );
    assert.deepEqual(
      q.all.top().map((e) => e.name),
      ['gone.example.', 'a.example.'],
    );
    q.age(60);
    assert.equal(q.nxdomain.top()[0]!.count, 1);
  });
});
