// The latency bench's steal figures (issue 23 point 3): how much of the server's core the
// hypervisor took in each 5 s window, read from /proc/stat (bench/lib/steal.mjs), and the rank
// correlation the report draws between a window's p99 and its steal.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
const load = (p: string): Promise<any> => import(pathToFileURL(resolve(p)).href);

// /proc/stat as Linux 6.x prints it: user nice system idle iowait irq softirq steal guest guest_nice.
const STAT = [
  'cpu  21995 0 40123 661311 332 0 19325 23182 0 0',
  'cpu0 15085 0 21738 321718 48 0 12164 9845 0 0',
  'cpu1 6921 0 18385 339593 284 0 7161 13337 0 0',
  'cpu10 1 2 3 4 5 6 7 99 0 0',
  'intr 1234 0 0',
].join('\n');

test('steal: the 8th value of the named CPU line, not of a CPU whose number starts the same', async () => {
  const { parseSteal } = await load('bench/lib/steal.mjs');
  assert.equal(parseSteal(STAT, 1), 13337);
  assert.equal(parseSteal(STAT, 0), 9845);
  assert.equal(parseSteal(STAT, 10), 99);
  assert.ok(Number.isNaN(parseSteal(STAT, 2)), 'a CPU that is not there');
  assert.ok(Number.isNaN(parseSteal('cpu1 1 2 3 4', 1)), 'a kernel without a steal field');
});

test('steal: ms in a window are the rises sampled inside it, the window end excluded', async () => {
  const { stealIn } = await load('bench/lib/steal.mjs');
  const s = [
    [1e9, 10],
    [5.5e9, 30],
    [6e9, 10],
    [11e9, 20],
  ];
  assert.equal(stealIn(s, 0, 5e9), 10);
  assert.equal(stealIn(s, 5e9, 10e9), 40);
  assert.equal(stealIn(s, 6e9, 11e9), 10);
  assert.equal(stealIn(s, 0, 20e9), 70);
});

test("steal: Spearman's rank correlation, ties at their mean rank", async () => {
  const { spearman } = await load('bench/lib/steal.mjs');
  assert.equal(spearman([1, 2, 3, 4], [10, 20, 30, 400]), 1);
  assert.equal(spearman([1, 2, 3, 4], [4, 3, 2, 1]), -1);
  // Ranks x 1 2 3 4, y 1.5 1.5 3 4 → ρ = 4.5 / √(5 · 4.5).
  assert.ok(Math.abs(spearman([1, 2, 3, 4], [0, 0, 5, 9]) - 4.5 / Math.sqrt(5 * 4.5)) < 1e-12);
  assert.ok(Number.isNaN(spearman([1, 2], [1, 2])), 'too few');
  assert.ok(Number.isNaN(spearman([1, 2, 3], [7, 7, 7])), 'one series constant');
});

test('steal: the sampler reads this machine’s /proc/stat and its total is what the counter rose by', async (t) => {
  const { sampleSteal, parseSteal, TICK_MS } = await load('bench/lib/steal.mjs');
  let text: string;
  try {
    text = readFileSync('/proc/stat', 'latin1');
  } catch {
    return t.skip('no /proc/stat');
  }
  const cpu = Number.isFinite(parseSteal(text, 1)) ? 1 : 0;
  const before = parseSteal(text, cpu);
  const stop = sampleSteal(cpu, 2);
  await new Promise((r) => setTimeout(r, 300));
  const s = stop();
  const after = parseSteal(readFileSync('/proc/stat', 'latin1'), cpu);
  assert.ok(s.seconds >= 0.29 && s.seconds < 5, `sampled for ${s.seconds} s`);
  const sampled = s.samples.reduce((a: number, [, ms]: [number, number]) => a + ms, 0);
  assert.equal(sampled, s.totalMs, 'every rise is in the samples');
  assert.ok(
    s.totalMs >= 0 && s.totalMs <= (after - before) * TICK_MS,
    `${s.totalMs} ms against ${after - before} ticks`,
  );
  for (const [tNs, ms] of s.samples) {
    assert.ok(ms > 0 && ms % TICK_MS === 0, `a rise of ${ms} ms`);
    assert.ok(Number.isFinite(tNs));
  }
});
