#!/usr/bin/env node
// Side-by-side measurement of the UDP paths, interleaved in one run:
// clusterdns `hosts` with the native batched socket, the same with CLUSTERDNS_NATIVE_UDP=0
// (node:dgram), the bare Node responder and unbound. Reuses bench/lib (same workload,
// dnsperf settings and CPU accounting as bench/run.mjs); prints one line per measurement
// and a median table at the end.
//
//   node native/bench-compare.mjs [--pinned|--unpinned] [--rounds 3] [--seconds 8]
//        [--only js,native,shared,auto,reuseport,bare,unbound,js1,native1,jsU1,nativeU1] [--workers N] [--tcp]
//
// Pinned: servers on CPU 1 (1 worker), dnsperf on CPU 0. Unpinned: nothing pinned, clusterdns
// with --workers (default 2); `js1`/`native1` add pinned one-worker rows for the
// unpinned-vs-pinned comparison in the same run; `jsU1`/`nativeU1` unpinned one-worker rows.
// With several workers `native` is the default (a socket per worker, steered by question name);
// `shared`: CLUSTERDNS_NATIVE_UDP=shared (one socket, each query handed to the worker owning
// its name); `js` (node:dgram) hands queries over the same way; `auto`: native without
// -workers (the server's default count). --tcp: dnsperf -m tcp (4 connections; with several
// workers about half the queries are handed to another worker).

import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { checkAnswers, waitAnswering } from '../bench/lib/check.mjs';
import { cpuSnapshot, otherCpuPercent, serverCpuPercent } from '../bench/lib/cpu.mjs';
import { runDnsperf } from '../bench/lib/dnsperf.mjs';
import { killAllSync, startProcess, stopAll } from '../bench/lib/procs.mjs';
import { bareNode, freePort, unbound } from '../bench/lib/servers.mjs';
import { makeWorkload, sampleRecords } from '../bench/lib/workload.mjs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const { values: flags } = parseArgs({
  options: {
    pinned: { type: 'boolean', default: false },
    unpinned: { type: 'boolean', default: false },
    rounds: { type: 'string', default: '3' },
    seconds: { type: 'string', default: '8' },
    only: { type: 'string', default: 'js,native,bare,unbound' },
    workers: { type: 'string', default: '2' },
    tcp: { type: 'boolean', default: false },
    keep: { type: 'boolean', default: false },
  },
});
const pinnedMode = !flags.unpinned;
const rounds = Number(flags.rounds);
const seconds = Number(flags.seconds);
const unpinnedWorkers = Number(flags.workers);
const log = (s) => process.stderr.write(s + '\n');

function clusterdns(name, env, forcePinned, workers) {
  return {
    name,
    pinned: forcePinned ?? pinnedMode,
    workers,
    label: (ctx) => `clusterdns hosts ${name} (${ctx.workers || 'default'} worker${ctx.workers !== 1 ? 's' : ''})`,
    start(ctx) {
      const conf = join(ctx.dir, `Corefile-${name}`);
      writeFileSync(
        conf,
        `cluster.local:${ctx.port} {\n    bind 127.0.0.1\n    hosts ${ctx.workload.hostsFile} {\n        ttl ${ctx.workload.ttl}\n    }\n}\n`,
      );
      return startProcess(
        name,
        process.execPath,
        [
          '--max-semi-space-size=2',
          join(root, 'bin/clusterdns'),
          '-conf',
          conf,
          ...(ctx.workers > 0 ? ['-workers', String(ctx.workers)] : []),
          '-quiet',
        ],
        { pin: ctx.pin, logFile: join(ctx.dir, `${name}.log`), cwd: root, env: { ...process.env, ...env } },
      );
    },
  };
}

const defs = {
  js: clusterdns('js', { CLUSTERDNS_NATIVE_UDP: '0' }),
  native: clusterdns('native', { CLUSTERDNS_NATIVE_UDP: '1' }),
  reuseport: clusterdns('reuseport', { CLUSTERDNS_NATIVE_UDP: 'reuseport' }),
  shared: clusterdns('shared', { CLUSTERDNS_NATIVE_UDP: 'shared' }),
  auto: clusterdns('auto', { CLUSTERDNS_NATIVE_UDP: '1' }, false, 0),
  js1: clusterdns('js1', { CLUSTERDNS_NATIVE_UDP: '0' }, true),
  native1: clusterdns('native1', { CLUSTERDNS_NATIVE_UDP: '1' }, true),
  // Unpinned, one worker: what the second worker adds when nothing is pinned.
  nativeU1: clusterdns('nativeU1', { CLUSTERDNS_NATIVE_UDP: '1' }, false, 1),
  jsU1: clusterdns('jsU1', { CLUSTERDNS_NATIVE_UDP: '0' }, false, 1),
  bare: {
    name: 'bare',
    pinned: pinnedMode,
    label: (ctx) => `bare responder (${ctx.workers})`,
    start: (ctx) => bareNode.start(ctx),
  },
  unbound: {
    name: 'unbound',
    pinned: pinnedMode,
    label: (ctx) => `unbound (${ctx.workers})`,
    start: (ctx) => unbound.start(ctx),
  },
};

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const median = (a) => {
  const s = [...a].sort((x, y) => x - y);
  return s.length ? s[Math.floor((s.length - 1) / 2)] : NaN;
};

let tmp;
process.on('exit', () => {
  killAllSync();
  if (tmp && !flags.keep) rmSync(tmp, { recursive: true, force: true });
});
process.on('SIGINT', () => process.exit(130));

async function main() {
  tmp = mkdtempSync(join(tmpdir(), 'clusterdns-native-bench-'));
  const workload = makeWorkload(tmp);
  const taken = new Set();
  const rows = [];
  for (const n of flags.only.split(',')) {
    const def = defs[n];
    if (!def) throw new Error(`unknown server ${n} (known: ${Object.keys(defs).join(', ')})`);
    const workers = def.workers ?? (def.pinned ? 1 : unpinnedWorkers);
    const ctx = {
      root,
      dir: tmp,
      workload,
      mode: def.pinned ? 'pinned' : 'unpinned',
      pin: def.pinned ? 1 : null,
      workers,
      port: await freePort(taken),
      startProcess,
    };
    taken.add(ctx.port);
    const proc = def.start(ctx);
    const samples = sampleRecords(workload.records).map((r) => ({
      name: r.name,
      type: 'A',
      data: r.ip,
      ttl: workload.ttl,
    }));
    await waitAnswering(ctx.port, samples[0].name, 20000, () => proc.child.exitCode === null);
    const problems = await checkAnswers(ctx.port, samples);
    if (problems.length) throw new Error(`${n} answers wrong: ${problems.join('; ')}`);
    rows.push({ def, ctx, proc, runs: [] });
    log(`${def.label(ctx)}: pid ${proc.pid}, port ${ctx.port}`);
  }
  const mode = flags.tcp ? 'tcp' : undefined;
  for (const r of rows)
    await runDnsperf({
      port: r.ctx.port,
      queryFile: workload.queryFile,
      seconds: 1,
      pin: r.def.pinned ? 0 : null,
      mode,
    });
  for (let round = 0; round < rounds; round++) {
    for (let k = 0; k < rows.length; k++) {
      const r = rows[(round + k) % rows.length];
      const before = cpuSnapshot(r.proc.pid);
      const res = await runDnsperf({
        port: r.ctx.port,
        queryFile: workload.queryFile,
        seconds,
        pin: r.def.pinned ? 0 : null,
        mode,
      });
      const after = cpuSnapshot(r.proc.pid);
      res.serverCpu = serverCpuPercent(before, after);
      res.us = ((after.server - before.server) * 1e4) / res.completed;
      res.other = otherCpuPercent(before, after);
      r.runs.push(res);
      log(
        `round ${round + 1} ${r.def.label(r.ctx).padEnd(36)} ${(res.qps / 1000).toFixed(1).padStart(6)}k QPS  ${(res.avgLatencyS * 1000).toFixed(2)} ms  ` +
          `lost ${res.lost}  CPU ${res.serverCpu.toFixed(0)}%  ${res.us.toFixed(1)} µs/q  other ${res.other.toFixed(0)}%`,
      );
      await sleep(200);
    }
  }
  const problems = [];
  for (const r of rows) {
    const p = await checkAnswers(
      r.ctx.port,
      sampleRecords(workload.records).map((x) => ({ name: x.name, type: 'A', data: x.ip, ttl: workload.ttl })),
    );
    if (p.length) problems.push(`${r.def.name}: ${p.join('; ')}`);
  }
  await stopAll();
  const out = [
    '| server | QPS (median) | QPS per round | µs/query (median) | server CPU | other work (median) | lost |',
    '|---|---:|---|---:|---:|---:|---:|',
  ];
  for (const r of rows) {
    out.push(
      `| ${r.def.label(r.ctx)} | ${(median(r.runs.map((x) => x.qps)) / 1000).toFixed(1)}k | ${r.runs.map((x) => (x.qps / 1000).toFixed(1) + 'k').join(', ')} | ` +
        `${median(r.runs.map((x) => x.us)).toFixed(1)} | ${median(r.runs.map((x) => x.serverCpu)).toFixed(0)}% | ${median(r.runs.map((x) => x.other)).toFixed(0)}% | ${r.runs.reduce((a, x) => a + x.lost, 0)} |`,
    );
  }
  process.stdout.write(out.join('\n') + '\n');
  if (problems.length) process.stdout.write(`answers wrong after load: ${problems.join(' / ')}\n`);
}

main().catch((e) => {
  log(e.stack ?? String(e));
  process.exit(1);
});
