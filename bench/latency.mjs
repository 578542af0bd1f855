#!/usr/bin/env node
// Latency under load (issue 11): clusterdns on a scenario of bench/scenarios.mjs, pinned to
// CPU 1 with one worker; its maximum measured with dnsperf (closed loop, as bench/run.mjs does)
// unless --max-qps is given; then an open-loop client that records every query
// (lib/latency-client.mjs, pinned to CPU 0) drives it at --load-percent (50) of that maximum,
// and drives unbound at the same rate, as the floor of what the client and the kernel add.
// With --gc the server runs with `--trace-gc` and a GC observer (lib/gc-observer.mjs, on only
// through CLUSTERDNS_GC_LOG): pauses are counted and lined up with the slow queries; and with
// lib/loop-observer.mjs (CLUSTERDNS_LOOP_LOG): its UDP batches, timers and other loop work.
// Every run reports what its ≥ p99 queries met (lib/tail-causes.mjs): the client's stalls and
// the server thread's wait for its core for every server, and clusterdns's own with --gc.
//
//   node bench/latency.mjs [--scenario cache,kubernetes] [--seconds 20] [--max-qps N]
//        [--load-percent 50] [--load dnsperf|node] [--pace spin|timer] [--sample-qps 2000]
//        [--rounds 1] [--gc] [--no-peer | --peers auto|NAME,...] [--client c|node] [--json FILE] [--keep]
//   node bench/latency.mjs --scenario forward --max-qps 10000 --load-percent 100   # what forward adds
//
// --peers (default auto): the servers measured at the same rate, interleaved with clusterdns:
//   unbound and Knot DNS; for `forward` the upstream itself and unbound forwarding (cache
//   off) asking that same upstream; for `cache` unbound forwarding with its cache, and Knot.
//   A name given twice is measured twice, by two processes (`--peers knot,knot`: `knot` and
//   `knot#2`), a control: the same server against itself in the same run. Where Knot is a peer
//   each scenario ends with every server's p99 / p99.9 × Knot's (issue 23's point 3).
//   node bench/latency.mjs --scenario cache --seconds 60 --gc      # GC pauses over 60 s
//
// --load dnsperf (default): `dnsperf -Q <rate - sample-qps> -q 1000` sends the load (paced per
//   query with usleep), the recording client sends and records --sample-qps of it on its own
//   schedule (2 queries per ms by default: it adds no bursts of its own). Cheapest for CPU 0.
// --load node: the recording client sends every query (all recorded), paced per query
//   (--pace spin: a busy loop on CPU 0, so the schedule holds to a few µs on a quiet machine,
//   but a spinning client loses most to other work on its core; --pace timer: the Node client
//   sends what is owed every 1 ms, i.e. bursts of rate/1000 queries; the C client sleeps until
//   each query's own due time).
// unbound gets so-rcvbuf 4m here, the receive buffer clusterdns sets on its UDP socket.
// --client-priority nice|normal: the recording client's scheduling on CPU 0 (default nice -10,
//   unless it spins): it shares CPU 0 with dnsperf, whose time slices would otherwise delay
//   reading answers by a few ms for every server alike.
// --client c|node|c,node: the recording client. c (default when `cc` builds it into bench/build/):
//   lib/latency-client.c, which takes each query's send and answer times from the kernel's
//   timestamps of the datagrams, so its own stalls (descheduled beside dnsperf, reading an
//   answer late) do not land in the figures; node: lib/latency-client.mjs, which times its own
//   send() and 'message' callbacks. A failed build falls back to node, saying why. c,node: every
//   server measured with each client in turn, in the same rounds (what the client adds, paired).
// Other options: --probe-seconds S (10), --skip S (1 s of each run not counted), --warmup S (5 s of
// dnsperf at the measured rate for every server before the first round), --sockets N (4),
// --timeout-ms MS (2000: no answer by then = lost), --server-node-args=FLAGS (more node flags
// for clusterdns, e.g. "--single-threaded-gc"), --variants="FLAGS;FLAGS;..." (one clusterdns per
// entry, an empty entry for none, each measured in the same interleaved rounds: a flag's effect
// on the tail before/after in one run; a NAME=VALUE token goes in that clusterdns's environment).
// --trace-returns: `perf record` (Debian's linux-perf, root) of each server's serving thread during
// every run: the gaps after its wakeups (lib/return-stalls.mjs), lined up with the slow queries as
// *return stall*. --pause-damon: the kernel's DAMON monitors (kdamond) off for the run and back on
// at the end (root): what they cost every server (BENCHMARKS.md, "DAMON"). The machine line says
// whether DAMON runs.
// CPU 1 is shielded for the run (lib/shield.mjs): every other task that may run there and can move
// (the kernel's kdamond, user processes) is moved to CPU 0 and given its affinity back at the end,
// so the servers share their core with nothing but per-CPU kernel threads; --no-shield leaves the
// machine as it is (BENCHMARKS.md, "kdamond on the server's core"). The machine line says which.
// Every run also samples CPU 1's steal (/proc/stat, lib/steal.mjs: the hypervisor giving the
// server's core to another guest, which nothing inside the machine sees): per run (*CPU 1
// stolen*), per 5 s window beside its p99 and max, the rank correlation of the two, and each
// server's p99 / p99.9 over the windows where the host took ≤ 50 ms (1%) of CPU 1.
// Every run also reads how long the server's other threads ran (/proc schedstat of every thread
// but the serving one: V8's GC and compiler helpers, libuv's pool; Knot's other workers; and
// clusterdns's event loop, "main", where its answer thread serves, as in the cache rows), by
// thread name in the log and per round beside its p99 and the serving thread's run-queue wait:
// pinned with the server, they take its core while they run (BENCHMARKS.md, "V8's helpers on
// the server's core", "The loop, not V8's helpers").
// Every run also looks for a frozen core (lib/tail-causes.mjs sampleFrozenCore, every ~1 ms):
// ≥ 30 ms in which datagrams waited in the server's socket, its serving thread was in a wait
// for data (asleep, or woken by them and not yet run), none of its threads ran and CPU 1 was
// idle. No server causes that (a woken thread runs at once on an idle core); per run in the log,
// and per scenario each server's count and its p99 / p99.9 without the queries in flight during
// one (BENCHMARKS.md, "A frozen core"). With --keep, every stretch ≥ 30 ms of datagrams waiting,
// frozen or not, is written with its samples (TAG.long-waits.json). BENCH_NO_FROZEN=1: no sampler.
// --settle S: clusterdns goes on at the rate S more seconds before round 1 (5 s turns among
// variants): past the first minute's first-time deoptimizations and recompiles (same section).
// Writes bench/results/latency-latest.md.

import { printHeaderHelp } from './lib/help.mjs';
import { mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { checkAnswers, waitAnswering } from './lib/check.mjs';
import { cpuSnapshot, otherCpuPercent, serverCpuPercent } from './lib/cpu.mjs';
import { runDnsperf } from './lib/dnsperf.mjs';
import { correlate, overlapping, parseTraceGc, readGcLog, readRaw, summarizeTrace } from './lib/gc-trace.mjs';
import {
  attribute,
  loopSummary,
  otherThreadsRunMs,
  ranSinceByName,
  ranSince,
  readLoopLog,
  sampleCoreWait,
  sampleFrozenCore,
  subtract,
  threadsRunMs,
  udpSockets,
} from './lib/tail-causes.mjs';
import { sampleSteal, spearman, stealIn } from './lib/steal.mjs';
import { shieldCpu, shieldLine } from './lib/shield.mjs';
import { killAllSync, pinThreads, runCommand, startProcess, stopAll, stopProcess } from './lib/procs.mjs';
import { machineInfo, machineLine, median, peerInstances, tailMarks } from './lib/report.mjs';
import { damonLine, pauseDamon, perfUnavailable, readReturnStalls, startReturnTrace } from './lib/return-stalls.mjs';
import { clusterdnsServer, freePort, peers } from './lib/servers.mjs';
import { buildCClient } from './lib/latency-client-build.mjs';
import { makeWorkload, sampleRecords } from './lib/workload.mjs';
import { scenarios } from './scenarios.mjs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const clientPath = join(root, 'bench/lib/latency-client.mjs');

const { values: opt } = parseArgs({
  options: {
    scenario: { type: 'string', default: 'cache,kubernetes' },
    seconds: { type: 'string', default: '20' },
    'max-qps': { type: 'string' },
    'probe-seconds': { type: 'string', default: '10' },
    'load-percent': { type: 'string', default: '50' },
    load: { type: 'string', default: 'dnsperf' },
    pace: { type: 'string', default: 'spin' },
    'sample-qps': { type: 'string', default: '2000' },
    sockets: { type: 'string', default: '4' },
    skip: { type: 'string', default: '1' },
    warmup: { type: 'string', default: '5' },
    settle: { type: 'string', default: '0' },
    'timeout-ms': { type: 'string', default: '2000' },
    rounds: { type: 'string', default: '1' },
    gc: { type: 'boolean', default: false },
    'trace-returns': { type: 'boolean', default: false },
    'pause-damon': { type: 'boolean', default: false },
    'no-shield': { type: 'boolean', default: false },
    'server-node-args': { type: 'string', default: '' },
    variants: { type: 'string' },
    'client-priority': { type: 'string', default: 'auto' },
    client: { type: 'string', default: 'auto' },
    'no-peer': { type: 'boolean', default: false },
    peers: { type: 'string', default: 'auto' },
    json: { type: 'string' },
    keep: { type: 'boolean', default: false },
    help: { type: 'boolean', short: 'h', default: false },
  },
  strict: true,
});
if (opt.help) {
  printHeaderHelp(import.meta.url);
  process.exit(0);
}
const cfg = {
  scenarios: opt.scenario
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean),
  seconds: Number(opt.seconds),
  maxQps: opt['max-qps'] === undefined ? null : Number(opt['max-qps']),
  probeSeconds: Number(opt['probe-seconds']),
  loadPercent: Number(opt['load-percent']),
  load: opt.load,
  pace: opt.pace,
  sampleQps: Number(opt['sample-qps']),
  sockets: Number(opt.sockets),
  skip: Number(opt.skip),
  warmup: Number(opt.warmup),
  settle: Number(opt.settle),
  timeoutMs: Number(opt['timeout-ms']),
  rounds: Number(opt.rounds),
  gc: opt.gc,
  traceReturns: opt['trace-returns'],
  pauseDamon: opt['pause-damon'],
  shield: !opt['no-shield'],
  clientPriority: opt['client-priority'],
  client: opt.client,
  clients: [], // the clients measured with, set once the C one has built or not
  serverNodeArgs: opt['server-node-args'].split(/\s+/).filter(Boolean),
  // One clusterdns per variant (node flags, after --server-node-args; NAME=VALUE tokens its
  // environment), measured interleaved.
  variants: (opt.variants ?? '').split(';').map((v) => {
    const tokens = v.split(/\s+/).filter(Boolean);
    const isEnv = (t) => /^[A-Z][A-Z0-9_]*=/.test(t);
    const env = Object.fromEntries(tokens.filter(isEnv).map((t) => t.split(/=(.*)/s).slice(0, 2)));
    return { label: tokens.join(' '), flags: tokens.filter((t) => !isEnv(t)), env };
  }),
  peer: !opt['no-peer'],
  peers: opt.peers
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean),
};
for (const n of cfg.scenarios) {
  if (!scenarios.some((s) => s.name === n)) {
    console.error(`--scenario: unknown "${n}"; known: ${scenarios.map((s) => s.name).join(', ')}`);
    process.exit(2);
  }
}
if (cfg.clientPriority === 'auto') cfg.clientPriority = cfg.load === 'node' && cfg.pace === 'spin' ? 'normal' : 'nice';
if (
  !['nice', 'normal'].includes(cfg.clientPriority) ||
  !['auto', 'c', 'node', 'c,node', 'node,c'].includes(cfg.client) ||
  !['node', 'dnsperf'].includes(cfg.load) ||
  !['spin', 'timer'].includes(cfg.pace) ||
  !(cfg.seconds >= 1) ||
  !(cfg.loadPercent > 0) ||
  !(cfg.rounds >= 1) ||
  !(cfg.settle >= 0) ||
  (cfg.maxQps !== null && !(cfg.maxQps > 0))
) {
  console.error('bad options; see --help');
  process.exit(2);
}

const log = (s) => process.stderr.write(`[latency ${new Date().toISOString().slice(11, 19)}] ${s}\n`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

let tmp = null;
let cleaning = null;
let restoreDamon = null; // --pause-damon: puts the machine's DAMON monitors back
let restoreShield = null; // gives the tasks moved off the server's core their own affinity back
// The shield first: a kdamond that DAMON starts again inherits kthreadd's affinity at that moment.
process.on('exit', () => {
  restoreShield?.();
  restoreDamon?.();
});
function cleanup() {
  cleaning ??= (async () => {
    await stopAll();
    restoreShield?.();
    restoreDamon?.();
    if (tmp && (opt.keep || process.exitCode)) log(`kept ${tmp} (configs, server logs, raw latencies)`);
    else if (tmp) rmSync(tmp, { recursive: true, force: true });
  })();
  return cleaning;
}
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(sig, () => {
    log(`${sig}: stopping every process this run started`);
    process.exitCode = 1;
    void cleanup().finally(() => process.exit(sig === 'SIGINT' ? 130 : 143));
  });
}
process.on('exit', () => killAllSync());

/** UDP counters of this network namespace: receive-buffer drops show where queries were lost. */
function udpCounters() {
  try {
    const lines = readFileSync('/proc/net/snmp', 'latin1')
      .split('\n')
      .filter((l) => l.startsWith('Udp:'));
    const k = lines[0].split(/\s+/);
    const v = lines[1].split(/\s+/).map(Number);
    return Object.fromEntries(k.map((name, i) => [name, v[i]]));
  } catch {
    return null;
  }
}

/**
 * Receive-buffer drops per socket (/proc/net/udp's last column) on `port`: the server's
 * socket (bound to it, not connected) and the client's (connected to it), to tell who dropped.
 */
function udpDrops(port) {
  const out = { server: 0, client: 0 };
  try {
    for (const u of udpSockets(readFileSync('/proc/net/udp', 'latin1'))) {
      if (u.localPort === port && u.remotePort === 0) out.server += u.drops;
      else if (u.remotePort === port) out.client += u.drops;
    }
  } catch {
    /* not Linux */
  }
  return out;
}

/**
 * Time the process's main thread (the event loop; unbound's one thread) spent runnable but
 * waiting for a CPU (/proc/PID/task/PID/schedstat), in ms: other work on its core, or its own
 * helper threads (V8's GC tasks share the pinned core).
 */
function runQueueWaitMs(pid, tid = pid) {
  try {
    return Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'latin1').split(' ')[1]) / 1e6;
  } catch {
    return NaN;
  }
}

/** Resident set of a process in MB (VmRSS), what a larger young generation costs. */
function rssMB(pid) {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'latin1'));
    return m ? Math.round(Number(m[1]) / 102.4) / 10 : NaN;
  } catch {
    return NaN;
  }
}

/**
 * The thread that has run longest: the event loop for clusterdns and unbound, the UDP worker
 * for Knot (its main thread only waits), so that the run-queue wait compares like with like.
 */
function busiestThread(pid) {
  let best = pid;
  let most = -1;
  for (const [tid, ran] of threadsRunMs(pid)) if (ran > most) [best, most] = [Number(tid), ran];
  return best;
}

/** CPU time (s) of this process's reaped children: the client and dnsperf, once they have exited. */
function childrenCpuS() {
  try {
    const st = readFileSync('/proc/self/stat', 'latin1');
    const f = st.slice(st.lastIndexOf(')') + 2).split(' ');
    return (Number(f[13]) + Number(f[14])) / 100; // cutime cstime, in 10 ms ticks
  } catch {
    return NaN;
  }
}

// The recording client's scheduling on CPU 0, which it shares with dnsperf: with equal
// priority, an answer can wait out a dnsperf time slice (a few ms) before the client reads it,
// and that wait lands in every server's percentiles. `nice` (default unless the client spins):
// nice -10, so the scheduler lets it run soon after an answer arrives. (SCHED_FIFO is no
// option: Node's helper threads inherit it and spin-yield each other into RT throttling.)
/**
 * The peers measured at the same rate as clusterdns on a scenario. `auto`: unbound (its `mix`
 * variant for `mix`) and Knot DNS; for `forward`, the upstream itself (what clusterdns adds
 * over it) and unbound forwarding with its cache off; for `cache`, unbound forwarding with its
 * cache on and Knot. `upstream` names the scenario's own upstream, measured directly.
 */
function peerNames(sc) {
  if (!cfg.peer) return [];
  if (!(cfg.peers.length === 1 && cfg.peers[0] === 'auto')) return cfg.peers;
  if (sc.name === 'forward') return ['upstream', 'unbound-forward'];
  if (sc.name === 'cache') return ['unbound-forward-cache', 'knot'];
  return [peers.some((p) => p.name === `unbound-${sc.name}`) ? `unbound-${sc.name}` : 'unbound', 'knot'];
}

let prio = [];
async function setClientPriority() {
  const want = cfg.clientPriority === 'nice' ? ['nice', '-n', '-10'] : [];
  if (want.length === 0) return;
  const probe = await runCommand(want[0], [...want.slice(1), 'true']).catch((e) => ({ code: 1, stderr: e.message }));
  if (probe.code === 0) prio = want;
  else {
    log(`client priority ${cfg.clientPriority} not available (${probe.stderr.trim()}): running it as is`);
    cfg.clientPriority = 'normal';
  }
}

async function startServer(def, ctx) {
  if (def.setup) {
    const skip = await def.setup(ctx);
    if (typeof skip === 'string') throw new Error(`${def.name}: ${skip}`);
  }
  const proc = def.start(ctx);
  const samples =
    def.samples?.(ctx) ??
    sampleRecords(ctx.workload.records).map((r) => ({ name: r.name, type: 'A', data: r.ip, ttl: ctx.workload.ttl }));
  await waitAnswering(
    ctx.port,
    samples[0].name,
    30000,
    () => proc.child.exitCode === null && proc.child.signalCode === null,
  );
  await def.ready?.(ctx, proc);
  const problems = await checkAnswers(ctx.port, samples);
  if (problems.length) throw new Error(`${def.name} answers wrong:\n  ${problems.join('\n  ')}`);
  log(`${def.name}: pid ${proc.pid} on 127.0.0.1:${ctx.port} (CPU 1), ${samples.length} sample answers right`);
  return proc;
}

/** The recording clients' commands: the C one when it builds (unless --client node), Node's. */
const clientCmds = { node: [process.execPath, clientPath] };
function chooseClient() {
  const want = cfg.client.split(',');
  if (want.includes('node') && want.length === 1) return void (cfg.clients = ['node']);
  const built = buildCClient();
  if (built.path) {
    clientCmds.c = [built.path];
    cfg.clients = cfg.client === 'auto' ? ['c'] : want;
  } else if (cfg.client !== 'auto') throw new Error(`--client ${cfg.client}: ${built.error}`);
  else {
    log(`recording client: node (the C client did not build: ${built.error})`);
    cfg.clients = ['node'];
  }
  cfg.client = cfg.clients.join(',');
}
/** A run's server, and with more than one client which one recorded it. */
const label = (m) => (cfg.clients.length > 1 ? `${m.name} [${m.client.client} client]` : m.name);

/** One measurement at `rate` against a started server: the client (and dnsperf) on CPU 0. */
async function measure(name, proc, ctx, queryFile, rate, tag, clientKind) {
  const raw = join(tmp, `${tag}.raw`);
  const total = cfg.seconds + cfg.skip;
  const clientRate = cfg.load === 'node' ? rate : Math.min(cfg.sampleQps, rate);
  const udp0 = udpCounters();
  const serverDrops0 = udpDrops(ctx.port).server;
  const before = cpuSnapshot(proc.pid);
  const children0 = childrenCpuS();
  const tid = busiestThread(proc.pid);
  const wait0 = runQueueWaitMs(proc.pid, tid);
  const others0 = otherThreadsRunMs(proc.pid, tid);
  const stopCoreWait = sampleCoreWait(proc.pid, tid);
  // The server's core asleep while datagrams wait in its socket: no server's doing.
  const longWaits = [];
  const stopFrozen = process.env.BENCH_NO_FROZEN
    ? () => []
    : sampleFrozenCore(proc.pid, tid, ctx.port, { onLongWait: (samples) => longWaits.push(samples) });
  // The host taking CPU 1 away (a VM's steal): invisible to the guest's own accounting.
  const stopSteal = sampleSteal(1);
  const traceFile = join(tmp, `${tag}.perf`);
  const stopTrace = cfg.traceReturns ? startReturnTrace(tid, traceFile) : null;
  // The client's sockets exist only while it runs: sample their drops just before it ends.
  let clientDrops = 0;
  const dropWatch = setInterval(() => (clientDrops = Math.max(clientDrops, udpDrops(ctx.port).client)), 200);
  const argv = [...prio, ...clientCmds[clientKind]];
  const client = runCommand(
    argv[0],
    [
      ...argv.slice(1),
      '--port',
      String(ctx.port),
      '--rate',
      String(clientRate),
      '--seconds',
      String(total),
      '--queries',
      queryFile,
      '--sockets',
      String(cfg.sockets),
      '--pace',
      cfg.load === 'node' ? cfg.pace : 'timer',
      '--skip',
      String(cfg.skip),
      '--timeout-ms',
      String(cfg.timeoutMs),
      '--raw',
      raw,
    ],
    { pin: 0, timeoutMs: (total + 60) * 1000 },
  );
  const perf =
    cfg.load === 'dnsperf' && rate - clientRate >= 1 // (-Q 0 would mean no limit)
      ? runDnsperf({ port: ctx.port, queryFile, seconds: total, pin: 0, maxQps: rate - clientRate, outstanding: 1000 })
      : null;
  const [res, dp] = await Promise.all([client, perf]);
  clearInterval(dropWatch);
  const coreWait = stopCoreWait();
  const frozen = stopFrozen();
  if (longWaits.length) writeFileSync(join(tmp, `${tag}.long-waits.json`), JSON.stringify(longWaits));
  const steal = stopSteal();
  const traced = stopTrace ? await stopTrace() : null;
  const after = cpuSnapshot(proc.pid);
  const loadGenCpu = (100 * (childrenCpuS() - children0)) / (Number(after.at - before.at) / 1e9);
  // Other work on the server's core shows as time its threads waited to run.
  const serverRunQueueWaitMs = runQueueWaitMs(proc.pid, tid) - wait0;
  const others1 = otherThreadsRunMs(proc.pid, tid);
  const otherThreadsMs = ranSince(others0, others1);
  const otherThreadsByName = ranSinceByName(proc.pid, others0, others1);
  const serverRssMB = rssMB(proc.pid);
  const udp1 = udpCounters();
  const serverDrops = udpDrops(ctx.port).server - serverDrops0;
  if (res.code !== 0) throw new Error(`latency client failed (${res.code ?? res.signal}): ${res.stderr}`);
  const c = JSON.parse(res.stdout.trim().split('\n').pop());
  const m = {
    name,
    rate,
    tag,
    raw,
    client: c,
    dnsperf: dp,
    serverCpu: serverCpuPercent(before, after),
    // User and kernel CPU of the server in ms per s: the kernel's is its sendmmsg/recvmmsg work.
    serverUserMsPerS:
      before && after ? (10 * (after.serverUser - before.serverUser)) / (Number(after.at - before.at) / 1e9) : NaN,
    serverSysMsPerS:
      before && after ? (10 * (after.serverSys - before.serverSys)) / (Number(after.at - before.at) / 1e9) : NaN,
    loadGenCpu, // client + dnsperf, % of one core (CPU 0)
    serverRunQueueWaitMs,
    otherThreadsMs,
    otherThreadsByName,
    coreWait,
    frozen,
    steal,
    // --trace-returns: the serving thread's stalls after its wakeups (lib/return-stalls.mjs).
    returnStalls: traced ? returnStalls(traceFile, traced) : undefined,
    serverRssMB,
    otherCpu: otherCpuPercent(before, after),
    udpRcvbufErrors: udp0 && udp1 ? udp1.RcvbufErrors - udp0.RcvbufErrors : null,
    serverSocketDrops: serverDrops,
    clientSocketDrops: clientDrops,
  };
  const L = c.latencyMs;
  log(
    `  ${name.padEnd(20)} ${cfg.clients.length > 1 ? `[${clientKind} client] ` : ''}${rate} QPS: p50 ${L.p50} p90 ${L.p90} p99 ${L.p99} p99.9 ${L.p999} max ${L.max} ms, lost ${c.lost}/${c.sent}` +
      `${dp ? ` (dnsperf: ${dp.sent} sent, ${dp.lost} lost, ${Math.round(dp.qps)} QPS)` : ''}; server CPU ${m.serverCpu.toFixed(0)}%, ` +
      `client CPU ${c.clientCpuPercent}% (work ${c.clientWorkPercent ?? '?'}%)${dp ? `, client + dnsperf ${loadGenCpu.toFixed(0)}%` : ''}, send lag p99 ${c.sendLagMs.p99} ms, ` +
      `client stalls ${c.stalls.count} (${c.stalls.totalMs} ms)${c.readLagMs ? `, answers read p99 ${c.readLagMs.p99} / max ${c.readLagMs.max} ms after they arrived (not counted)` : ''}, other work ${m.otherCpu.toFixed(0)}%, CPU 1 stolen by the host ${f1(stealPercent(m))}%, server waited ${serverRunQueueWaitMs.toFixed(0)} ms for its CPU, its core frozen ${frozen.length ? frozen.map(([a, b]) => `${((b - a) / 1e6).toFixed(0)} ms`).join(' + ') : 'never'}, its other threads ran ${otherThreadsMs.toFixed(0)} ms${otherThreadsByName.length ? ` (${otherThreadsByName.map(([n, ms]) => `${n} ${ms.toFixed(0)}`).join(', ')})` : ''}, ` +
      `UDP receive-buffer drops: server socket ${serverDrops}, client sockets ${clientDrops} (whole machine ${m.udpRcvbufErrors})`,
  );
  return m;
}

function returnStalls(file, traced) {
  try {
    return readReturnStalls(file);
  } catch (e) {
    log(`  --trace-returns: no trace (${e.message}; perf said: ${traced.err.trim().slice(0, 200)})`);
    return undefined;
  } finally {
    if (!opt.keep) rmSync(file, { force: true }); // ~20 MB a run
  }
}

/**
 * How far each server's p99 per 5 s window went with CPU 1's steal in the same window: Spearman's
 * rank correlation over its windows, and over every server's windows of the scenario together.
 */
function stealLine(r) {
  const ws = Object.keys(r.runs)
    .filter((w) => r.runs[w].length)
    .map((w) => [label(r.runs[w][0]), r.runs[w].flatMap((m) => m.windows).filter((x) => Number.isFinite(x.stealMs))]);
  const rho = (xs) =>
    spearman(
      xs.map((x) => x.p99Ms),
      xs.map((x) => x.stealMs),
    );
  const all = ws.flatMap(([, xs]) => xs);
  if (!all.length) return 'no steal figures (no /proc/stat steal here)';
  const f = (x) => (Number.isFinite(x) ? x.toFixed(2) : 'n/a');
  return (
    `rank correlation of a window's p99 with CPU 1's steal in it: ${ws.map(([who, xs]) => `${who} ${f(rho(xs))} (${xs.length} windows)`).join(', ')}; ` +
    `all together ${f(rho(all))}`
  );
}

/** The median of the rounds' CPU 1 steal, '—' where /proc/stat has none. */
function stealMedian(ms) {
  const v = median(ms.map(stealPercent));
  return Number.isFinite(v) ? `${v.toFixed(1)}%` : '—';
}

/** The length of the report's windows, s. */
const WINDOW_S = 5;

/** A window is "quiet" when the host took at most this much of CPU 1 in it (1% of 5 s). */
const QUIET_STEAL_MS = 50;

/**
 * pooled() over the windows in which the host took ≤ QUIET_STEAL_MS of CPU 1: each server's tail
 * with the machine's steal mostly left out, whichever minutes it drew; and how many windows that was.
 */
function quietWindows(ms) {
  const quiet = (m, w) => m.windows[w]?.stealMs <= QUIET_STEAL_MS;
  return {
    ...pooled(ms, quiet),
    windowsUsed: ms.reduce((a, m) => a + m.windows.filter((_, w) => quiet(m, w)).length, 0),
    windowsAll: ms.reduce((a, m) => a + m.windows.length, 0),
  };
}

/** CPU 1's steal over a run, in % of it (NaN where /proc/stat has no steal). */
const stealPercent = (m) => (100 * m.steal.totalMs) / 1000 / m.steal.seconds;

/** Which 5 s window (of the schedule, from the end of the skipped start) raw query i belongs to. */
const windowOf = (r, i, seconds = WINDOW_S) => Math.floor((i - Math.ceil(r.skipS * r.rate)) / (r.rate * seconds));

/**
 * Per round, the server's other threads' run time on CPU 1 beside the round's p99 and its
 * serving thread's run-queue wait: which rounds V8's helpers (for clusterdns) took the core in.
 */
function otherThreadsLine(r) {
  const ws = Object.keys(r.runs).filter((w) => r.runs[w].length);
  return (
    "p99 ms / serving thread's run-queue wait ms / the server's other threads' run ms (of which the event loop's, where another thread serves, e.g. clusterdns's answer thread), per round: " +
    ws
      .map(
        (w) =>
          `${label(r.runs[w][0])} ${r.runs[w].map((m) => `${f2(m.client.latencyMs.p99)}/${m.serverRunQueueWaitMs.toFixed(0)}/${Number.isFinite(m.otherThreadsMs) ? m.otherThreadsMs.toFixed(0) : '—'}${loopOf(m)}`).join(' ')}`,
      )
      .join('; ')
  );
}

/** " (main N)" when the event loop is among a run's other threads (the answer thread served). */
const loopOf = (m) => {
  const main = m.otherThreadsByName.find(([n]) => n === 'main');
  return main ? ` (main ${main[1].toFixed(0)})` : '';
};

/** p99 and max per 5 s window (of the schedule), from the raw file, and CPU 1's steal in each (ms). */
function windows(rawFile, steal, seconds = WINDOW_S) {
  const r = readRaw(rawFile);
  const out = [];
  for (let i = Math.ceil(r.skipS * r.rate); i < r.send.length; i++) {
    const w = windowOf(r, i, seconds);
    out[w] ??= { lat: [], lost: 0 };
    if (Number.isNaN(r.lat[i])) out[w].lost++;
    else out[w].lat.push(r.lat[i]);
  }
  return out.filter(Boolean).map((w, k) => {
    const s = Float64Array.from(w.lat).sort();
    const p = (q) => (s.length ? Math.round(s[Math.min(s.length - 1, Math.ceil(q * s.length) - 1)] / 1e4) / 100 : NaN);
    const t0 = r.startNs + (r.skipS + k * seconds) * 1e9;
    return {
      fromS: k * seconds,
      stealMs: steal ? stealIn(steal.samples, t0, t0 + seconds * 1e9) : NaN,
      p99Ms: p(0.99),
      maxMs: s.length ? Math.round(s[s.length - 1] / 1e4) / 100 : NaN,
      lost: w.lost,
    };
  });
}

async function runScenario(sc, workload) {
  const taken = new Set();
  const base = clusterdnsServer(sc);
  // One clusterdns per --variants entry (one with none), each with its own logs and port; the
  // first's setup (manifest file, upstream) serves them all, and its maximum sets the rate.
  const mine = [];
  for (const [i, { label, flags, env: varEnv }] of cfg.variants.entries()) {
    const gcLog = join(tmp, `gc-${sc.name}-v${i}.log`);
    const loopLog = join(tmp, `loop-${sc.name}-v${i}.bin`);
    const def =
      cfg.variants.length > 1
        ? {
            ...base,
            name: `${base.name} [${label || 'as deployed'}]`,
            ...(i > 0 ? { setup: undefined } : {}),
          }
        : base;
    const ctx = {
      ...(mine[0]?.ctx ?? {}),
      root,
      dir: tmp,
      workload,
      mode: i === 0 ? 'latency' : `latency-v${i}`,
      pin: 1,
      workers: 1,
      port: await freePort(taken),
      startProcess,
      nodeArgs: [
        ...cfg.serverNodeArgs,
        ...flags,
        ...(cfg.gc
          ? [
              '--trace-gc',
              '--import',
              pathToFileURL(join(root, 'bench/lib/gc-observer.mjs')).href,
              '--import',
              pathToFileURL(join(root, 'bench/lib/loop-observer.mjs')).href,
            ]
          : []),
      ],
      env: { ...process.env, ...(cfg.gc ? { CLUSTERDNS_GC_LOG: gcLog, CLUSTERDNS_LOOP_LOG: loopLog } : {}), ...varEnv },
    };
    const proc = await startServer(def, ctx);
    mine.push({ who: i === 0 ? 'clusterdns' : `clusterdns#${i + 1}`, def, proc, ctx, gcLog, loopLog });
  }
  const { def: cdef, ctx: cctx } = mine[0];
  const cqueries = cdef.queries(cctx);

  // The peer answers the same query file: unbound-mix for `mix`, unbound otherwise.
  const others = []; // { who, def, proc, ctx }
  for (const { peer: pname, name: pinst } of peerInstances(peerNames(sc))) {
    if (pname === 'upstream') {
      if (!cctx.upstream) throw new Error(`--peers upstream: scenario ${sc.name} has no upstream`);
      if (pinst !== pname) throw new Error('--peers upstream: name it once (the scenario has one upstream process)');
      const u = cctx.upstream;
      const def = { name: `upstream (${u.name})`, queries: cdef.queries };
      others.push({ who: def.name, def, proc: { pid: u.pid }, ctx: { ...cctx, port: u.port } });
      continue;
    }
    let def = peers.find((p) => p.name === pname);
    if (!def) throw new Error(`--peers: unknown "${pname}"; known: upstream, ${peers.map((p) => p.name).join(', ')}`);
    const why = def.available?.();
    if (why) {
      log(`${pname}: skipped, ${why}`);
      continue;
    }
    if (pinst !== pname) def = { ...def, name: pinst };
    // unbound's receive buffer as clusterdns's (Knot has no such option).
    if (def.extraLines || pname === 'unbound')
      def = { ...def, extraLines: [...(def.extraLines ?? []), '  so-rcvbuf: 4m'] };
    const ctx = {
      root,
      dir: tmp,
      workload,
      mode: 'latency',
      pin: 1,
      workers: 1,
      port: await freePort(taken),
      startProcess,
    };
    // A forwarder asks the same upstream as clusterdns.
    if (def.setup && cctx.upstreamPort) {
      ctx.upstreamPort = cctx.upstreamPort;
      ctx.upstream = cctx.upstream;
      def = { ...def, setup: undefined };
    }
    others.push({ who: def.name, def, proc: await startServer(def, ctx), ctx });
  }

  // Warm-up (JIT, the cache, and V8's young generation, which grows toward its maximum only as
  // objects survive scavenges), every clusterdns alike; then the maximum, closed loop.
  for (const c of mine) await runDnsperf({ port: c.ctx.port, queryFile: cqueries, seconds: 2, pin: 0 });
  for (const o of others) await runDnsperf({ port: o.ctx.port, queryFile: o.def.queries(o.ctx), seconds: 1, pin: 0 });
  let maxQps = cfg.maxQps;
  let probe = null;
  if (maxQps === null) {
    probe = await runDnsperf({ port: cctx.port, queryFile: cqueries, seconds: cfg.probeSeconds, pin: 0 });
    maxQps = probe.qps;
    log(
      `${cdef.name}: maximum ${Math.round(maxQps)} QPS (dnsperf closed loop, ${cfg.probeSeconds} s, 100 outstanding, avg ${(probe.avgLatencyS * 1000).toFixed(2)} ms)`,
    );
  }
  const rate = Math.round((maxQps * cfg.loadPercent) / 100);
  log(
    `${sc.name}: measuring at ${rate} QPS (${cfg.loadPercent}% of ${Math.round(maxQps)}), ${cfg.rounds} round(s) × ${cfg.seconds} s, load: ${cfg.load}`,
  );

  const all = [...mine, ...others];
  // Every server warmed at the measured rate first: otherwise the first one measured meets what
  // follows the closed-loop warm-up (its JIT settling at this rate, V8's memory reducer) alone.
  if (cfg.warmup > 0)
    for (const x of all)
      await runDnsperf({
        port: x.ctx.port,
        queryFile: x.def.queries(x.ctx),
        seconds: cfg.warmup,
        pin: 0,
        maxQps: rate,
      });
  // --settle: clusterdns (every variant) goes on at the rate for S more seconds, in turns of at
  // most 5 s so that none stands idle long enough for V8's memory reducer, then straight into
  // round 1: past the first minute of a server's life, in which code paths first met (the
  // first TTL expiries, the cache's first sweeps) deoptimize hot functions and V8 compiles them
  // again on its helper threads, which share the server's core (BENCHMARKS.md, "V8's helpers
  // on the server's core").
  for (let done = 0; done < cfg.settle; done += 5)
    for (const x of mine)
      await runDnsperf({
        port: x.ctx.port,
        queryFile: x.def.queries(x.ctx),
        seconds: Math.min(5, cfg.settle - done),
        pin: 0,
        maxQps: rate,
      });
  // With more than one recording client, one series per server and client.
  const key = (who, kind) => (cfg.clients.length > 1 ? `${who} [${kind}]` : who);
  const runs = Object.fromEntries(all.flatMap((x) => cfg.clients.map((kind) => [key(x.who, kind), []])));
  for (let round = 0; round < cfg.rounds; round++) {
    // The order rotates every round, so that no server always runs right after the same one.
    for (let k = 0; k < all.length; k++) {
      const { who, def, proc, ctx, gcLog, loopLog } = all[(round + k) % all.length];
      const kinds = round % 2 ? [...cfg.clients].reverse() : cfg.clients;
      for (const kind of kinds) {
        const m = await measure(
          def.name,
          proc,
          ctx,
          def.queries(ctx),
          rate,
          `${sc.name}-${def.name.replace(/\W+/g, '_')}-r${round}-${kind}`,
          kind,
        );
        m.windows = windows(m.raw, m.steal);
        if (gcLog && cfg.gc) {
          await sleep(1500); // the observer writes once a second
          m.gc = gcReport(ctx, proc.pid, gcLog, m);
        }
        m.causes = tailCauses(m, gcLog && cfg.gc ? { pid: proc.pid, gcLog, loopLog } : null);
        m.round = round;
        runs[key(who, kind)].push(m);
        await sleep(300);
      }
    }
  }
  for (const c of mine) await stopProcess(c.proc);
  for (const o of others) if (o.proc.child) await stopProcess(o.proc);
  return {
    scenario: sc.name,
    server: cdef.name,
    peers: others.map((o) => o.who),
    maxQps: Math.round(maxQps),
    probe,
    rate,
    runs,
  };
}

/**
 * What this run's slow queries met: the client's stalls and the server thread's wait for its
 * core (every server), and with --gc clusterdns's GC pauses, batches and other loop work (the
 * last two without the GC pauses inside them). Also the serving thread's summary.
 */
function tailCauses(m, own) {
  const raw = readRaw(m.raw);
  const t0 = raw.startNs + raw.skipS * 1e9;
  const t1 = raw.startNs + (raw.send.length / raw.rate) * 1e9;
  const kinds = {
    // The C client's stalls hold back neither a query's send stamp nor its answer's: no cause.
    ...(m.client.client === 'c'
      ? {}
      : { 'client stall': { iv: raw.stalls.map(([s, e]) => [raw.startNs + s, raw.startNs + e]) } }),
    'core wait': { iv: m.coreWait, weighted: true },
    ...(m.returnStalls ? { 'return stall': { iv: m.returnStalls.stalls } } : {}),
  };
  let loop = null;
  if (own) {
    const gcs = readGcLog(own.gcLog)
      .filter((g) => g.pid === own.pid)
      .map((g) => [g.startNs, g.startNs + g.durNs]);
    const l = readLoopLog(own.loopLog);
    kinds['GC pause'] = { iv: gcs };
    // Only stretches ≥ 0.1 ms: the many µs between batches (sendmmsg, recvmmsg, epoll) add up
    // over a slow query's time in flight without being what held it.
    const long = (iv) => iv.filter((x) => x[1] - x[0] >= 1e5);
    kinds.batch = { iv: long(subtract(l.batch, gcs)) };
    kinds['other loop work'] = { iv: long(subtract(l.other, gcs)) };
    loop = loopSummary(l, t0, t1);
  }
  return { ...attribute(raw, kinds, { timeoutNs: cfg.timeoutMs * 1e6 }), loop };
}

/** Start of a process on CLOCK_MONOTONIC in ms (from /proc/PID/stat's starttime, in clock ticks of 10 ms). */
function processStartMs(pid) {
  try {
    const st = readFileSync(`/proc/${pid}/stat`, 'latin1');
    return Number(st.slice(st.lastIndexOf(')') + 2).split(' ')[19]) * 10;
  } catch {
    return null;
  }
}

function gcReport(ctx, pid, gcLog, m) {
  const serverLog = readFileSync(join(ctx.dir, `${m.name}-${ctx.mode}.log`), 'utf8');
  const raw = readRaw(m.raw);
  const t0 = raw.startNs + raw.skipS * 1e9; // the counted part of the run
  const t1 = raw.startNs + (raw.send.length / raw.rate) * 1e9;
  const observed = readGcLog(gcLog).filter((g) => g.pid === pid);
  const inRun = observed.filter((g) => g.startNs >= t0 && g.startNs < t1);
  // --trace-gc stamps are ms since the isolate started. The process start (10 ms ticks) gives a
  // first offset; matching each traced GC with the observer's nearest one of the same kind
  // refines it to the median difference.
  const traced = parseTraceGc(serverLog).filter((e) => e.pid === pid);
  const coarse = processStartMs(pid);
  let offsetMs = coarse;
  const diffs = [];
  // Both list the same GCs in the same order: pair them by index, kind by kind, when the counts
  // agree; otherwise take the nearest observed GC of the kind.
  for (const kind of ['major', 'minor']) {
    const t = traced.filter((e) => (/Mark/.test(e.kind) ? 'major' : 'minor') === kind);
    const o = observed.filter((g) => g.kind === kind);
    if (t.length === o.length) t.forEach((e, i) => diffs.push(o[i].startNs / 1e6 - e.atMs));
  }
  if (diffs.length) {
    diffs.sort((a, b) => a - b);
    offsetMs = diffs[diffs.length >> 1];
  } else if (coarse !== null && observed.length) {
    for (const e of traced) {
      const kind = /Mark/.test(e.kind) ? 'major' : 'minor';
      const want = e.atMs + coarse;
      let best = null;
      for (const g of observed) {
        if (g.kind !== kind) continue;
        const d = g.startNs / 1e6 - want;
        if (Math.abs(d) < 200 && (best === null || Math.abs(d) < Math.abs(best))) best = d;
      }
      if (best !== null) diffs.push(best);
    }
    diffs.sort((a, b) => a - b);
    if (diffs.length) offsetMs = coarse + diffs[diffs.length >> 1];
  }
  // Spread of the pairing, around its median.
  const spread = diffs.length ? diffs[Math.floor(diffs.length * 0.9)] - diffs[Math.floor(diffs.length * 0.1)] : null;
  const tracedInRun =
    offsetMs === null
      ? traced
      : traced.filter((e) => {
          const t = (e.atMs + offsetMs) * 1e6;
          return t >= t0 && t < t1;
        });
  const seconds = (t1 - t0) / 1e9;
  return {
    seconds: Math.round(seconds),
    // How well the --trace-gc lines were put on the clients' clock: matched GCs, and the spread
    // (10th to 90th percentile) of their differences after the offset.
    alignment: {
      matched: diffs.length,
      of: traced.length,
      spreadMs: spread === null ? null : Math.round(spread * 100) / 100,
    },
    trace: summarizeTrace(tracedInRun, seconds),
    traceWholeProcess: { count: traced.length, over10ms: traced.filter((e) => e.pauseMs > 10).length },
    observer: {
      count: inRun.length,
      totalMs: Math.round(inRun.reduce((a, g) => a + g.durNs, 0) / 1e4) / 100,
      maxMs: Math.round(Math.max(0, ...inRun.map((g) => g.durNs)) / 1e4) / 100,
      over10ms: inRun.filter((g) => g.durNs > 10e6).length,
    },
    correlation: correlate(raw, observed, { timeoutNs: cfg.timeoutMs * 1e6 }),
    // The same without the queries in flight during one of the recording client's own stalls.
    correlationOutsideClientStalls: correlate(raw, observed, {
      timeoutNs: cfg.timeoutMs * 1e6,
      skip: overlapping(raw, raw.stalls, cfg.timeoutMs * 1e6),
    }),
  };
}

// ---- report ------------------------------------------------------------------------------
function pooled(ms, inWindow = null) {
  // Percentiles over every counted query of every round (from the raw files); and the same
  // without the queries in flight while the recording client itself stalled (its send loop
  // stopped for > 3 ms: other work on CPU 0, its GC), which are the client's delays, not the server's.
  // inWindow(m, w), when given, keeps only the queries of the windows it says yes to.
  const lat = [];
  const clean = [];
  const thawed = []; // the queries not in flight while the server's core was frozen
  let lost = 0;
  let sent = 0;
  for (const m of ms) {
    const r = readRaw(m.raw);
    const stalled = overlapping(r, r.stalls, cfg.timeoutMs * 1e6);
    const frozen = overlapping(
      r,
      (m.frozen ?? []).map(([a, b]) => [a - r.startNs, b - r.startNs]),
      cfg.timeoutMs * 1e6,
    );
    for (let i = Math.ceil(r.skipS * r.rate); i < r.send.length; i++) {
      if (inWindow && !inWindow(m, windowOf(r, i))) continue;
      sent++;
      if (Number.isNaN(r.lat[i])) lost++;
      else {
        lat.push(r.lat[i]);
        if (!stalled[i]) clean.push(r.lat[i]);
        if (!frozen[i]) thawed.push(r.lat[i]);
      }
    }
  }
  const pcts = (arr) => {
    const s = Float64Array.from(arr).sort();
    const p = (q) => (s.length ? s[Math.min(s.length - 1, Math.ceil((q / 100) * s.length) - 1)] / 1e6 : NaN);
    return { p50: p(50), p90: p(90), p99: p(99), p999: p(99.9), max: s.length ? s[s.length - 1] / 1e6 : NaN };
  };
  return {
    sent,
    lost,
    ...pcts(lat),
    clean: { ...pcts(clean), excludedPercent: lat.length ? (100 * (lat.length - clean.length)) / lat.length : 0 },
    thawed: { ...pcts(thawed), excludedPercent: lat.length ? (100 * (lat.length - thawed.length)) / lat.length : 0 },
  };
}

const f1 = (x) => (Number.isFinite(x) ? x.toFixed(1) : '—');
const f2 = (x) => (Number.isFinite(x) ? (x >= 10 ? x.toFixed(1) : x.toFixed(2)) : '—');

/**
 * Per server: the stretches in which its core was frozen (lib/tail-causes.mjs sampleFrozenCore:
 * datagrams waiting in its socket, its serving thread in a wait for data, asleep or woken and
 * not run, none of its threads running, the core idle, ≥ 30 ms), and its pooled percentiles
 * without the queries in flight during one.
 */
function frozenLine(r) {
  const parts = Object.keys(r.runs)
    .filter((w) => r.runs[w].length)
    .map((w) => {
      const ms = r.runs[w];
      const iv = ms.flatMap((m) => m.frozen ?? []);
      const lens = iv.map(([a, b]) => (b - a) / 1e6);
      const p = pooled(ms);
      return (
        `${label(ms[0])} ${iv.length}${iv.length ? ` (${lens.map((x) => x.toFixed(0)).join(', ')} ms)` : ''}, ` +
        `p99 / p99.9 without them ${f2(p.thawed.p99)} / ${f2(p.thawed.p999)} ms (${p.thawed.excludedPercent.toFixed(1)}% set aside)`
      );
    });
  return `frozen core (≥ 30 ms: datagrams waiting in the server's socket, its serving thread in a wait for data (asleep, or woken and not run), none of its threads running, CPU 1 idle): ${parts.join('; ')}`;
}

/**
 * Issue 23's point 3 read off a scenario: every other server's p99 and p99.9 (frozen cores set
 * aside, as frozenLine) over Knot's, against the marks 2 × and 1.5 ×. With `--peers knot,knot`
 * the line also reads Knot's second process against the first: what the same server scores
 * against itself in the same run, i.e. how far this machine's noise alone moves the ratio.
 */
function knotMarks(r) {
  const knot = r.runs.knot;
  if (!knot?.length) return null;
  const whos = Object.keys(r.runs).filter((w) => w !== 'knot' && r.runs[w].length);
  // Pooled over every round (what the tables show), and the median of the rounds' own figures,
  // which one noisy round of twelve does not decide.
  const pooledOf = (ms) => pooled(ms).thawed;
  const roundsOf = (ms) => {
    const each = ms.map((m) => pooled([m]).thawed);
    return { p99: median(each.map((p) => p.p99)), p999: median(each.map((p) => p.p999)) };
  };
  const x = (v) => (Number.isFinite(v) ? `${v.toFixed(2)} ×` : '—');
  const read = (of) => {
    const k = of(knot);
    const marks = tailMarks(
      k,
      whos.map((w) => ({ name: label(r.runs[w][0]), ...of(r.runs[w]) })),
    );
    return `Knot's ${f2(k.p99)} / ${f2(k.p999)} ms: ${marks.map((m) => `${m.name} ${x(m.p99x)} / ${x(m.p999x)} (${m.met ? 'met' : 'not met'})`).join(', ')}`;
  };
  return (
    `p99 / p99.9 × Knot's, frozen cores set aside, marks 2 × / 1.5 ×: pooled, ${read(pooledOf)}; ` +
    `median of the ${knot.length} rounds, ${read(roundsOf)}`
  );
}

function render(machine, results, elapsedS) {
  const out = [];
  const L = (s) => out.push(s);
  L(
    `Machine: ${machineLine(machine)}; ${machine.damon}${cfg.pauseDamon ? ' (paused for this run with --pause-damon)' : ''}; ${machine.shield}.`,
  );
  L('');
  L(
    `Command: \`node bench/latency.mjs ${process.argv.slice(2).join(' ')}\` (whole run ${Math.round(elapsedS)} s, ${new Date().toISOString().slice(0, 10)}).`,
  );
  L('');
  L(
    `Server \`taskset -c 1\` (clusterdns \`-workers 1\`${cfg.serverNodeArgs.length ? ` with node flags \`${cfg.serverNodeArgs.join(' ')}\`` : ''}, unbound 1 thread, Knot 1 UDP worker; a forwarding scenario's upstream on CPU 0); client \`taskset -c 0\`, the bench's own process too. Rate: ${cfg.loadPercent}% of clusterdns's ` +
      `maximum (${cfg.maxQps ? '--max-qps' : `dnsperf closed loop, ${cfg.probeSeconds} s`}), the same rate for every peer (measured in turn, interleaved). ` +
      (cfg.load === 'node'
        ? `Load: the recording client alone, open loop, every query recorded (pace ${cfg.pace}, ${cfg.sockets} sockets).`
        : `Load: \`dnsperf -Q <rate − ${cfg.sampleQps}> -q 1000\`, plus the recording client sending and recording ${cfg.sampleQps} QPS of it.`) +
      ` Recording client: ${cfg.clients.map((k) => (k === 'c' ? "C (`bench/lib/latency-client.c`: send and answer times are the kernel's timestamps of the datagrams, so the client's own stalls are not counted)" : 'Node (`bench/lib/latency-client.mjs`: times its own send() and reads, its stalls included)')).join(' and ')}` +
      `, priority ${cfg.clientPriority === 'nice' ? 'nice -10' : 'normal'}.` +
      ` ${cfg.warmup > 0 ? `Every server first warmed by ${cfg.warmup} s of dnsperf at the rate. ` : ''}${cfg.settle > 0 ? `clusterdns then served ${cfg.settle} s more at the rate (--settle), straight into round 1. ` : ''}${cfg.rounds} round(s) × ${cfg.seconds} s (first ${cfg.skip} s of each not counted); lost = no answer within ${cfg.timeoutMs} ms. ` +
      'Percentiles over all recorded queries of all rounds. *client CPU*: the recording client process (a spinning one takes all it gets); ' +
      '*work*: its time in send() and in answer handling; *client + dnsperf CPU*: both load generators on CPU 0, in % of that core; ' +
      '*send lag*: how late the recording client sent against its schedule (its own stalls: GC, other work on CPU 0). ' +
      "*outside client stalls*: the same percentiles without the queries that were in flight while the client's send loop stood still " +
      "for more than 3 ms (their delay is at least partly the client's); the share set aside in parentheses. " +
      "*server run-queue wait*: time the server's busiest thread (event loop; Knot's UDP worker) was ready to run but waited for CPU 1 (other work on its core, or its own helper threads), in % of the run. " +
      "*CPU 1 stolen*: time the hypervisor gave CPU 1 to something outside this machine (/proc/stat's steal; 0 on bare metal), in % of the run, median of the rounds: the server's thread stands still meanwhile and nothing inside the machine sees why.",
  );
  L('');
  L(
    '| scenario | server | max QPS | rate | recorded | lost | p50 ms | p90 ms | p99 ms | p99.9 ms | max ms | outside client stalls: p99 / p99.9 / max ms (set aside) | server CPU | client CPU (work) | client + dnsperf CPU | send lag p99 / max ms | other work | server run-queue wait | CPU 1 stolen |',
  );
  L('|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|');
  for (const r of results) {
    for (const who of Object.keys(r.runs)) {
      const ms = r.runs[who];
      if (!ms.length) continue;
      const p = pooled(ms);
      const dpLost = ms.reduce((a, m) => a + (m.dnsperf?.lost ?? 0), 0);
      L(
        `| ${r.scenario} | ${label(ms[0])} | ${who.startsWith('clusterdns') ? r.maxQps : ''} | ${r.rate} | ${p.sent} | ${p.lost}${cfg.load === 'dnsperf' ? ` (+${dpLost} of dnsperf's)` : ''} | ` +
          `${f2(p.p50)} | ${f2(p.p90)} | ${f2(p.p99)} | ${f2(p.p999)} | ${f2(p.max)} | ` +
          `${f2(p.clean.p99)} / ${f2(p.clean.p999)} / ${f2(p.clean.max)} (${p.clean.excludedPercent.toFixed(1)}%) | ${median(ms.map((m) => m.serverCpu)).toFixed(0)}% | ` +
          `${median(ms.map((m) => m.client.clientCpuPercent)).toFixed(0)}% (${median(ms.map((m) => m.client.clientWorkPercent)).toFixed(0)}%) | ${median(ms.map((m) => m.loadGenCpu)).toFixed(0)}% | ` +
          `${f2(median(ms.map((m) => m.client.sendLagMs.p99)))} / ${f2(Math.max(...ms.map((m) => m.client.sendLagMs.max)))} | ${median(ms.map((m) => m.otherCpu)).toFixed(0)}% | ${(ms.reduce((a, m) => a + m.serverRunQueueWaitMs, 0) / ms.length / cfg.seconds / 10).toFixed(1)}% | ${stealMedian(ms)} |`,
      );
    }
  }
  for (const r of results) {
    L('');
    L(
      `${r.scenario}: p99 / max ms / CPU 1 stolen ms per 5 s window: ` +
        Object.keys(r.runs)
          .filter((w) => r.runs[w].length)
          .map(
            (w) =>
              `${label(r.runs[w][0])} ${r.runs[w].map((m) => m.windows.map((x) => `${f2(x.p99Ms)}/${f2(x.maxMs)}/${x.stealMs}`).join(' ')).join(' | ')}`,
          )
          .join('; '),
    );
    L(`${r.scenario}: ${stealLine(r)}`);
    L(`${r.scenario}: ${frozenLine(r)}`);
    const marks = knotMarks(r);
    if (marks) L(`${r.scenario}: ${marks}`);
    L(`${r.scenario}: ${otherThreadsLine(r)}`);
    const q = Object.keys(r.runs)
      .filter((w) => r.runs[w].length)
      .map((w) => [label(r.runs[w][0]), quietWindows(r.runs[w])]);
    L(
      `${r.scenario}: p99 / p99.9 ms in the windows where the host took ≤ ${QUIET_STEAL_MS} ms of CPU 1: ` +
        q
          .map(([who, x]) => `${who} ${f2(x.p99)} / ${f2(x.p999)} (${x.windowsUsed} of ${x.windowsAll} windows)`)
          .join(', '),
    );
    const drops = Object.values(r.runs)
      .flat()
      .map(
        (m) =>
          `${label(m)} ${m.serverSocketDrops} / ${m.clientSocketDrops} / ${Math.max(0, (m.udpRcvbufErrors ?? 0) - m.serverSocketDrops - m.clientSocketDrops)}`,
      )
      .join(', ');
    L(
      `${r.scenario}: UDP receive-buffer drops per run, at the server's socket / the recording client's / elsewhere (dnsperf's, other processes'): ${drops}`,
    );
  }
  renderCauses(L, results);
  const gcs = results.flatMap((r) =>
    ownRuns(r)
      .filter((m) => m.gc)
      .map((m) => ({ r, m })),
  );
  if (gcs.length) {
    L('');
    L('### GC pauses (clusterdns under the same load, `--trace-gc` + PerformanceObserver)');
    L('');
    L(
      '| scenario | server | run | GCs (trace) | per s | per 100k queries | total pause ms | % of run | max pause ms | p99 pause ms | > 1 ms | > 10 ms | incremental marking steps | observer: GCs / total / max ms |',
    );
    L('|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|');
    for (const { r, m } of gcs) {
      const t = m.gc.trace;
      const inc = t.incrementalSteps
        ? `${t.incrementalSteps.cycles} cycles, ${t.incrementalSteps.totalMs} ms, biggest ${t.incrementalSteps.biggestStepMs} ms`
        : 'none';
      L(
        `| ${r.scenario} | ${label(m)} | ${m.gc.seconds} s | ${t.count} | ${t.perSecond} | ${f2((1e5 * t.perSecond) / m.rate)} | ${t.totalMs} | ${t.shareOfRunPercent}% | ${t.maxMs} | ${t.p99Ms} | ${t.over1ms} | ${t.over10ms} | ${inc} | ${m.gc.observer.count} / ${m.gc.observer.totalMs} / ${m.gc.observer.maxMs} |`,
      );
    }
    for (const { r, m } of gcs) {
      const kinds = Object.entries(m.gc.trace.byKind)
        .map(([k, v]) => `${k} ${v.count} (max ${v.maxMs} ms)`)
        .join(', ');
      L('');
      L(
        `${r.scenario}, ${label(m)}, round ${m.round + 1}: ${kinds}; any pause > 10 ms: **${m.gc.trace.over10ms > 0 || m.gc.observer.over10ms > 0 ? 'yes' : 'no'}** ` +
          `(trace lines put on the client's clock: ${m.gc.alignment.matched} of ${m.gc.alignment.of} matched, spread ${m.gc.alignment.spreadMs} ms).`,
      );
      for (const [label, c] of [
        ['all recorded queries', m.gc.correlation],
        ['outside client stalls', m.gc.correlationOutsideClientStalls],
      ]) {
        const lift = c.all.percent > 0 ? (c.atLeastP99.percent / c.all.percent).toFixed(1) : '—';
        L(
          `- ${label}: in flight during a GC pause: ${c.all.percent}% of all queries, ${c.atLeastP99.percent}% of those ≥ p99 (${c.p99Ms} ms; ${lift} × the base rate), ` +
            `${c.atLeastP999.percent}% of those ≥ p99.9 (${c.p999Ms} ms). Of the queries that met a pause, ${c.slowAmongMet.percent}% were ≥ p99 (1% if unrelated).`,
        );
        L(
          `  slowest: ${c.slowest.map((s) => `${s.latencyMs} ms at ${s.atS} s${s.gc ? ` [met ${s.gc}]` : ''}`).join('; ')}`,
        );
      }
      const c = m.gc.correlation;
      if (c.longPauses.length)
        L(
          `- longest pauses in the run: ${c.longPauses.map((p) => `${p.kind} ${p.pauseMs} ms at ${p.atS} s (slowest query in flight ${p.slowestQueryMs} ms)`).join('; ')}`,
        );
    }
  }
  return out.join('\n');
}

/** The runs of every clusterdns of a scenario (one per --variants entry), in order. */
const ownRuns = (r) =>
  Object.entries(r.runs)
    .filter(([who]) => who.startsWith('clusterdns'))
    .flatMap(([, ms]) => ms);

const CAUSES = ['client stall', 'core wait', 'return stall', 'GC pause', 'batch', 'other loop work', 'none found'];

function renderCauses(L, results) {
  L('');
  L('### What the ≥ p99 queries met (every server, same run)');
  L('');
  L(
    "Each recorded query's time in flight lined up with intervals of: *client stall* (the recording client's send loop stood still > 3 ms), " +
      "*core wait* (the server's busiest thread runnable but not running: /proc schedstat sampled every ~1 ms by the bench), with `--trace-returns` " +
      "*return stall* (that thread's gaps ≥ 0.2 ms between a wakeup's return from epoll/poll and its next system call, no context switch between: `perf record`, lib/return-stalls.mjs), and with `--gc` " +
      "clusterdns's own *GC pause* (PerformanceObserver), *batch* (one onBatch call of the native UDP path: every datagram of it waits for all of it " +
      'before the one sendmmsg) and *other loop work* (active time of the event loop between batches: timers, other sockets, V8 tasks), ' +
      "the last two without the GC pauses inside them and only their stretches ≥ 0.1 ms. A query's cause is the kind it overlapped longest, if that covers ≥ ¼ of its latency; " +
      '*met*: overlapped ≥ 0.25 ms. A pause preempted by other processes counts as both its own kind and core wait (the larger wins). ' +
      "With the C recording client, whose times are the kernel's stamps of the datagrams, its stalls are no cause (—).",
  );
  L('');
  L(
    `| scenario | server | round | p50 / p99 / p99.9 ms | ≥ p99: cause % (${CAUSES.join(' / ')}) | ≥ p99.9: cause % | met by ≥ p99 % vs all % (core wait / return stall / GC / batch / other) |`,
  );
  L('|---|---|---:|---|---|---|---|');
  const pc = (x) => (Number.isFinite(x) ? x.toFixed(x >= 10 ? 0 : 1) : '—');
  for (const r of results) {
    for (const who of Object.keys(r.runs)) {
      r.runs[who].forEach((m, round) => {
        const c = m.causes;
        if (!c) return;
        const cause = (g) => CAUSES.map((k) => pc(g.causePercent[k])).join(' / ');
        const met = ['core wait', 'return stall', 'GC pause', 'batch', 'other loop work']
          .map((k) =>
            k in c.atLeastP99.metPercent ? `${pc(c.atLeastP99.metPercent[k])} vs ${pc(c.all.metPercent[k])}` : '—',
          )
          .join(' / ');
        L(
          `| ${r.scenario} | ${label(m)} | ${round + 1} | ${f2(c.p50Ms)} / ${f2(c.p99Ms)} / ${f2(c.p999Ms)} | ${cause(c.atLeastP99)} | ${cause(c.atLeastP999)} | ${met} |`,
        );
      });
    }
  }
  const traced = results.flatMap((r) =>
    Object.values(r.runs)
      .flat()
      .filter((m) => m.returnStalls)
      .map((m) => ({ r, m })),
  );
  if (traced.length) {
    L('');
    L(
      "Every server's serving thread (`--trace-returns`: `perf record -k mono -t <tid>` of its system calls and context switches, on CPU 0): " +
        "*wakeups*: returns of its wait call (epoll_wait, epoll_pwait, poll) with events; *return stalls*: the gaps ≥ 0.2 ms from such a return to the thread's next system call " +
        'with no context switch between (its datagrams wait meanwhile); *spacing*: the median time from one to the next.',
    );
    L('');
    L('| scenario | server | round | wakeups / s | return stalls | per s | p50 / max ms | spacing s |');
    L('|---|---|---:|---:|---:|---:|---|---:|');
    for (const { r, m } of traced) {
      const s = m.returnStalls.summary;
      L(
        `| ${r.scenario} | ${label(m)} | ${m.round + 1} | ${s.seconds ? Math.round(s.wakeups / s.seconds) : '—'} | ${s.count} | ${f2(s.perSecond)} | ${s.count ? `${f2(s.p50Ms)} / ${f2(s.maxMs)}` : '—'} | ${s.spacingS ?? '—'} |`,
      );
    }
  }
  const loops = results.flatMap((r) =>
    ownRuns(r)
      .filter((m) => m.causes?.loop)
      .map((m) => ({ r, m })),
  );
  if (!loops.length) return;
  L('');
  L(
    "clusterdns's serving thread in the same runs (lib/loop-observer.mjs): the batching delay is the time from a batch's recvmmsg to its return " +
      '(its answers then leave in one sendmmsg), as a distribution over datagrams; *answered later*: datagrams whose answer left on its own ' +
      "(sendTo) after its batch; *other loop work*: the loop's active stretches between batches, the lag a datagram arriving then waits out (including each wakeup's sendmmsg, recvmmsg and epoll calls, a few µs each).",
  );
  L('');
  L(
    '| scenario | server | round | batches | datagrams / batch | batching delay p50 / p99 / p99.9 / max ms | in batches % of run | answered later | other loop work ms/s | stretches ≥ 1 ms | p99 / max stretch ms | timers ≥ 20 µs (calls, total / on a CPU / max ms) | server CPU user / kernel ms/s | V8 new space size MB (min–max) | RSS after, MB |',
  );
  L('|---|---|---:|---:|---:|---|---:|---:|---:|---:|---|---|---|---|---:|');
  for (const { r, m } of loops) {
    const l = m.causes.loop;
    const round = m.round + 1;
    L(
      `| ${r.scenario} | ${label(m)} | ${round} | ${l.batches} | ${f2(l.perBatch)} | ${f2(l.batchMs.p50)} / ${f2(l.batchMs.p99)} / ${f2(l.batchMs.p999)} / ${f2(l.batchMs.max)} | ${l.batchShareOfRunPercent}% | ${l.answeredLaterPercent}% | ` +
        `${f2(l.other.perSecondMs)} | ${l.other.over1ms} | ${f2(l.other.p99Ms)} / ${f2(l.other.maxMs)} | ${l.timers.map((t) => `\`${t.name}\` (${t.calls}, ${t.totalMs} / ${t.cpuMs} / ${t.maxMs})`).join('; ') || 'none ≥ 20 µs'} | ${f2(m.serverUserMsPerS)} / ${f2(m.serverSysMsPerS)} | ${l.youngMB ? `${l.youngMB.min}–${l.youngMB.max}` : '—'} | ${f2(m.serverRssMB)} |`,
    );
  }
}

async function main() {
  const t0 = Date.now();
  tmp = mkdtempSync(join(tmpdir(), 'clusterdns-latency-'));
  const workload = makeWorkload(tmp);
  const machine = await machineInfo();
  log(`machine: ${machineLine(machine)}; temp dir ${tmp}`);
  if (cfg.traceReturns) {
    const why = perfUnavailable();
    if (why) throw new Error(`--trace-returns: ${why}`);
  }
  machine.damon = damonLine();
  if (cfg.pauseDamon) {
    restoreDamon = pauseDamon();
    log(`--pause-damon: ${machine.damon}: off for this run, back on at the end`);
  }
  if (cfg.shield) {
    const shield = shieldCpu(1);
    restoreShield = shield.restore;
    machine.shield = shieldLine(1, shield);
    log(machine.shield);
  } else machine.shield = 'CPU 1 not shielded (--no-shield): other tasks may run on the server core';
  // This process samples every server's schedstat each ~1 ms and parses the clients' output: on the
  // servers' core it would take turns with the server under test (its own tail), so it keeps to the clients'.
  await pinThreads(process.pid, 0);
  chooseClient();
  log(`recording client: ${cfg.clients.map((k) => `${k} (${clientCmds[k].join(' ')})`).join(', ')}`);
  await setClientPriority();
  const results = [];
  for (const name of cfg.scenarios)
    results.push(
      await runScenario(
        scenarios.find((s) => s.name === name),
        workload,
      ),
    );
  const md = render(machine, results, (Date.now() - t0) / 1000);
  process.stdout.write('\n' + md + '\n');
  mkdirSync(join(root, 'bench/results'), { recursive: true });
  writeFileSync(join(root, 'bench/results/latency-latest.md'), md + '\n');
  log('wrote bench/results/latency-latest.md');
  if (opt.json) {
    const strip = (m) => ({
      ...m,
      raw: undefined,
      coreWait: undefined,
      steal: { totalMs: m.steal.totalMs, seconds: m.steal.seconds },
      returnStalls: m.returnStalls ? m.returnStalls.summary : undefined,
    });
    writeFileSync(
      opt.json,
      JSON.stringify(
        {
          config: cfg,
          machine,
          results: results.map((r) => ({
            ...r,
            runs: Object.fromEntries(Object.entries(r.runs).map(([k, v]) => [k, v.map(strip)])),
          })),
        },
        null,
        2,
      ),
    );
    log(`wrote ${opt.json}`);
  }
}

main()
  .catch((e) => {
    console.error(`latency: ${e.stack ?? e}`);
    process.exitCode = 1;
  })
  .finally(() => cleanup());
