// The latency bench's control and its reading of issue 23's point 3 (bench/lib/report.mjs):
// a peer named twice is a second process, and each server's tail is read against Knot's.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
const load = (p: string): Promise<any> => import(pathToFileURL(resolve(p)).href);

test('bench peers: a name given twice starts a second process under its own name', async () => {
  const { peerInstances } = await load('bench/lib/report.mjs');
  assert.deepEqual(peerInstances(['unbound', 'knot', 'knot', 'knot']), [
    { peer: 'unbound', name: 'unbound' },
    { peer: 'knot', name: 'knot' },
    { peer: 'knot', name: 'knot#2' },
    { peer: 'knot', name: 'knot#3' },
  ]);
  assert.deepEqual(peerInstances([]), []);
});

test("bench tail marks: p99 ≤ 2 × and p99.9 ≤ 1.5 × Knot's, both needed", async () => {
  const { tailMarks } = await load('bench/lib/report.mjs');
  const marks = tailMarks({ p99: 0.1, p999: 0.8 }, [
    { name: 'at both marks', p99: 0.2, p999: 1.2 },
    { name: 'p99.9 over', p99: 0.1, p999: 1.21 },
    { name: 'p99 over', p99: 0.21, p999: 0.5 },
    { name: 'faster', p99: 0.05, p999: 0.4 },
  ]);
  assert.deepEqual(
    marks.map((m: { name: string; met: boolean }) => [m.name, m.met]),
    [
      ['at both marks', true],
      ['p99.9 over', false],
      ['p99 over', false],
      ['faster', true],
    ],
  );
  assert.ok(Math.abs(marks[1].p999x - 1.5125) < 1e-9);
  assert.equal(marks[3].p99x, 0.5);
  // No reference figure: no ratio, and so not met.
  const none = tailMarks({ p99: 0, p999: NaN }, [{ name: 'x', p99: 0.1, p999: 0.2 }]);
  assert.ok(Number.isNaN(none[0].p99x) && Number.isNaN(none[0].p999x));
  assert.equal(none[0].met, false);
});
