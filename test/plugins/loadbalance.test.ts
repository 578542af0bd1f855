import { test } from 'node:test';
import assert from 'node:assert/strict';
import { decodeMessage, emptyMessage, encodeMessage } from '../../src/dns/message.js';
import { QClass, QType } from '../../src/dns/constants.js';
import { shuffleWireAnswers } from '../../src/plugins/loadbalance/handler.js';

function reply(withCname: boolean): Buffer {
  const m = emptyMessage(5);
  m.qr = true;
  m.questions.push({ name: 'web.example.', type: QType.A, class: QClass.IN });
  const owner = withCname ? 'target.example.' : 'web.example.';
  if (withCname)
    m.answers.push({
      name: 'web.example.',
      type: QType.CNAME,
      class: QClass.IN,
      ttl: 30,
      data: { target: 'target.example.' },
    });
  for (let i = 1; i <= 8; i++)
    m.answers.push({
      name: owner,
      type: i % 2 ? QType.A : QType.AAAA,
      class: QClass.IN,
      ttl: 30,
      data: { address: i % 2 ? `10.0.0.${i}` : `fd00::${i}` },
    });
  return encodeMessage(m);
}

test('address records are shuffled in the wire form, CNAME first, every record intact', () => {
  for (const withCname of [false, true]) {
    const orders = new Set<string>();
    for (let k = 0; k < 30; k++) {
      const w = reply(withCname);
      const before = decodeMessage(w);
      assert.equal(shuffleWireAnswers(w, 12 + 13 + 4), true);
      const after = decodeMessage(w);
      if (withCname) assert.equal(after.answers[0]!.type, QType.CNAME);
      const key = (m: typeof after) =>
        m.answers
          .map((a) => JSON.stringify(a))
          .sort()
          .join('|');
      assert.equal(key(after), key(before));
      orders.add(after.answers.map((a) => (a.data as { address?: string }).address).join(','));
    }
    assert.ok(orders.size > 10, `only ${orders.size} orders`);
  }
});

test('a shape it cannot shuffle safely is left for the decoder', () => {
  const m = emptyMessage(5);
  m.qr = true;
  m.questions.push({ name: 'web.example.', type: QType.A, class: QClass.IN });
  m.answers.push({ name: 'other.test.', type: QType.A, class: QClass.IN, ttl: 30, data: { address: '10.0.0.1' } });
  m.answers.push({ name: 'other.test.', type: QType.A, class: QClass.IN, ttl: 30, data: { address: '10.0.0.2' } });
  const w = encodeMessage(m);
  assert.equal(shuffleWireAnswers(w, 12 + 13 + 4), false);
});
