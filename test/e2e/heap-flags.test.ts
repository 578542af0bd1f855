// Heap settings are chosen at process start (issue 19 point 5): bin/clusterdns starts every
// process (the primary and each worker) with its heap flags, and while serving, through the
// first list and a 410 relist, no process changes a V8 flag at run time or forces a full GC;
// after the relist the listing process asks V8 for its incremental memory-reducing collection.
// A module hook loaded through NODE_OPTIONS records what each process does: every call of
// v8.setFlagsFromString, every GC that V8 reports as forced (gc(), not V8's own scheduling), and
// every other full collection.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { KubeApiServer } from '../helpers/kubeapi.js';
import { nodeHook, type NodeHook } from '../helpers/node-hook.js';
import { startServer, type RunningServer } from '../helpers/server.js';
import { query } from '../helpers/dns.js';
import { QType } from '../../src/dns/constants.js';
import { namespace, service } from '../kubernetes/fixtures.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const HOOK = `
import v8 from 'node:v8';
import cluster from 'node:cluster';
import { appendFileSync } from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
import { PerformanceObserver, constants } from 'node:perf_hooks';
const out = process.env.HEAP_HOOK_OUT;
const role = cluster.isWorker ? 'worker' : 'primary';
const log = (o) => appendFileSync(out, JSON.stringify({ pid: process.pid, role, ...o }) + '\\n');
const real = v8.setFlagsFromString;
v8.setFlagsFromString = (flag) => (log({ setFlags: String(flag) }), real.call(v8, flag));
syncBuiltinESMExports();
new PerformanceObserver((list) => {
  for (const e of list.getEntries())
    if (e.detail.flags & constants.NODE_PERFORMANCE_GC_FLAGS_FORCED) log({ forcedGc: e.detail.kind });
    else if (e.detail.kind === constants.NODE_PERFORMANCE_GC_MAJOR) log({ major: e.detail.flags });
}).observe({ entryTypes: ['gc'] });
const young = v8.getHeapSpaceStatistics().find((s) => s.space_name === 'new_space')?.space_size ?? 0;
log({ started: process.env.NODE_OPTIONS ?? '', execArgv: process.execArgv.join(' '), young });
`;

interface HookLine {
  pid: number;
  role: 'primary' | 'worker';
  started?: string;
  execArgv?: string;
  young?: number;
  setFlags?: string;
  forcedGc?: number;
  major?: number;
}

for (const workers of [1, 2]) {
  describe(`heap flags at start, none changed while serving (-workers ${workers})`, () => {
    let api: KubeApiServer;
    let s: RunningServer;
    let hook: NodeHook<HookLine>;
    const lines = () => hook.lines();

    before(async () => {
      api = await KubeApiServer.create();
      api.apply(namespace('default'));
      // Enough objects that a list is a burst of garbage worth collecting.
      for (let i = 0; i < 400; i++) api.apply(service('default', `svc-${i}`, [`10.96.${i >> 8}.${i & 255}`]));
      hook = nodeHook<HookLine>(HOOK, 'HEAP_HOOK_OUT');
      s = await startServer({
        launcher: true,
        workers,
        corefile: `cluster.local:PORT {\n  bind 127.0.0.1\n  kubernetes cluster.local {\n    endpoint ${api.url}\n  }\n}\n`,
        env: hook.env,
        probe: 'svc-399.default.svc.cluster.local.',
      });
    });
    after(async () => {
      await s?.stop();
      await api?.close();
    });

    test('every process starts with the launcher heap flags, ahead of the caller NODE_OPTIONS', () => {
      const started = lines().filter((l) => l.started !== undefined);
      assert.equal(started.filter((l) => l.role === 'worker').length, workers === 1 ? 0 : workers);
      assert.equal(started.filter((l) => l.role === 'primary').length, 1);
      for (const l of started) assert.match(l.started!, /^--max-semi-space-size=\d+ --import /, `${l.role} ${l.pid}`);
    });

    test("every process starts with its young generation at its 2 MB size, V8's memory reducer off and its tier-up budget a quarter", () => {
      const started = lines().filter((l) => l.started !== undefined);
      assert.ok(started.length >= 1);
      // A command-line flag (not allowed in NODE_OPTIONS): the workers inherit it with execArgv.
      for (const l of started) {
        assert.match(l.execArgv!, /(^| )--min-semi-space-size=2( |$)/, `${l.role} ${l.pid}`);
        // The server starts its memory-reducing collections itself (test/e2e/heap-settle.test.ts).
        assert.match(l.execArgv!, /(^| )--no-memory-reducer( |$)/, `${l.role} ${l.pid}`);
        // And V8 compiles hot code sooner: a path that runs in bursts (the cache's refreshes) is
        // compiled in its first burst, not its second (README "Node flags").
        assert.match(l.execArgv!, /(^| )--interrupt-budget=16896( |$)/, `${l.role} ${l.pid}`);
        assert.equal(l.young, 2 * 2 ** 20, `${l.role} ${l.pid}: V8's new space at start`);
      }
    });

    test('a 410 relist while serving: answers follow it, and no process sets a V8 flag or forces a GC', async () => {
      const lists = api.requestCount('/api/v1/services', 'list');
      const majorsBefore = lines().filter((l) => l.major !== undefined && l.role === 'primary').length;
      api.compact();
      api.closeAllWatches();
      api.apply(service('default', 'after-relist', ['10.96.9.9']));
      const deadline = Date.now() + 10_000;
      for (;;) {
        const m = await query(s.port, 'after-relist.default.svc.cluster.local.', QType.A);
        if (m.answers.length > 0 && api.requestCount('/api/v1/services', 'list') > lists) break;
        assert.ok(Date.now() < deadline, 'the relist was not served within 10 s');
        await sleep(50);
      }
      // The server asks V8 for one memory-reducing collection a second after a relist ends
      // (src/server/heap.ts): incremental, started by V8's memory-pressure notification, not forced.
      // The process that lists is the primary (with -workers 2 the workers get only the changes).
      const settleBy = Date.now() + 5000;
      while (lines().filter((l) => l.major !== undefined && l.role === 'primary').length === majorsBefore) {
        assert.ok(Date.now() < settleBy, 'no full collection in the listing process within 5 s of the relist');
        await sleep(100);
      }
      const got = lines();
      assert.deepEqual(
        got.filter((l) => l.setFlags !== undefined).map((l) => `${l.role}: ${l.setFlags}`),
        [],
        'V8 flags set at run time',
      );
      assert.deepEqual(
        got.filter((l) => l.forcedGc !== undefined).map((l) => `${l.role}: kind ${l.forcedGc}`),
        [],
        'forced garbage collections',
      );
    });
  });
}
