// What bench/latency.mjs says the slow queries met (issue 23 point 3): the line-up of queries
// with intervals (bench/lib/tail-causes.mjs), and the observer preloaded into the real binary
// (bench/lib/loop-observer.mjs) recording its UDP batches and timers.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { once } from 'node:events';
import { createSocket } from 'node:dgram';
import { QType } from '../../src/dns/constants.js';
import { buildQuery } from '../helpers/dns.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
const load = (p: string): Promise<any> => import(pathToFileURL(resolve(p)).href);

const ms = 1e6;

test('tail causes: each slow query is put on the kind of interval it overlapped longest', async () => {
  const { attribute, subtract } = await load('bench/lib/tail-causes.mjs');
  // 1,000 queries 1 ms apart, 0.2 ms each, except five slow ones, each inside one kind of interval.
  const n = 1000;
  const send = new Float64Array(n);
  const lat = new Float64Array(n).fill(0.2 * ms);
  for (let i = 0; i < n; i++) send[i] = i * ms;
  const startNs = 5e9;
  const slow = { 100: 'GC pause', 300: 'batch', 500: 'other loop work', 700: 'core wait', 900: 'none found' };
  for (const i of Object.keys(slow)) lat[Number(i)] = 8 * ms;
  const at = (i: number, from: number, to: number) => [startNs + send[i]! + from * ms, startNs + send[i]! + to * ms];
  const gc = [at(100, 1, 7)];
  // A batch that held query 300, with a short GC pause inside it that is left out of it.
  const batch = subtract([at(300, 0.5, 7.5)], [at(300, 2, 2.5)]);
  assert.equal(batch.length, 2);
  // Only the slow ones, so that they are the ≥ p99 group.
  const keep = (_: number, i: number) => String(i) in slow;
  const raw = { startNs, skipS: 0, rate: 1000, send: send.filter(keep), lat: lat.filter(keep), stalls: [] };
  const slowOnly = attribute(raw, {
    'client stall': { iv: [] },
    'core wait': { iv: [[...at(700, 0, 8), 0.9]], weighted: true },
    'GC pause': { iv: gc },
    batch: { iv: batch },
    'other loop work': { iv: [at(500, 2, 6)] },
  });
  assert.equal(slowOnly.atLeastP99.queries, 5);
  assert.deepEqual(slowOnly.all.causePercent, {
    'none found': 20,
    'client stall': 0,
    'core wait': 20,
    'GC pause': 20,
    batch: 20,
    'other loop work': 20,
  });
  assert.equal(slowOnly.all.metPercent['GC pause'], 20);
});

const addon = resolve('native/build/Release/udpbatch.node');

test(
  'loop observer: preloaded into bin/clusterdns, it records every batch of the native UDP path and the timers, by where they were set',
  {
    skip:
      (!existsSync(addon) && 'the native UDP addon is not built') ||
      (spawnSync('sh', ['-c', 'command -v dig']).status !== 0 && 'needs dig'),
    timeout: 60_000,
  },
  async () => {
    const { readLoopLog } = await load('bench/lib/tail-causes.mjs');
    const { freePort } = await load('bench/lib/servers.mjs');
    const { dig, waitAnswering } = await load('bench/lib/check.mjs');
    const dir = mkdtempSync(join(tmpdir(), 'clusterdns-loop-observer-'));
    try {
      const port = await freePort(new Set());
      const conf = join(dir, 'Corefile');
      // cache: its sweep is a timer of the server's own.
      writeFileSync(conf, `.:${port} {\n  bind 127.0.0.1\n  cache 30\n  hosts {\n    10.0.0.1 a.example.\n  }\n}\n`);
      const log = join(dir, 'loop.bin');
      const child = spawn(
        process.execPath,
        [
          '--import',
          pathToFileURL(resolve('bench/lib/loop-observer.mjs')).href,
          resolve('bin/clusterdns'),
          '-conf',
          conf,
          '-workers',
          '1',
          '-quiet',
        ],
        { env: { ...process.env, CLUSTERDNS_LOOP_LOG: log }, stdio: ['ignore', 'ignore', 'pipe'] },
      );
      let stderr = '';
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      try {
        await waitAnswering(port, 'a.example.', 20_000, () => child.exitCode === null);
        for (let i = 0; i < 5; i++) assert.equal((await dig(port, 'a.example.', 'A')).answers[0]?.data, '10.0.0.1');
        // One burst of repeats (answered by the addon's table) and new names (answered by JS): in
        // a batch of both, the observer must hand the server the table's answers too, or they are lost.
        const sock = createSocket('udp4');
        try {
          const want = new Set<number>();
          const got = new Set<number>();
          sock.on('message', (m: Buffer) => got.add(m.readUInt16BE(0)));
          await new Promise<void>((r) => sock.bind(0, '127.0.0.1', r));
          for (let round = 0; round < 2; round++) {
            for (let i = 0; i < 40; i++) {
              const q = buildQuery(i % 2 === 0 ? 'a.example.' : `n${round}-${i}.example.`, QType.A);
              const id = round * 100 + i + 1;
              q.writeUInt16BE(id, 0);
              want.add(id);
              sock.send(q, port, '127.0.0.1');
            }
            const until = Date.now() + 3000;
            while (got.size < want.size && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
          }
          assert.equal(got.size, want.size, `answered ${got.size} of ${want.size} queries of mixed bursts`);
        } finally {
          sock.close();
        }
        await new Promise((r) => setTimeout(r, 1200)); // a cache sweep
      } finally {
        child.kill('SIGTERM');
        if (child.exitCode === null) await once(child, 'exit');
      }
      assert.doesNotMatch(stderr, /loop-observer/, stderr);
      const l = readLoopLog(log);
      const datagrams = l.batch.reduce((a: number, b: number[]) => a + b[2]!, 0);
      const answered = l.batch.reduce((a: number, b: number[]) => a + b[3]!, 0);
      assert.ok(datagrams >= 6, `datagrams in batches: ${datagrams}`); // the probe(s) and five queries
      assert.equal(answered, datagrams, 'every answer left with its batch');
      for (const b of l.batch) assert.ok(b[1] >= b[0] && b[0] > 0);
      assert.ok(
        l.labels.some((x: string) => x.includes('plugins/cache/handler')),
        `timer labels: ${JSON.stringify(l.labels)}`,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
);

test("other threads' run time: a process's threads but the serving one, from /proc schedstat", async (t) => {
  if (!existsSync('/proc/self/task')) return t.skip('no /proc');
  const { otherThreadsRunMs, ranSince, ranSinceByName } = await load('bench/lib/tail-causes.mjs');
  // ranSince: threads present before count their growth, threads new since count in whole.
  assert.equal(
    ranSince(
      new Map([
        ['1', 5],
        ['2', 7],
      ]),
      new Map([
        ['1', 9],
        ['2', 7],
        ['3', 4],
      ]),
    ),
    8,
  );
  // A child whose main thread spins ~300 ms, then a worker thread spins ~300 ms while main waits.
  const src = `
    const { Worker } = require('node:worker_threads');
    const spin = (ms) => { const end = Date.now() + ms; while (Date.now() < end); };
    const w = new Worker("const { parentPort } = require('node:worker_threads');" +
      "const spin = (ms) => { const end = Date.now() + ms; while (Date.now() < end); };" +
      "parentPort.on('message', () => { spin(300); parentPort.postMessage('spun'); });", { eval: true });
    w.once('online', () => { spin(300); w.postMessage('go'); w.once('message', () => console.log('done')); });
    setInterval(() => {}, 1000); // alive, worker too, until killed: their /proc entries are read after 'done'`;
  const child = spawn(process.execPath, ['-e', src], { stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    const pid = child.pid as number;
    const all0 = otherThreadsRunMs(pid, -1);
    const others0 = otherThreadsRunMs(pid, pid);
    await new Promise<void>((done) => child.stdout.on('data', (b: Buffer) => b.toString().includes('done') && done()));
    const all1 = otherThreadsRunMs(pid, -1);
    const all = ranSince(all0, all1);
    const others = ranSince(others0, otherThreadsRunMs(pid, pid));
    // By name: the main thread as "main" (the event loop), the worker under its comm ("node"
    // unless named), largest first, together the whole.
    const byName: [string, number][] = ranSinceByName(pid, all0, all1);
    const main = byName.find(([n]) => n === 'main');
    assert.ok(main && main[1] >= 100, `main ${JSON.stringify(byName)}`);
    assert.ok(
      byName.some(([n, ms]) => n !== 'main' && ms >= 100),
      `a worker ${JSON.stringify(byName)}`,
    );
    assert.ok(
      byName.every(([, ms], i) => i === 0 || ms <= (byName[i - 1]?.[1] ?? ms)),
      'largest first',
    );
    // A thread gone before its name is read counts under its id; under 0.5 ms is left out.
    assert.deepEqual(
      ranSinceByName(
        pid,
        new Map(),
        new Map([
          ['999999999', 5],
          ['999999998', 0.2],
        ]),
      ),
      [['999999999', 5]],
    );
    const summed = byName.reduce((a, [, ms]) => a + ms, 0);
    assert.ok(Math.abs(summed - all) <= 0.5 * byName.length + 1, `by name ${summed} vs all ${all}`);
    // The worker's spin is among the others; the main thread's is not. (CPU time, not wall:
    // on a loaded machine each spin gets less than its 300 ms, hence the 100 ms bounds.)
    assert.ok(others >= 100, `others ${others.toFixed(1)} ms`);
    assert.ok(all - others >= 100, `main thread ${(all - others).toFixed(1)} ms`);
  } finally {
    child.kill('SIGKILL');
  }
});

test("frozen core: the server's socket's queue and a CPU's idle ticks, parsed from /proc's text", async () => {
  const { udpRxQueue, idleTicks } = await load('bench/lib/tail-causes.mjs');
  const udp = [
    '   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops',
    '  101: 0100007F:D2A4 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 1 2 0 0',
    '  102: 0100007F:D2A4 0100007F:9C40 01 00000000:00000900 00:00000000 00000000     0        0 2 2 0 0', // connected: not the server's
    '  103: 0100007F:1D2A4 00000000:0000 07 00000000:00000F00 00:00000000 00000000     0        0 3 2 0 0',
    '  104: 0100007F:D2A4 00000000:0000 07 00000000:00000A00 00:00000000 00000000     0        0 4 2 0 0', // a second (reuseport) socket
  ].join('\n');
  assert.equal(udpRxQueue(udp, 0xd2a4), 0xa00, 'the fullest of the sockets bound to the port, unconnected');
  assert.ok(Number.isNaN(udpRxQueue(udp, 53)), 'no socket on that port');
  const stat = 'cpu  10 0 5 900 0 0 0 0 0 0\ncpu1 4 0 2 450 1 0 0 0 0 0\ncpu11 9 9 9 777 0 0 0 0 0 0\n';
  assert.equal(idleTicks(stat, 1), 450);
  assert.equal(idleTicks(stat, 11), 777);
  assert.ok(Number.isNaN(idleTicks(stat, 2)));
});

test('frozen core: only a stretch the server could not have caused, on an idle core, long enough', async () => {
  const { frozenStretches } = await load('bench/lib/tail-causes.mjs');
  // Samples 1 ms apart over 60 ms: datagrams waiting, no thread running, the serving thread
  // asleep in epoll_wait (232), the core idle (a tick every 10 ms).
  const base = (over: (k: number) => Record<string, unknown> = () => ({})) =>
    Array.from({ length: 61 }, (_, k) => ({
      t: 1e9 + k * ms,
      rx: 768,
      ran: 5000,
      state: 'S',
      syscall: 232,
      idle: 100 + Math.floor(k / 10),
      ...over(k),
    }));
  assert.deepEqual(frozenStretches(base()), [[1e9, 1e9 + 60 * ms]], 'all true: one stretch, its whole length');
  // As caught on this machine: the thread woken by the data ('R', still in poll) and not run,
  // for 74 ms, on a core the guest counted as idle.
  const woken = base((k) => (k >= 3 ? { state: 'R', syscall: 7 } : {}));
  assert.deepEqual(frozenStretches(woken), [[1e9, 1e9 + 60 * ms]], 'woken and not run');
  // Each condition broken halfway: no stretch of 30 ms or more is left on either side.
  const half = (k: number) => k >= 25 && k <= 35;
  const cases: Record<string, (k: number) => Record<string, unknown>> = {
    'a thread of the server ran': (k) => (half(k) ? { ran: 5000 + k } : {}),
    'stopped (SIGSTOP), not asleep': (k) => (half(k) ? { state: 'T' } : {}),
    "in the kernel's uninterruptible wait (I/O, a page)": (k) => (half(k) ? { state: 'D' } : {}),
    'waiting on a lock (futex), not for data': (k) => (half(k) ? { syscall: 202 } : {}),
    'the socket emptied': (k) => (half(k) ? { rx: 0 } : {}),
  };
  for (const [why, over] of Object.entries(cases)) assert.deepEqual(frozenStretches(base(over)), [], why);
  // The core busy (with something else) for most of it: no idle ticks.
  assert.deepEqual(frozenStretches(base(() => ({ idle: 100 }))), [], 'core busy');
  // Too short: 25 ms.
  assert.deepEqual(frozenStretches(base().slice(0, 26)), [], 'shorter than 30 ms');
});

test("frozen core: a stopped server's waiting datagrams are seen, and are its own doing", async (t) => {
  if (!existsSync('/proc/net/udp') || !existsSync('/proc/self/task')) return t.skip('no /proc');
  const { sampleFrozenCore, udpRxQueue } = await load('bench/lib/tail-causes.mjs');
  const { readFileSync } = await import('node:fs');
  // A child with a bound UDP socket (it reads whatever comes), stopped while datagrams arrive.
  const src = `const s = require('node:dgram').createSocket('udp4'); s.on('message', () => {});
    s.bind(0, '127.0.0.1', () => console.log(s.address().port));`;
  const child = spawn(process.execPath, ['-e', src], { stdio: ['ignore', 'pipe', 'inherit'] });
  const sender = createSocket('udp4');
  try {
    const port = Number(
      await new Promise<string>((done) => child.stdout.once('data', (b: Buffer) => done(b.toString().trim()))),
    );
    const pid = child.pid as number;
    const stop = sampleFrozenCore(pid, pid, port, { cpu: 0 });
    process.kill(pid, 'SIGSTOP');
    for (let i = 0; i < 20; i++) sender.send(buildQuery('a.example.', QType.A), port, '127.0.0.1');
    await new Promise((r) => setTimeout(r, 80));
    const waiting = udpRxQueue(readFileSync('/proc/net/udp', 'latin1'), port);
    await new Promise((r) => setTimeout(r, 20));
    process.kill(pid, 'SIGCONT');
    await new Promise((r) => setTimeout(r, 30));
    assert.ok(waiting > 0, `datagrams waiting in the stopped child's socket: ${waiting} bytes`);
    assert.deepEqual(stop(), [], 'a stopped server is not a frozen core');
  } finally {
    sender.close();
    child.kill('SIGKILL');
  }
});
