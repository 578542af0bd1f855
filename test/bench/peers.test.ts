// The benchmark's Knot DNS peer and forwarding peers (bench/lib/servers.mjs) serve the
// workload's names as the tables assume: Knot authoritatively, unbound forwarding to the
// shared upstream with its cache off (TTL 0: nothing kept) and on (the record's TTL).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const missing = ['knotd', 'unbound', 'dig'].filter(
  (t) => spawnSync('sh', ['-c', `command -v ${t} || test -x /usr/sbin/${t}`]).status !== 0,
);

// eslint-disable-next-line @typescript-eslint/no-explicit-any
const load = (p: string): Promise<any> => import(pathToFileURL(resolve(p)).href);

test(
  'bench peers: Knot answers the workload authoritatively; unbound forwards to the Knot upstream with its cache off and on',
  { skip: missing.length > 0 && `needs ${missing.join(', ')}`, timeout: 90_000 },
  async () => {
    const servers = await load('bench/lib/servers.mjs');
    const { makeWorkload, sampleRecords } = await load('bench/lib/workload.mjs');
    const { dig, waitAnswering } = await load('bench/lib/check.mjs');
    const procs = await load('bench/lib/procs.mjs');
    const dir = mkdtempSync(join(tmpdir(), 'clusterdns-bench-peers-'));
    try {
      const workload = makeWorkload(dir, { queries: 10 });
      const taken = new Set<number>();
      // eslint-disable-next-line @typescript-eslint/no-explicit-any
      const ctx = async (): Promise<any> => ({
        root: resolve('.'),
        dir,
        workload,
        mode: 'test',
        pin: null,
        workers: 1,
        port: await servers.freePort(taken),
        startProcess: procs.startProcess,
      });
      const alive = (p: { child: { exitCode: number | null } }) => () => p.child.exitCode === null;

      const k = await ctx();
      const kp = servers.knot.start(k);
      await waitAnswering(k.port, workload.records[0].name, 20_000, alive(kp));
      for (const r of sampleRecords(workload.records)) {
        const res = await dig(k.port, r.name);
        assert.equal(res.status, 'NOERROR', res.raw);
        assert.deepEqual(
          res.answers.map((a: { data: string; ttl: number }) => [a.data, a.ttl]),
          [[r.ip, workload.ttl]],
          res.raw,
        );
        assert.match(res.raw, /flags:[^;]*\baa\b/, 'Knot answers authoritatively');
      }
      const nx = await dig(k.port, 'no-such-svc.ns-0.svc.cluster.local');
      assert.equal(nx.status, 'NXDOMAIN', nx.raw);

      // Both forwarders ask one upstream, as in the benchmark: the first sets it up.
      const off = await ctx();
      await servers.unboundForward.setup(off);
      assert.equal(off.upstream.name, 'Knot DNS');
      const on = { ...(await ctx()), upstreamPort: off.upstreamPort };
      const offp = servers.unboundForward.start(off);
      const onp = servers.unboundForwardCache.start(on);
      const name = workload.records[7];
      await waitAnswering(off.port, name.name, 20_000, alive(offp));
      await waitAnswering(on.port, name.name, 20_000, alive(onp));
      for (let i = 0; i < 2; i++) {
        const a = await dig(off.port, name.name);
        assert.deepEqual(
          a.answers.map((x: { data: string; ttl: number }) => [x.data, x.ttl]),
          [[name.ip, 0]],
          `cache off: TTL 0, nothing kept\n${a.raw}`,
        );
      }
      await new Promise((r) => setTimeout(r, 1100));
      const b = await dig(on.port, name.name);
      assert.equal(b.answers[0]?.data, name.ip, b.raw);
      assert.ok(
        b.answers[0].ttl > 0 && b.answers[0].ttl < workload.ttl,
        `cache on: the TTL counts down from the cache\n${b.raw}`,
      );
    } finally {
      await procs.stopAll();
      rmSync(dir, { recursive: true, force: true });
    }
  },
);
