// The LIST body reader: items handed over one by one whatever the chunking, the rest kept.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ListItemScanner, ListSyntaxError } from '../../src/kube/list-stream.js';

const body = JSON.stringify({
  kind: 'ServiceList',
  apiVersion: 'v1',
  metadata: { resourceVersion: '42', continue: 'a"b\\c[' },
  items: [
    { metadata: { name: 'a', annotations: { x: '} ] { [ "q" \\' } }, spec: { ports: [{ port: 1 }, { port: 2 }] } },
    { metadata: { name: 'b' }, spec: {} },
    { metadata: { name: 'ü-é' }, list: [[1], [2, [3]]] },
  ],
});

function scan(chunks: string[]): { items: unknown[]; rest: unknown } {
  const items: unknown[] = [];
  const s = new ListItemScanner((t) => items.push(JSON.parse(t)), 1 << 20);
  for (const c of chunks) s.write(c);
  return { items, rest: s.end() };
}

test('every split of the body gives the same items and the same rest', () => {
  const whole = JSON.parse(body) as { items: unknown[] };
  const rest = { ...whole, items: [] };
  for (let i = 0; i <= body.length; i++) {
    const r = scan([body.slice(0, i), body.slice(i)]);
    assert.deepEqual(r.items, whole.items, `split at ${i}`);
    assert.deepEqual(r.rest, rest, `split at ${i}`);
  }
  const oneByOne = scan([...body]);
  assert.deepEqual(oneByOne.items, whole.items);
});

test('items may come before metadata; an empty list has no items', () => {
  const r = scan(['{"items":[{"a":1}],"metadata":{"resourceVersion":"7"}}']);
  assert.deepEqual(r.items, [{ a: 1 }]);
  assert.deepEqual(r.rest, { items: [], metadata: { resourceVersion: '7' } });
  assert.deepEqual(scan(['{"items":[],"metadata":{}}']).items, []);
});

test('a body cut short or an item over the limit is an error, not a partial list', () => {
  assert.throws(() => scan([body.slice(0, body.length - 3)]), ListSyntaxError);
  const s = new ListItemScanner(() => {}, 10);
  assert.throws(() => s.write('{"items":[{"name":"a-very-long-item-indeed"'), ListSyntaxError);
});
