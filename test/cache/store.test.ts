// The bounded store: capacity, SIEVE eviction, dead entries first, sweeping, and the name
// tree behind invalidation.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { CacheEntry, CacheStore, EntryKind, parentName, SWEEP_REMOVAL_COST } from '../../src/plugins/cache/store.js';
import { PreparedAnswer } from '../../src/server/prepared-reply.js';
import { AnswerStore } from '../../src/server/answer-store.js';

/** An answer to (name, qtype) with `body` as its records and `deps` as what it was built from. */
function answer(name: string, qtype = 1, body = Buffer.alloc(0), deps: string[] = []): PreparedAnswer {
  const a = new PreparedAnswer(name, qtype, body, 0, 0, 0, 0x8180, new Uint16Array(0), 12);
  a.dependencies = deps;
  return a;
}

const noEviction = (): void => {};

function entry(
  name: string,
  qtype = 1,
  kind = EntryKind.Success,
  lifetimeMs = 60_000,
  storedMs = 0,
  body = Buffer.alloc(0),
): CacheEntry {
  return new CacheEntry(
    name,
    qtype,
    1,
    0,
    kind,
    answer(name, qtype, body),
    Math.floor(lifetimeMs / 1000),
    storedMs,
    lifetimeMs,
  );
}

describe('cache store', () => {
  test('parent names walk up to the root, escaped dots included', () => {
    assert.equal(parentName('a.b.example.'), 'b.example.');
    assert.equal(parentName('example.'), '.');
    assert.equal(parentName('.'), null);
    assert.equal(parentName('a\\.b.example.'), 'example.');
  });

  test('big answers are bounded in bytes: both queues together stay under maxBytes, every eviction reported', () => {
    const s = new CacheStore(
      { successCapacity: 10_000, denialCapacity: 10_000, maxBytes: 1_000_000 },
      new AnswerStore(),
    );
    const evicted: EntryKind[] = [];
    const big = Buffer.alloc(60_000);
    for (let i = 0; i < 100; i++)
      assert.equal(
        s.insert(entry(`big${i}.example.`, 16, EntryKind.Success, 60_000, 0, big), -1, (k) => evicted.push(k)),
        true,
      );
    assert.ok(s.bytes <= 1_000_000, `${s.bytes} bytes`);
    assert.equal(s.size(EntryKind.Success), 16, '16 entries of 60 KB fit in 1 MB');
    assert.equal(evicted.length, 100 - 16);
    // Small denials push out big successes: the queue holding more bytes gives them up.
    for (let i = 0; i < 1000; i++)
      s.insert(entry(`nx${i}.example.`, 1, EntryKind.Denial, 60_000, 0, Buffer.alloc(100)), -1, (k) => evicted.push(k));
    assert.ok(s.bytes <= 1_000_000);
    assert.ok(evicted.filter((k) => k === EntryKind.Success).length > 84, 'big successes made room');
    // One answer bigger than the whole budget is not stored at all, and evicts nothing.
    const before = evicted.length;
    assert.equal(
      s.insert(entry('huge.example.', 16, EntryKind.Success, 60_000, 0, Buffer.alloc(1_000_001)), -1, (k) =>
        evicted.push(k),
      ),
      false,
    );
    assert.equal(evicted.length, before);
    assert.equal(s.find('huge.example.', 16, 1, 0), null);
  });

  test('a queue never holds more than its capacity, and each overflow evicts one entry', () => {
    const s = new CacheStore({ successCapacity: 100, denialCapacity: 10, maxBytes: Infinity }, new AnswerStore());
    let evictions = 0;
    for (let i = 0; i < 1000; i++) s.insert(entry(`n${i}.example.`), -1, () => evictions++);
    for (let i = 0; i < 50; i++) s.insert(entry(`d${i}.example.`, 1, EntryKind.Denial), -1, noEviction);
    assert.equal(s.size(EntryKind.Success), 100);
    assert.equal(s.size(EntryKind.Denial), 10);
    assert.equal(evictions, 900);
  });

  test('room: under half of the queue and under half of the bytes; the other queue does not count', () => {
    const s = new CacheStore({ successCapacity: 8, denialCapacity: 8, maxBytes: 1_000_000 }, new AnswerStore());
    for (let i = 0; i < 3; i++) s.insert(entry(`r${i}.example.`), -1, noEviction);
    assert.equal(s.hasRoom(EntryKind.Success), true, '3 of 8');
    s.insert(entry('r3.example.'), -1, noEviction);
    assert.equal(s.hasRoom(EntryKind.Success), false, '4 of 8 is half');
    assert.equal(s.hasRoom(EntryKind.Denial), true, 'the denial queue is empty');
    const b = new CacheStore({ successCapacity: 1000, denialCapacity: 1000, maxBytes: 100_000 }, new AnswerStore());
    b.insert(entry('big.example.', 16, EntryKind.Denial, 60_000, 0, Buffer.alloc(50_000)), -1, noEviction);
    assert.ok(b.bytes * 2 >= 100_000, `${b.bytes} bytes`);
    assert.equal(b.hasRoom(EntryKind.Success), false, 'half the bytes, whichever queue holds them');
  });

  test('SIEVE keeps entries that were hit over entries that were not', () => {
    const s = new CacheStore({ successCapacity: 10, denialCapacity: 10, maxBytes: Infinity }, new AnswerStore());
    const hot: CacheEntry[] = [];
    for (let i = 0; i < 10; i++) {
      const e = entry(`n${i}.`);
      s.insert(e, -1, noEviction);
      if (i % 2 === 0) hot.push(e);
    }
    for (const e of hot) e.visited = true; // what a hit does
    for (let i = 10; i < 15; i++) s.insert(entry(`n${i}.`), -1, noEviction);
    for (const e of hot) assert.equal(s.find(e.name, 1, 1, 0), e, `${e.name} was evicted although it was hit`);
    for (let i = 1; i < 10; i += 2) assert.equal(s.find(`n${i}.`, 1, 1, 0), null);
  });

  test('the hand evicts an entry past its TTL on sight, even one that was hit', () => {
    const s = new CacheStore({ successCapacity: 3, denialCapacity: 3, maxBytes: Infinity }, new AnswerStore());
    const all = [
      entry('a.', 1, EntryKind.Success, 60_000),
      entry('b.', 1, EntryKind.Success, 1_000),
      entry('c.', 1, EntryKind.Success, 60_000),
    ];
    for (const e of all) {
      s.insert(e, 0, noEviction);
      e.visited = true;
    }
    s.insert(entry('d.', 1, EntryKind.Success, 60_000), 5_000, noEviction); // at t=5s, b. is dead
    assert.equal(s.find('b.', 1, 1, 0), null);
    assert.ok(s.find('a.', 1, 1, 0));
    assert.ok(s.find('c.', 1, 1, 0));
  });

  test('sweeping removes dead entries so they do not pile up', () => {
    const s = new CacheStore(
      { successCapacity: 10_000, denialCapacity: 10_000, maxBytes: Infinity },
      new AnswerStore(),
    );
    for (let i = 0; i < 5000; i++) s.insert(entry(`short${i}.`, 1, EntryKind.Success, 5_000), -1, noEviction);
    for (let i = 0; i < 5000; i++) s.insert(entry(`long${i}.`, 1, EntryKind.Denial, 500_000), -1, noEviction);
    let removed = 0;
    for (let pass = 0; pass < 10; pass++) removed += s.sweep(6_000, 1024);
    assert.equal(removed, 5000);
    assert.equal(s.size(EntryKind.Success), 0);
    assert.equal(s.size(EntryKind.Denial), 5000);
  });

  test('a sweep round goes in bounded steps, resuming where the last stopped', () => {
    const s = new CacheStore(
      { successCapacity: 200_000, denialCapacity: 10_000, maxBytes: Infinity },
      new AnswerStore(),
    );
    for (let i = 0; i < 100_000; i++)
      s.insert(entry(`n${i}.`, 1, EntryKind.Success, i % 2 === 0 ? 5_000 : 500_000), -1, noEviction);
    s.beginSweep(100_000);
    let removed = 0;
    let steps = 0;
    while (s.sweeping) {
      const r = s.sweepStep(6_000, 512);
      // 512 units: a visit is one, a removal SWEEP_REMOVAL_COST more.
      assert.ok(r <= Math.ceil(512 / (1 + SWEEP_REMOVAL_COST)), `one step removed ${r}`);
      removed += r;
      steps++;
    }
    assert.equal(removed, 50_000);
    assert.equal(s.size(EntryKind.Success), 50_000);
    // A step stops once past 512 units: by at most one removal's cost.
    assert.ok(steps >= (50_000 * (1 + SWEEP_REMOVAL_COST) + 50_000) / (512 + SWEEP_REMOVAL_COST), `${steps} steps`);
    // The next round with a smaller budget visits only that many: nothing dead is left to find.
    s.beginSweep(1000);
    assert.equal(s.sweepStep(1_000_000, 1e9), 1000);
    assert.equal(s.sweeping, false);
  });

  test('one entry per key: storing again replaces, a denial replaces a success', () => {
    const s = new CacheStore({ successCapacity: 10, denialCapacity: 10, maxBytes: Infinity }, new AnswerStore());
    s.insert(entry('x.'), -1, noEviction);
    s.insert(entry('x.'), -1, noEviction);
    assert.equal(s.size(EntryKind.Success), 1);
    s.insert(entry('x.', 1, EntryKind.Denial), -1, noEviction);
    assert.equal(s.size(EntryKind.Success), 0);
    assert.equal(s.size(EntryKind.Denial), 1);
  });

  test("a refresh takes the old entry's place in its name's node: nothing in the tree is built again", () => {
    const s = new CacheStore({ successCapacity: 1, denialCapacity: 10, maxBytes: Infinity }, new AnswerStore());
    const first = entry('a.b.example.');
    s.insert(first, -1, noEviction);
    const node = first.node;
    const parent = node?.parent;
    const names = s.nameCount;
    // Pruning the old entry's node and building it again would leave old-generation garbage at
    // every TTL's end (the node, its list, its parent's set, the name map's slot).
    const again = entry('a.b.example.');
    s.insert(again, -1, noEviction);
    assert.ok(node !== null && again.node === node, 'the same node');
    assert.equal(again.node.parent, parent);
    assert.equal(first.node, null);
    assert.deepEqual(again.node.entries, [again]);
    assert.equal(s.nameCount, names);
    assert.equal(s.find('a.b.example.', 1, 1, 0), again);
    // The queue is full: another type of the same name evicts the name's only entry, and the
    // node stays for the newcomer.
    let evictions = 0;
    const aaaa = entry('a.b.example.', 28);
    s.insert(aaaa, -1, () => evictions++);
    assert.equal(evictions, 1);
    assert.equal(aaaa.node, node);
    assert.equal(s.find('a.b.example.', 28, 1, 0), aaaa);
    assert.equal(s.find('a.b.example.', 1, 1, 0), null);
    assert.equal(s.nameCount, names);
    assert.equal(s.dropNames(['a.b.example.']), 1);
    assert.equal(s.nameCount, 1, 'only the root is left');
  });

  test('dropNames drops every entry of a name and nothing else; empty names leave the tree', () => {
    const s = new CacheStore({ successCapacity: 100, denialCapacity: 100, maxBytes: Infinity }, new AnswerStore());
    s.insert(entry('web.default.svc.cluster.local.', 1), -1, noEviction);
    s.insert(entry('web.default.svc.cluster.local.', 28), -1, noEviction);
    s.insert(entry('web.default.svc.cluster.local.', 33, EntryKind.Denial), -1, noEviction);
    s.insert(entry('db.default.svc.cluster.local.', 1), -1, noEviction);
    assert.equal(s.dropNames(['web.default.svc.cluster.local.']), 3);
    assert.equal(s.find('web.default.svc.cluster.local.', 1, 1, 0), null);
    assert.ok(s.find('db.default.svc.cluster.local.', 1, 1, 0));
    assert.equal(s.dropNames(['db.default.svc.cluster.local.']), 1);
    assert.equal(s.nameCount, 1, 'only the root is left');
  });

  test('dropSuffix drops everything under a name, and only that', () => {
    const s = new CacheStore({ successCapacity: 100, denialCapacity: 100, maxBytes: Infinity }, new AnswerStore());
    s.insert(entry('web.default.svc.cluster.local.'), -1, noEviction);
    s.insert(entry('_http._tcp.web.default.svc.cluster.local.', 33, EntryKind.Denial), -1, noEviction);
    s.insert(entry('pod-1.web.default.svc.cluster.local.'), -1, noEviction);
    s.insert(entry('web.other.svc.cluster.local.'), -1, noEviction);
    s.insert(entry('default.svc.cluster.local.'), -1, noEviction);
    assert.equal(s.dropSuffix('web.default.svc.cluster.local.'), 3);
    assert.ok(s.find('default.svc.cluster.local.', 1, 1, 0));
    assert.ok(s.find('web.other.svc.cluster.local.', 1, 1, 0));
    assert.equal(s.dropSuffix('nothing.here.'), 0);
    assert.equal(s.dropSuffix('cluster.local.'), 2);
    assert.equal(s.nameCount, 1);
  });

  test('invalidating a name costs O(its entries), not O(cache)', () => {
    const s = new CacheStore({ successCapacity: 200_000, denialCapacity: 10, maxBytes: Infinity }, new AnswerStore());
    for (let i = 0; i < 200_000; i++) s.insert(entry(`svc${i}.ns${i % 100}.svc.cluster.local.`), -1, noEviction);
    const t0 = process.hrtime.bigint();
    let dropped = 0;
    for (let i = 0; i < 20_000; i++) dropped += s.dropNames([`svc${i}.ns${i % 100}.svc.cluster.local.`]);
    const perCallUs = Number(process.hrtime.bigint() - t0) / 1000 / 20_000;
    assert.equal(dropped, 20_000);
    // A scan of 200k entries per call would take milliseconds; an index lookup takes about a microsecond.
    assert.ok(perCallUs < 100, `dropNames took ${perCallUs.toFixed(1)} µs per call`);
    const t1 = process.hrtime.bigint();
    const underOne = s.dropSuffix('ns7.svc.cluster.local.');
    const suffixMs = Number(process.hrtime.bigint() - t1) / 1e6;
    assert.equal(underOne, 1800);
    assert.ok(suffixMs < 50, `dropSuffix took ${suffixMs.toFixed(1)} ms`);
  });

  test('an entry whose answer recorded what it was built from goes when any of it changes, and leaves no trace', () => {
    const answers = new AnswerStore();
    const s = new CacheStore({ successCapacity: 100, denialCapacity: 100, maxBytes: Infinity }, answers);
    const withDeps = (name: string, deps: string[], qtype = 1) =>
      new CacheEntry(name, qtype, 1, 0, EntryKind.Success, answer(name, qtype, Buffer.alloc(0), deps), 60, 0, 60_000);
    s.insert(withDeps('alias.ns.svc.cluster.local.', ['s:ns/alias', 's:ns/web']), -1, noEviction);
    s.insert(withDeps('web.ns.svc.cluster.local.', ['s:ns/web']), -1, noEviction);
    s.insert(withDeps('web.ns.svc.cluster.local.', ['s:ns/web'], 28), -1, noEviction);
    s.insert(withDeps('db.ns.svc.cluster.local.', ['s:ns/db']), -1, noEviction);
    s.insert(entry('example.org.'), -1, noEviction);
    assert.equal(answers.dependencyCount, 3);
    assert.equal(answers.dropDependencies(['s:ns/web', 's:ns/alias']), 3, 'each answer counted once');
    assert.equal(s.find('alias.ns.svc.cluster.local.', 1, 1, 0), null);
    assert.equal(s.find('web.ns.svc.cluster.local.', 28, 1, 0), null);
    assert.ok(s.find('db.ns.svc.cluster.local.', 1, 1, 0));
    assert.ok(s.find('example.org.', 1, 1, 0));
    assert.equal(s.size(EntryKind.Success), 2);
    assert.equal(answers.dependencyCount, 1, 'keys of dropped answers are forgotten');
    // Removed any other way (by name, replaced, evicted), an entry lets go of its answer.
    s.insert(withDeps('db.ns.svc.cluster.local.', ['s:ns/db2']), -1, noEviction);
    assert.equal(answers.dropDependencies(['s:ns/db']), 0, 'the replaced entry is not found by its old key');
    s.dropNames(['db.ns.svc.cluster.local.']);
    assert.equal(answers.dependencyCount, 0);
  });
});
