// V8's memory reducer as bin/clusterdns starts it (README "Node flags", BENCHMARKS.md "One
// memory-reducing collection, not three"): after the first list leaves its garbage in the heap,
// the reducer gives it back with ONE memory-reducing collection, not V8's default of up to
// three. Each of those marks the whole heap (10–40 ms of the serving thread and of V8's helpers
// with 10,000 Services, and under a steady load they come ~100 s apart, so they land in the
// load); the second and third gave back < 1 MB. The server is the real launcher (its #! line's
// flags) with a manifests file of 3,000 Services; a module hook loaded through NODE_OPTIONS
// records each full collection V8 reports, and the reducer's are the ones flagged
// "all external memory" alone (V8 starts them with kGCCallbackFlagCollectAllExternalMemory;
// allocation-limit ones carry "schedule idle", external-memory ones "synchronous phantom" too).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { constants } from 'node:perf_hooks';
import { nodeHook, type NodeHook } from '../helpers/node-hook.js';
import { startServer, type RunningServer } from '../helpers/server.js';
import { query } from '../helpers/dns.js';
import { QType } from '../../src/dns/constants.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const HOOK = `
import v8 from 'node:v8';
import { appendFileSync } from 'node:fs';
import { PerformanceObserver, constants } from 'node:perf_hooks';
const out = process.env.REDUCER_HOOK_OUT;
const log = (o) => appendFileSync(out, JSON.stringify({ pid: process.pid, ...o }) + '\\n');
log({ execArgv: process.execArgv.join(' ') });
new PerformanceObserver((list) => {
  for (const e of list.getEntries())
    if (e.detail.kind === constants.NODE_PERFORMANCE_GC_MAJOR)
      log({ major: e.detail.flags, at: Math.round(e.startTime), used: v8.getHeapStatistics().used_heap_size });
}).observe({ entryTypes: ['gc'] });
// What the heap holds, twice a second (a few hundred bytes: the reducer still sees no allocation).
setInterval(() => log({ at: Math.round(performance.now()), used: v8.getHeapStatistics().used_heap_size }), 500).unref();
`;

interface HookLine {
  pid: number;
  execArgv?: string;
  major?: number;
  at?: number;
  used?: number;
}

/** 3,000 Services with a 5-endpoint slice each (~2 MB of JSON): a first list whose garbage is worth giving back. */
function manifest(dir: string): string {
  const items: object[] = [{ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'default' } }];
  for (let i = 0; i < 3000; i++) {
    const ip = `10.96.${i >> 8}.${i & 255}`;
    items.push({
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: `svc-${i}`, namespace: 'default' },
      spec: { clusterIP: ip, clusterIPs: [ip], ports: [{ name: 'http', port: 80, protocol: 'TCP' }] },
    });
    items.push({
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: { name: `svc-${i}-1`, namespace: 'default', labels: { 'kubernetes.io/service-name': `svc-${i}` } },
      addressType: 'IPv4',
      ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
      endpoints: Array.from({ length: 5 }, (_, k) => ({
        addresses: [`10.${128 + k}.${i >> 8}.${i & 255}`],
        conditions: { ready: true },
      })),
    });
  }
  const file = join(dir, 'cluster.json');
  writeFileSync(file, JSON.stringify({ apiVersion: 'v1', kind: 'List', items }));
  return file;
}

describe('the memory reducer as the launcher starts it: one collection gives the first list back', () => {
  let s: RunningServer;
  let hook: NodeHook<HookLine>;
  const lines = () => hook.lines();
  const reducing = () =>
    lines().filter((l) => l.major === constants.NODE_PERFORMANCE_GC_FLAGS_ALL_EXTERNAL_MEMORY && l.pid === s.proc.pid);

  before(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'clusterdns-reducer-'));
    hook = nodeHook<HookLine>(HOOK, 'REDUCER_HOOK_OUT');
    s = await startServer({
      launcher: true,
      workers: 1,
      corefile: `cluster.local:PORT {\n  bind 127.0.0.1\n  kubernetes cluster.local {\n    manifests ${manifest(dir)}\n  }\n}\n`,
      env: hook.env,
      probe: 'svc-2999.default.svc.cluster.local.',
    });
  });
  after(async () => {
    await s?.stop();
  });

  test('the server process runs with the launcher flag that limits the reducer to one collection', () => {
    const mine = lines().filter((l) => l.pid === s.proc.pid && l.execArgv !== undefined);
    assert.equal(mine.length, 1);
    assert.match(mine[0]!.execArgv!, /(^| )--memory-reducer-single-gc( |$)/);
  });

  test('quiet after the list: exactly one memory-reducing collection, and it gives the list garbage back', async () => {
    // The reducer collects when one of its checks (8 s apart) finds allocation low; in a control
    // the flag's one collection came at 16 s where V8's default first came at 8 s. Allow 45 s.
    const deadline = Date.now() + 45_000;
    while (reducing().length === 0) {
      assert.ok(Date.now() < deadline, `no memory-reducing collection within 45 s: ${JSON.stringify(lines())}`);
      await sleep(250);
    }
    // V8's default follows the first with a second 0.5–1 s later (and often a third); give it 4 s.
    await sleep(4000);
    const got = reducing();
    assert.equal(got.length, 1, `memory-reducing collections: ${JSON.stringify(got)}`);
    const before = lines()
      .filter((l) => l.pid === s.proc.pid && l.major === undefined && l.used !== undefined && l.at! < got[0]!.at!)
      .at(-1);
    assert.ok(before !== undefined, 'a sample of the heap before the reducer');
    // The heap just before the reducer's collection (the records and the list's garbage) against
    // just after it: the garbage given back.
    assert.ok(
      got[0]!.used! < before.used! - 2 * 2 ** 20,
      `heap ${(before.used! / 2 ** 20).toFixed(1)} MB after the list, ${(got[0]!.used! / 2 ** 20).toFixed(1)} MB after the reducer`,
    );
    const m = await query(s.port, 'svc-1234.default.svc.cluster.local.', QType.A);
    assert.deepEqual(
      m.answers.map((a) => (a.data as { address: string }).address),
      ['10.96.4.210'],
    );
  });
});
