// PreparedAnswers: one answer per (name, qtype), dropped by scope; the bytes of kept answers
// live in slabs that are compacted once they hold mostly dropped answers.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { QType } from '../../src/dns/constants.js';
import type { Prepared } from '../../src/plugins/kubernetes/answer.js';
import { PreparedAnswers } from '../../src/server/answer-store.js';
import { dependenciesOnly } from '../../src/server/invalidation.js';

function answer(text: string): Prepared {
  return {
    ...dependenciesOnly([]),
    rcode: 0,
    bytes: Buffer.from(text),
    an: 1,
    ns: 0,
    ar: 0,
    zone: 'cluster.local.',
    zoneAt: null,
    serialAt: -1,
    slot: -1,
  };
}

describe('prepared answers', () => {
  test('one name, several qtypes; other qtypes and names miss; AXFR is never kept', () => {
    const p = new PreparedAnswers();
    p.set('a.ns.svc.cluster.local.', QType.A, 's:ns/a', answer('A'));
    assert.equal(p.get('a.ns.svc.cluster.local.', QType.A)?.bytes.toString(), 'A');
    assert.equal(p.get('a.ns.svc.cluster.local.', QType.SRV), undefined);
    p.set('a.ns.svc.cluster.local.', QType.SRV, 's:ns/a', answer('SRV'));
    p.set('a.ns.svc.cluster.local.', QType.MX, 's:ns/a', answer('other'));
    assert.equal(p.get('a.ns.svc.cluster.local.', QType.A)?.bytes.toString(), 'A');
    assert.equal(p.get('a.ns.svc.cluster.local.', QType.SRV)?.bytes.toString(), 'SRV');
    // Every type without a slot of its own shares the NODATA slot.
    assert.equal(p.get('a.ns.svc.cluster.local.', QType.HINFO)?.bytes.toString(), 'other');
    assert.equal(p.get('b.ns.svc.cluster.local.', QType.A), undefined);
    p.set('a.ns.svc.cluster.local.', QType.AXFR, 's:ns/a', answer('no'));
    assert.equal(p.get('a.ns.svc.cluster.local.', QType.AXFR), undefined);
    // A new answer for a kept (name, qtype) replaces it.
    p.set('a.ns.svc.cluster.local.', QType.A, 's:ns/a', answer('A2'));
    assert.equal(p.get('a.ns.svc.cluster.local.', QType.A)?.bytes.toString(), 'A2');
    assert.equal(p.size, 1);
  });

  test('dropping a scope drops every name under it, and nothing else', () => {
    const p = new PreparedAnswers();
    p.set('a.ns.svc.cluster.local.', QType.A, 's:ns/a', answer('1'));
    p.set('_http._tcp.a.ns.svc.cluster.local.', QType.SRV, 's:ns/a', answer('2'));
    p.set('b.ns.svc.cluster.local.', QType.A, 's:ns/b', answer('3'));
    p.dropScope('s:ns/a');
    assert.equal(p.get('a.ns.svc.cluster.local.', QType.A), undefined);
    assert.equal(p.get('_http._tcp.a.ns.svc.cluster.local.', QType.SRV), undefined);
    assert.equal(p.get('b.ns.svc.cluster.local.', QType.A)?.bytes.toString(), '3');
    p.clear();
    assert.equal(p.size, 0);
  });

  test('kept bytes survive churn and compaction unchanged; the bound clears at maxNames', () => {
    const p = new PreparedAnswers(5_000);
    const text = (i: number) => `answer-${i}-`.padEnd(40 + (i % 50), 'x');
    // Keep 2,000 names, then churn: drop and re-add half of them many times over.
    for (let i = 0; i < 2_000; i++) p.set(`n${i}.`, QType.A, `s:${i}`, answer(text(i)));
    for (let round = 0; round < 20; round++) {
      for (let i = round % 2; i < 2_000; i += 2) {
        p.dropScope(`s:${i}`);
        p.set(`n${i}.`, QType.A, `s:${i}`, answer(text(i)));
      }
    }
    for (let i = 0; i < 2_000; i++) assert.equal(p.get(`n${i}.`, QType.A)?.bytes.toString(), text(i), `n${i}`);
    // Large answers keep memory of their own.
    const big = 'y'.repeat(5_000);
    p.set('big.', QType.SRV, 's:big', answer(big));
    assert.equal(p.get('big.', QType.SRV)?.bytes.toString(), big);
    for (let i = 2_000; i < 5_000; i++) p.set(`n${i}.`, QType.A, `s:${i}`, answer(text(i)));
    assert.equal(p.size, 1, 'at maxNames the answers are cleared, then the new one kept');
  });
});
