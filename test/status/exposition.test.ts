// Reading the metrics text back: prom-client's own output, label escapes included, parses
// to the values that were set.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Gauge, Registry } from 'prom-client';
import { parseExposition, parseSampleLine } from '../../src/status/exposition.js';

test('prom-client text parses back to the same samples, escaped label values included', async () => {
  const reg = new Registry();
  const g = new Gauge({
    name: 'clusterdns_status_top_names',
    help: 'h',
    labelNames: ['kind', 'name'],
    registers: [reg],
  });
  const odd = [
    'quote"d.example.',
    'back\\slash.example.',
    'new\nline.example.',
    'sp ace,comma}brace.example.',
    '<script>x</script>.test.',
  ];
  odd.forEach((name, i) => g.set({ kind: 'query', name }, i + 0.5));
  new Gauge({ name: 'other_metric', help: 'skipped', registers: [reg] }).set(1);
  const m = parseExposition(await reg.metrics(), (n) => n.startsWith('clusterdns_'));
  assert.deepEqual([...m.keys()], ['clusterdns_status_top_names']);
  assert.deepEqual(
    m.get('clusterdns_status_top_names')!.map((s) => [s.labels.name, s.value]),
    odd.map((name, i) => [name, i + 0.5]),
  );
});

test('special values, timestamps, comments and malformed lines', () => {
  assert.equal(parseSampleLine('x{le="+Inf"} +Inf')!.sample.value, Infinity);
  assert.equal(parseSampleLine('x -Inf')!.sample.value, -Infinity);
  assert.ok(Number.isNaN(parseSampleLine('x Nan')!.sample.value));
  assert.deepEqual(parseSampleLine('x{a="1",b="2"} 3 1700000000000'), {
    name: 'x',
    sample: { labels: { a: '1', b: '2' }, value: 3 },
  });
  assert.equal(parseSampleLine('# HELP x y'), null);
  assert.equal(parseSampleLine('x{a="unterminated} 1'), null);
  assert.equal(parseSampleLine('x{a=1} 1'), null);
  assert.equal(parseSampleLine('x notanumber'), null);
});
