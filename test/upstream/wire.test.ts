// The byte-level checks forward makes instead of decoding answers.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { QType } from '../../src/dns/constants.js';
import { answersQuestion, emptyTruncated, randomId, recordsFit } from '../../src/upstream/wire.js';
import { buildQuery } from '../helpers/dns.js';
import { answer } from '../forward/upstreams.js';

const qEnd = (q: Buffer) => {
  let p = 12;
  while (q[p] !== 0) p += 1 + q[p]!;
  return p + 5;
};

describe('forward wire checks', () => {
  it('matches the question ignoring ASCII case in the name only', () => {
    const q = buildQuery('WWW.Example.org.', QType.A);
    assert.ok(answersQuestion(answer(q, {}), q, qEnd(q)));
    assert.ok(answersQuestion(answer(q, { qname: 'www.EXAMPLE.ORG.' }), q, qEnd(q)));
    assert.ok(!answersQuestion(answer(q, { qname: 'www.example.net.' }), q, qEnd(q)));
    const other = buildQuery('WWW.Example.org.', QType.AAAA);
    assert.ok(!answersQuestion(answer(other, {}), q, qEnd(q)), 'another type');
    // Type 65 (0x41, "A") against type 97 (0x61, "a"): case folding must not reach the type.
    const t65 = buildQuery('x.org.', 65);
    const t97 = buildQuery('x.org.', 97);
    assert.ok(!answersQuestion(answer(t97, {}), t65, qEnd(t65)));
    const notResponse = answer(q, {});
    notResponse[2] = notResponse[2]! & 0x7f;
    assert.ok(!answersQuestion(notResponse, q, qEnd(q)));
  });

  it('walks record sections without decoding them', () => {
    const q = buildQuery('a.example.org.', QType.TXT);
    const ok = answer(q, { txt: ['hello', 'world'] });
    assert.ok(recordsFit(ok, qEnd(q)));
    assert.ok(!recordsFit(ok.subarray(0, ok.length - 3), qEnd(q)));
    const lying = Buffer.from(ok);
    lying.writeUInt16BE(9, 6);
    assert.ok(!recordsFit(lying, qEnd(q)));
    const tc = emptyTruncated(ok, qEnd(q));
    assert.equal(tc.length, qEnd(q));
    assert.equal(tc[2]! & 0x02, 0x02);
    assert.ok(recordsFit(tc, qEnd(q)));
  });

  it('draws IDs from the CSPRNG, spread over all 16 bits', () => {
    const seen = new Set<number>();
    let high = 0;
    for (let i = 0; i < 5000; i++) {
      const id = randomId();
      assert.ok(id >= 0 && id <= 0xffff);
      seen.add(id);
      if (id >= 0x8000) high++;
    }
    assert.ok(seen.size > 4700);
    assert.ok(high > 2200 && high < 2800);
  });
});
