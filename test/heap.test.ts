// The small-heap mode (src/heap.ts): on while serving, off during a LIST, back on after the
// list's collection; CLUSTERDNS_SMALL_HEAP=0 keeps it off.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { collectAfterBurst, listBegins, listEnds, servingStarted, smallHeapOn } from '../src/heap.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test('on once serving with no list running; off during a list; on again after its collection', async () => {
  assert.equal(smallHeapOn(), false, 'off before the process serves');
  listBegins(); // the first LIST starts before serving (startup_timeout ran out)
  servingStarted();
  assert.equal(smallHeapOn(), false, 'off while the first list runs');
  listEnds();
  assert.equal(smallHeapOn(), true, 'on when it ends');

  listBegins(); // a relist (410)
  assert.equal(smallHeapOn(), false, 'off during a relist');
  collectAfterBurst(20);
  listEnds();
  assert.equal(smallHeapOn(), false, 'still off until the collection after the list has run');
  await sleep(200);
  assert.equal(smallHeapOn(), true, 'on after the collection');

  // Two lists at once (Services and Pods): on only when both are done.
  listBegins();
  listBegins();
  listEnds();
  assert.equal(smallHeapOn(), false);
  listEnds();
  assert.equal(smallHeapOn(), true);
});

test('CLUSTERDNS_SMALL_HEAP=0 never turns it on', () => {
  const heap = pathToFileURL(resolve('dist/src/heap.js')).href;
  const script = `const h = await import(${JSON.stringify(heap)}); h.servingStarted(); h.listBegins(); h.listEnds(); console.log(String(h.smallHeapOn()));`;
  const run = (env: Record<string, string>) =>
    execFileSync(process.execPath, ['--input-type=module', '-e', script], {
      env: { ...process.env, ...env },
      encoding: 'utf8',
    }).trim();
  assert.equal(run({ CLUSTERDNS_SMALL_HEAP: '0' }), 'false');
  assert.equal(run({ CLUSTERDNS_SMALL_HEAP: '1' }), 'true');
});
