// The benchmark's Knot DNS runs where the bench pins the server (CPU 1), every thread: Knot pins
// its UDP worker to CPU 0 itself once it starts, beside dnsperf, which made its kernel time per
// query look ~1.6 µs cheaper than a server on its own core (bench/lib/servers.mjs `knot.ready`).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const noKnot = spawnSync('sh', ['-c', 'command -v knotd || test -x /usr/sbin/knotd']).status !== 0;

// eslint-disable-next-line @typescript-eslint/no-explicit-any
const load = (p: string): Promise<any> => import(pathToFileURL(resolve(p)).href);

/** Each thread's name and the CPUs it may run on, from /proc. */
function threads(pid: number): { comm: string; cpus: string }[] {
  return readdirSync(`/proc/${pid}/task`).map((tid) => ({
    comm: readFileSync(`/proc/${pid}/task/${tid}/comm`, 'latin1').trim(),
    cpus: /Cpus_allowed_list:\s*(\S+)/.exec(readFileSync(`/proc/${pid}/task/${tid}/status`, 'latin1'))?.[1] ?? '?',
  }));
}

test(
  'bench: every thread of the pinned Knot peer runs on the server CPU once it answers, its UDP worker included',
  { skip: (noKnot && 'needs knotd') || (cpus().length < 2 && 'needs 2 CPUs'), timeout: 60_000 },
  async () => {
    const servers = await load('bench/lib/servers.mjs');
    const { makeWorkload } = await load('bench/lib/workload.mjs');
    const { waitAnswering } = await load('bench/lib/check.mjs');
    const procs = await load('bench/lib/procs.mjs');
    const dir = mkdtempSync(join(tmpdir(), 'clusterdns-bench-knot-pin-'));
    try {
      const workload = makeWorkload(dir, { queries: 10 });
      const ctx = {
        root: resolve('.'),
        dir,
        workload,
        mode: 'test',
        pin: 1,
        workers: 1,
        port: await servers.freePort(new Set()),
        startProcess: procs.startProcess,
      };
      const kp = servers.knot.start(ctx);
      await waitAnswering(ctx.port, workload.records[0].name, 20_000, () => kp.child.exitCode === null);
      await servers.knot.ready?.(ctx, kp);
      const ts = threads(kp.pid);
      assert.ok(ts.length > 1, `knotd runs its worker threads: ${JSON.stringify(ts)}`);
      assert.deepEqual(
        ts.filter((t) => t.cpus !== '1'),
        [],
        `every knotd thread on CPU 1 only: ${JSON.stringify(ts)}`,
      );
    } finally {
      await procs.stopAll();
      rmSync(dir, { recursive: true, force: true });
    }
  },
);
