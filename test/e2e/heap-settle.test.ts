// The collection the server starts itself after a bulk load (src/server/heap.ts, README "Node
// flags"). The launcher turns V8's memory reducer off (under load its watchdog started a full
// collection ~100 s after start, in the middle of serving: BENCHMARKS.md), so the list's garbage
// goes only because the server asks V8 for a memory-reducing collection a second after the list
// is in. The server is the real launcher (its #! line's flags) with a manifests file of 3,000
// Services; a module hook loaded through NODE_OPTIONS samples the heap and records each full
// collection V8 reports. Without the server's request nothing collects the list's garbage while
// the server is quiet, and both tests fail.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { nodeHook, type NodeHook } from '../helpers/node-hook.js';
import { startServer, type RunningServer } from '../helpers/server.js';
import { query } from '../helpers/dns.js';
import { QType } from '../../src/dns/constants.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const HOOK = `
import v8 from 'node:v8';
import { appendFileSync } from 'node:fs';
import { PerformanceObserver, constants } from 'node:perf_hooks';
const out = process.env.HEAP_HOOK_OUT;
const log = (o) => appendFileSync(out, JSON.stringify({ pid: process.pid, ...o }) + '\\n');
log({ execArgv: process.execArgv.join(' ') });
new PerformanceObserver((list) => {
  for (const e of list.getEntries())
    if (e.detail.kind === constants.NODE_PERFORMANCE_GC_MAJOR)
      log({ major: e.detail.flags, at: Math.round(e.startTime), used: v8.getHeapStatistics().used_heap_size });
}).observe({ entryTypes: ['gc'] });
// What the heap holds, four times a second.
setInterval(() => log({ at: Math.round(performance.now()), used: v8.getHeapStatistics().used_heap_size }), 250).unref();
`;

interface HookLine {
  pid: number;
  execArgv?: string;
  major?: number;
  at?: number;
  used?: number;
}

/**
 * 3,000 Services with a 5-endpoint slice each (~2 MB of JSON): a list whose garbage is worth
 * giving back; `extra` more Services named extra-N.
 */
function manifest(dir: string, extra = 0): string {
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
  for (let i = 0; i < extra; i++) {
    const ip = `10.100.0.${i + 1}`;
    items.push({
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: `extra-${i}`, namespace: 'default' },
      spec: { clusterIP: ip, clusterIPs: [ip], ports: [{ name: 'http', port: 80, protocol: 'TCP' }] },
    });
  }
  const file = join(dir, 'cluster.json');
  writeFileSync(file, JSON.stringify({ apiVersion: 'v1', kind: 'List', items }));
  return file;
}

/** The heap samples and full collections of the server's one process. */
function mine(lines: HookLine[], pid: number) {
  return {
    samples: lines.filter((l) => l.pid === pid && l.major === undefined && l.used !== undefined),
    majors: lines.filter((l) => l.pid === pid && l.major !== undefined),
  };
}

/**
 * Waits until, after `fromAt`, a full collection comes while the heap stands > 1 MB over
 * `baseline` (the load, in) and no longer grows (the last of two samples before it not 0.5 MB over
 * the other: the server quiet), and leaves it > 2 MB lower: the load's garbage, given back. A collection V8 starts itself
 * while a list is read falls inside the synchronous read, before any sample shows the load, and
 * does not count.
 */
async function waitForSettle(hook: NodeHook<HookLine>, pid: number, fromAt: number, baseline: number, what: string) {
  const deadline = Date.now() + 20_000;
  const mb = (n: number) => (n / 2 ** 20).toFixed(1);
  for (;;) {
    const { samples, majors } = mine(hook.lines(), pid);
    const gc = majors.find((m) => {
      const before = samples.filter((l) => l.at! >= fromAt && l.at! < m.at!);
      if (m.at! <= fromAt || before.length < 2) return false;
      const [a, b] = before.slice(-2) as [HookLine, HookLine];
      return b.used! > baseline + 2 ** 20 && b.used! - a.used! < 2 ** 19 && m.used! < b.used! - 2 * 2 ** 20;
    });
    if (gc) return gc;
    assert.ok(
      Date.now() < deadline,
      `${what}: no full collection gave back > 2 MB within 20 s; heap (ms: MB) ${samples
        .filter((l) => l.at! >= fromAt)
        .slice(0, 40)
        .map((l) => `${l.at}: ${mb(l.used!)}`)
        .join(', ')}; full collections ${majors.map((m) => `${m.at}: ${mb(m.used!)} (flags ${m.major})`).join(', ')}`,
    );
    await sleep(250);
  }
}

describe("the server collects the garbage of a bulk load itself, with V8's memory reducer off", () => {
  let s: RunningServer;
  let hook: NodeHook<HookLine>;
  let file: string;

  before(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'clusterdns-heap-settle-'));
    file = manifest(dir);
    hook = nodeHook<HookLine>(HOOK, 'HEAP_HOOK_OUT');
    s = await startServer({
      launcher: true,
      workers: 1,
      corefile: `cluster.local:PORT {\n  bind 127.0.0.1\n  kubernetes cluster.local {\n    manifests ${file}\n  }\n}\n`,
      env: hook.env,
      probe: 'svc-2999.default.svc.cluster.local.',
    });
  });
  after(async () => {
    await s?.stop();
  });

  test("the server process runs with V8's memory reducer off", () => {
    const argv = hook.lines().filter((l) => l.pid === s.proc.pid && l.execArgv !== undefined);
    assert.equal(argv.length, 1);
    assert.match(argv[0]!.execArgv!, /(^| )--no-memory-reducer( |$)/);
  });

  test('after the first list: one collection gives its garbage back, and the answers stay', async () => {
    await waitForSettle(hook, s.proc.pid!, 0, 0, 'first list');
    const m = await query(s.port, 'svc-1234.default.svc.cluster.local.', QType.A);
    assert.deepEqual(
      m.answers.map((a) => (a.data as { address: string }).address),
      ['10.96.4.210'],
    );
  });

  test('after the manifests file is rewritten: another collection, and the new Service answers', async () => {
    // Where the heap stands before the rewrite: the later of the last sample and the last
    // collection (the first test returns as soon as that collection shows).
    const { samples, majors } = mine(hook.lines(), s.proc.pid!);
    const last = [samples.at(-1)!, ...majors.slice(-1)];
    const fromAt = Math.max(...last.map((l) => l.at!));
    const baseline = Math.min(...last.map((l) => l.used!));
    manifest(join(file, '..'), 1);
    const deadline = Date.now() + 10_000;
    for (;;) {
      const m = await query(s.port, 'extra-0.default.svc.cluster.local.', QType.A);
      if (m.answers.length === 1) break;
      assert.ok(Date.now() < deadline, 'the rewritten file was not read within 10 s');
      await sleep(200);
    }
    await waitForSettle(hook, s.proc.pid!, fromAt, baseline, 'rewritten file');
  });
});
