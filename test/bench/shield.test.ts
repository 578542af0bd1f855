// The latency bench keeps other tasks off the server's core for a run (bench/lib/shield.mjs,
// issue 23 point 3): the kernel's kdamond ran there for up to 4 ms twice a second and set every
// server's tail. Checked on real processes: a movable one leaves the core and gets its own
// affinity back, one bound to that core stays.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
const load = (p: string): Promise<any> => import(pathToFileURL(resolve(p)).href);

const allowed = (pid: number): string =>
  /Cpus_allowed_list:\s*(\S+)/.exec(readFileSync(`/proc/${pid}/status`, 'latin1'))?.[1] ?? '?';

test('shield: CPU lists as /proc prints them', async () => {
  const { parseCpuList } = await load('bench/lib/shield.mjs');
  assert.deepEqual(parseCpuList('0-1'), [0, 1]);
  assert.deepEqual(parseCpuList('0,2-4,7\n'), [0, 2, 3, 4, 7]);
  assert.deepEqual(parseCpuList('3'), [3]);
  assert.throws(() => parseCpuList('a-b'), /bad CPU list/);
});

test(
  'shield: a movable process leaves CPU 1 for the run and gets its affinity back; one bound to CPU 1 stays',
  { skip: (cpus().length < 2 && 'needs 2 CPUs') || (process.platform !== 'linux' && 'Linux only'), timeout: 20_000 },
  async () => {
    const { shieldCpu, shieldLine } = await load('bench/lib/shield.mjs');
    const children: ChildProcess[] = [];
    const start = (argv: string[]): number => {
      const c: ChildProcess = spawn(argv[0]!, argv.slice(1), { stdio: 'ignore' });
      children.push(c);
      return c.pid as number;
    };
    try {
      const free = start(['taskset', '-c', '0,1', 'sleep', '30']);
      const bound = start(['taskset', '-c', '1', 'sleep', '30']);
      // taskset sets the affinity, then execs sleep: wait for both to be sleep (the names asserted).
      const comm = (pid: number): string => readFileSync(`/proc/${pid}/comm`, 'latin1').trim();
      for (let i = 0; i < 100 && !(comm(free) === 'sleep' && comm(bound) === 'sleep'); i++)
        await new Promise((r) => setTimeout(r, 20));
      assert.equal(allowed(free), '0-1');
      assert.equal(allowed(bound), '1');

      const shield = shieldCpu(1, { only: [free, bound] });
      assert.equal(allowed(free), '0', 'moved off CPU 1');
      assert.equal(allowed(bound), '1', 'a task bound to CPU 1 alone cannot move');
      assert.deepEqual(
        shield.moved.map((t: { tid: number }) => t.tid),
        [free],
      );
      assert.deepEqual(shield.stayed, ['sleep']);
      assert.match(
        shieldLine(1, shield),
        /^CPU 1 shielded: 1 other tasks moved off it for the run \(sleep\).*1 that cannot move stayed/,
      );

      shield.restore();
      assert.equal(allowed(free), '0-1', 'its own affinity back');
      assert.equal(allowed(bound), '1');
      shield.restore(); // twice is harmless
      assert.equal(allowed(free), '0-1');
    } finally {
      for (const c of children) c.kill('SIGKILL');
    }
  },
);
