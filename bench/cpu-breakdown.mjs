#!/usr/bin/env node
// Where a server's CPU per answered query goes (issue 23, point 2): clusterdns on scenarios of
// bench/scenarios.mjs and Knot DNS, each pinned to CPU 1 in turn, under the closed-loop dnsperf
// load of bench/run.mjs (pinned to CPU 0), profiled with `perf record -e cpu-clock` (a software
// clock: no hardware counters needed) over every thread of the server. clusterdns runs with
// `--perf-basic-prof` (JIT'd JS gets names) and lib/gc-observer.mjs (scavenge pauses).
// Each sample is put in one bucket by its stack: kernel work under recvmmsg / sendmmsg / sendto /
// epoll_wait / other syscalls / no syscall frame (loopback softirq delivery, or a stack cut
// short); the native addon's C; the N-API crossing (napi_*,
// node's callback scope, V8's JS entry); JS (JIT'd code and V8's builtins); GC; the rest of V8
// and Node; libc. CPU µs per query = the process's utime + stime (from /proc) ÷ answered
// queries, split by the buckets' sample shares. Rounds interleave the servers.
//
//   node bench/cpu-breakdown.mjs [--scenario hosts,kubernetes,cache] [--seconds 10] [--rounds 2]
//        [--frequency 1999] [--rate QPS] [--no-knot] [--knot-own-affinity] [--keep]
//
// The kernel's sendmmsg time is also split by what it does (on loopback it includes delivering
// each answer into the client's socket and waking the client), and `perf stat` over the same
// window counts the system calls and the wakeups the server made per query. --rate caps
// dnsperf's rate (-Q) so that every server is measured at the same pace. Knot pins its UDP worker
// to CPU 0 itself (dnsperf's core); it is put back on CPU 1 once it answers, and
// --knot-own-affinity adds a second Knot left where it put itself, for comparison.
//
// Needs `perf` (Debian: linux-perf) and permission to profile (root or perf_event_paranoid ≤ 1).
// Writes bench/results/cpu-breakdown-latest.md.

import { mkdtempSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
const perfMaps = []; // /tmp/perf-PID.map files --perf-basic-prof leaves behind
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { checkAnswers, waitAnswering } from './lib/check.mjs';
import { cpuSnapshot, otherCpuPercent } from './lib/cpu.mjs';
import { runDnsperf } from './lib/dnsperf.mjs';
import { readGcLog } from './lib/gc-trace.mjs';
import { pathToFileURL } from 'node:url';
import { printHeaderHelp } from './lib/help.mjs';
import { killAllSync, runCommand, startProcess, stopAll, stopProcess } from './lib/procs.mjs';
import { machineInfo, machineLine } from './lib/report.mjs';
import { clusterdnsServer, freePort, knot } from './lib/servers.mjs';
import { makeWorkload, sampleRecords } from './lib/workload.mjs';
import { scenarios } from './scenarios.mjs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const { values: opt } = parseArgs({
  options: {
    scenario: { type: 'string', default: 'hosts,kubernetes,cache' },
    seconds: { type: 'string', default: '10' },
    rounds: { type: 'string', default: '2' },
    frequency: { type: 'string', default: '1999' },
    rate: { type: 'string', default: '1000000' },
    'knot-own-affinity': { type: 'boolean', default: false },
    'no-knot': { type: 'boolean', default: false },
    keep: { type: 'boolean', default: false },
    help: { type: 'boolean', short: 'h', default: false },
  },
  strict: true,
});
if (opt.help) {
  printHeaderHelp(import.meta.url);
  process.exit(0);
}
const seconds = Number(opt.seconds);
const rounds = Number(opt.rounds);
const names = opt.scenario
  .split(',')
  .map((s) => s.trim())
  .filter(Boolean);
for (const n of names) {
  if (!scenarios.some((s) => s.name === n)) {
    console.error(`--scenario: unknown "${n}"`);
    process.exit(2);
  }
}
const log = (s) => process.stderr.write(`[cpu-breakdown ${new Date().toISOString().slice(11, 19)}] ${s}\n`);

let tmp = null;
async function cleanup() {
  await stopAll();
  for (const f of perfMaps) rmSync(f, { force: true });
  if (tmp && !opt.keep && !process.exitCode) rmSync(tmp, { recursive: true, force: true });
  else if (tmp) log(`kept ${tmp}`);
}
for (const sig of ['SIGINT', 'SIGTERM']) process.on(sig, () => void cleanup().finally(() => process.exit(130)));
process.on('exit', () => killAllSync());

// ---- buckets -----------------------------------------------------------------------------
const BUCKETS = [
  'kernel: recvmmsg',
  'kernel: sendmmsg',
  'kernel: sendto/sendmsg',
  'kernel: recvfrom/recvmsg',
  'kernel: epoll_wait',
  'kernel: other syscalls',
  'kernel: no syscall frame',
  'addon (C)',
  'N-API crossing',
  'JS (JIT code)',
  'JS (V8 builtins)',
  'GC',
  'V8 compiler',
  'V8/Node other',
  'libuv',
  'libc',
  'Knot (its code)',
  'other',
];

const GC_RE =
  /v8::internal::(Heap|Scavenge|Scavenger|MarkCompact|MinorMarkCompact|Sweeper|Marking|ConcurrentMarking|IncrementalMarking|Evacuat|MemoryAllocator|PagedSpace|SemiSpace|NewSpace|LargeObjectSpace|GCTracer|ObjectVisitor|MainMarkingVisitor|YoungGeneration|RememberedSet|SlotSet|PointersUpdating|MemoryChunk|LocalHeap|Safepoint|ArrayBufferSweeper|Page)/;
const CROSS_RE =
  /napi_|v8impl|node::InternalCallbackScope|node::InternalMakeCallback|node::MakeCallback|node::CallbackScope|node::AsyncWrap|node::Environment::RunAndClear|v8::Function::Call|v8::internal::Execution|Builtins_JSEntry|Builtins_JSEntryTrampoline|Builtins_CallApiCallback|Builtins_CEntry|v8::internal::Builtin_HandleApiCall|v8::internal::FunctionCallbackArguments|v8::(Object|ArrayBuffer|Int32Array|Number|Integer|HandleScope|EscapableHandleScope|Isolate)::/;

/** One sample's frames (leaf first: `sym (dso)`) → bucket. */
function bucketOf(frames, comm, isKnot) {
  const leaf = frames[0] ?? { sym: '', dso: '' };
  const kernel = (f) => f.dso.includes('kernel') || (f.dso === '[unknown]' && /^0xffff/.test(f.addr ?? ''));
  if (kernel(leaf)) {
    // The syscall entry nearest the root names the call (sendmmsg runs ___sys_sendmsg inside).
    let sc = null;
    for (const f of frames) {
      const m = /^(?:__x64_sys|__ia32_sys|__se_sys|__do_sys)_(\w+)/.exec(f.sym);
      if (m) sc = m[1];
    }
    if (sc === 'recvmmsg') return 'kernel: recvmmsg';
    if (sc === 'sendmmsg') return 'kernel: sendmmsg';
    if (sc === 'sendto' || sc === 'sendmsg') return 'kernel: sendto/sendmsg';
    if (sc === 'recvfrom' || sc === 'recvmsg') return 'kernel: recvfrom/recvmsg';
    if (sc && /^epoll_/.test(sc)) return 'kernel: epoll_wait';
    if (sc) return 'kernel: other syscalls';
    return 'kernel: no syscall frame'; // softirq delivery on loopback, or a stack perf cut short
  }
  if (isKnot) {
    if (/libc[.-]/.test(leaf.dso)) return 'libc';
    return 'Knot (its code)';
  }
  // Any GC frame on the stack (V8 helper threads mark and sweep concurrently) → GC.
  if (frames.some((f) => GC_RE.test(f.sym))) return 'GC';
  if (
    /V8 (Default|Worker)|TurboFan|Compile/.test(comm) ||
    frames.some((f) =>
      /v8::internal::(compiler|maglev|baseline|Compiler|OptimizingCompileDispatcher|Turbofan)/.test(f.sym),
    )
  )
    return 'V8 compiler';
  if (leaf.dso.includes('udpbatch')) return 'addon (C)';
  if (/perf-\d+\.map|\[JIT\]|jitted/.test(leaf.dso) || /^(LazyCompile|Function|JS|Script|Eval):/.test(leaf.sym))
    return 'JS (JIT code)';
  if (/^Builtins?_|^Builtin:/.test(leaf.sym) && !CROSS_RE.test(leaf.sym)) return 'JS (V8 builtins)';
  if (CROSS_RE.test(leaf.sym)) return 'N-API crossing';
  if (/^uv_|^uv__/.test(leaf.sym) || /libuv/.test(leaf.dso)) return 'libuv';
  if (/libc[.-]|libstdc\+\+|libm[.-]|libpthread/.test(leaf.dso)) return 'libc';
  if (/node|\[unknown\]/.test(leaf.dso)) return 'V8/Node other';
  return 'other';
}

// What a sample under sendmmsg is doing, by the first of these found on its stack. On loopback the
// receive softirq runs inside the sender's call, so the client's delivery is charged to it.
const SEND_PARTS = [
  ['sendmmsg: freeing answers the client read (skb_defer_free_flush)', /^skb_defer_free_flush$/],
  ['sendmmsg: waking the client (sock_def_readable)', /^sock_def_readable$/],
  ["sendmmsg: queueing on the client's socket (rest of __udp_enqueue_schedule_skb)", /^__udp_enqueue_schedule_skb$/],
  ['sendmmsg: loopback receive, IP and UDP (rest of the softirq)', /^(net_rx_action|handle_softirqs)$/],
  ['sendmmsg: send buffer release, our write-space wakeup (sock_wfree)', /^sock_wfree$/],
  ['sendmmsg: loopback transmit, backlog (rest of __dev_queue_xmit)', /^__dev_queue_xmit$/],
  ['sendmmsg: building the skb (ip_make_skb: allocation, copy)', /^ip_make_skb$/],
  ['sendmmsg: route lookup', /^ip_route_output_flow$/],
  ['sendmmsg: rest of udp_sendmsg', /^udp_sendmsg$/],
  ['sendmmsg: msghdr copy-in, syscall entry, other', /./],
];

function sendPartOf(frames) {
  for (const [name, re] of SEND_PARTS) if (frames.some((f) => re.test(f.sym))) return name;
  return SEND_PARTS[SEND_PARTS.length - 1][0];
}

/** `perf script` text → { buckets: {name: samples}, total, topJs: [[sym, n]], topOther }. */
function classify(text, isKnot) {
  const buckets = Object.fromEntries(BUCKETS.map((b) => [b, 0]));
  const sendParts = Object.fromEntries(SEND_PARTS.map(([b]) => [b, 0]));
  const jsSyms = new Map();
  const leafSyms = new Map();
  let total = 0;
  for (const block of text.split(/\n\s*\n/)) {
    const lines = block.split('\n').filter((l) => l.trim());
    if (!lines.length) continue;
    const head = /^\s*(\S.*?)\s+\d+(?:\/\d+)?\s*$/.exec(lines[0]);
    const comm = head ? head[1] : '';
    const frames = [];
    for (const l of lines.slice(1)) {
      const m = /^\s*([0-9a-f]+)\s+(.*?)\s+\(([^)]*)\)\s*$/.exec(l);
      if (m) frames.push({ addr: m[1], sym: m[2].replace(/\+0x[0-9a-f]+$/, ''), dso: m[3] });
    }
    if (!frames.length) continue;
    const b = bucketOf(frames, comm, isKnot);
    buckets[b]++;
    if (b === 'kernel: sendmmsg') sendParts[sendPartOf(frames)]++;
    total++;
    const key = `${frames[0].sym} (${frames[0].dso.split('/').pop()})`;
    if (b === 'JS (JIT code)' || b === 'JS (V8 builtins)') jsSyms.set(key, (jsSyms.get(key) ?? 0) + 1);
    leafSyms.set(`${b} | ${key}`, (leafSyms.get(`${b} | ${key}`) ?? 0) + 1);
  }
  const top = (m, n) => [...m.entries()].sort((a, b) => b[1] - a[1]).slice(0, n);
  return { buckets, sendParts, total, topJs: top(jsSyms, 12), topLeaf: top(leafSyms, 25) };
}

const STAT_EVENTS = [
  'syscalls:sys_enter_sendmmsg',
  'syscalls:sys_enter_recvmmsg',
  'syscalls:sys_enter_epoll_wait',
  'syscalls:sys_enter_epoll_pwait',
  'sched:sched_waking',
  'sched:sched_switch',
];

/** perf stat -x, output → { event: count } (missing or unsupported events left out). */
function readStat(file) {
  const out = {};
  try {
    for (const l of readFileSync(file, 'latin1').split('\n')) {
      const f = l.split(',');
      if (f.length > 2 && /^\d+$/.test(f[0])) out[f[2]] = Number(f[0]);
    }
  } catch {
    // no file: perf stat could not attach
  }
  return out;
}

/** The distinct CPU lists its threads may run on, e.g. "1" or "0,1" (from /proc). */
function threadCpus(pid) {
  const lists = new Set();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    const m = /Cpus_allowed_list:\s*(\S+)/.exec(readFileSync(`/proc/${pid}/task/${tid}/status`, 'latin1'));
    if (m) lists.add(m[1]);
  }
  return [...lists].join(' and ');
}

function statTimes(pid) {
  // utime, stime of the whole process (all threads), in clock ticks.
  const s = readFileSync(`/proc/${pid}/stat`, 'latin1');
  const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
  return { user: Number(f[11]), sys: Number(f[12]) };
}

async function measureOne(target, ctx, queryFile, round) {
  const data = join(tmp, `${target.name}-r${round}.perf`);
  const t0 = statTimes(target.proc.pid);
  const snap0 = cpuSnapshot(target.proc.pid);
  const from = process.hrtime.bigint();
  const perf = runCommand(
    'perf',
    [
      'record',
      '-e',
      'cpu-clock',
      '-F',
      opt.frequency,
      '-g',
      '-p',
      String(target.proc.pid),
      '-o',
      data,
      '--',
      'sleep',
      String(seconds),
    ],
    { timeoutMs: (seconds + 60) * 1000 },
  );
  // Calls and wakeups in the server's context over the same window (tracepoints; none on failure).
  const statFile = join(tmp, `${target.name}-r${round}.stat`);
  const stat = runCommand(
    'perf',
    ['stat', '-x', ',', '-o', statFile, ...STAT_EVENTS.flatMap((e) => ['-e', e]), '-p', String(target.proc.pid)].concat(
      ['--', 'sleep', String(seconds)],
    ),
    { timeoutMs: (seconds + 60) * 1000 },
  );
  const dp = await runDnsperf({ port: ctx.port, queryFile, seconds, pin: 0, maxQps: Number(opt.rate) });
  const pr = await perf;
  const counts = await stat.then(
    () => readStat(statFile),
    () => ({}),
  );
  const t1 = statTimes(target.proc.pid);
  const snap1 = cpuSnapshot(target.proc.pid);
  if (pr.code !== 0) throw new Error(`perf record failed: ${pr.stderr}`);
  const script = await runCommand('perf', ['script', '-i', data, '-F', 'comm,tid,ip,sym,dso'], { timeoutMs: 300000 });
  const cls = classify(script.stdout, target.kind === 'knot');
  const q = dp.completed;
  const to = process.hrtime.bigint();
  await new Promise((r) => setTimeout(r, 1500)); // the GC observer writes once a second
  const gc = target.gcLog
    ? readGcLog(target.gcLog).filter(
        (g) => g.pid === target.proc.pid && g.startNs >= Number(from) && g.startNs < Number(to),
      )
    : null;
  return {
    name: target.name,
    round,
    qps: dp.qps,
    completed: q,
    usPerQuery: ((t1.user - t0.user + t1.sys - t0.sys) * 1e4) / q,
    userUs: ((t1.user - t0.user) * 1e4) / q,
    sysUs: ((t1.sys - t0.sys) * 1e4) / q,
    // GC pauses of the main thread over the measurement (lib/gc-observer.mjs), µs per query.
    // Scavenges only: a major GC's entry spans its concurrent marking, not a pause.
    gcPauseUs: gc ? gc.filter((g) => g.kind === 'minor').reduce((a, g) => a + g.durNs, 0) / 1e3 / q : null,
    gcCount: gc ? gc.filter((g) => g.kind === 'minor').length : null,
    majorGcs: gc ? gc.filter((g) => g.kind === 'major').length : null,
    otherCpu: otherCpuPercent(snap0, snap1),
    load: Number(readFileSync('/proc/loadavg', 'latin1').split(' ')[0]),
    counts,
    ...cls,
  };
}

function render(machine, results, elapsedS) {
  const out = [];
  const L = (s) => out.push(s);
  L(`Machine: ${machineLine(machine)}.`);
  L('');
  L(
    `Command: \`node bench/cpu-breakdown.mjs ${process.argv.slice(2).join(' ')}\` (${rounds} round(s) × ${seconds} s per server, interleaved; whole run ${Math.round(elapsedS)} s, ${new Date().toISOString().slice(0, 10)}).`,
  );
  L('');
  L(
    'Server `taskset -c 1` (clusterdns `-workers 1`, `--perf-basic-prof` and lib/gc-observer.mjs; Knot 1 UDP worker, all its threads put back on CPU 1 once it answers' +
      `${opt['knot-own-affinity'] ? '; *knot-own-affinity*: its UDP worker left on CPU 0, where Knot pins it' : ''}), ` +
      'dnsperf `taskset -c 0` closed loop as in `npm run bench`; ' +
      `\`perf record -e cpu-clock -F ${opt.frequency} -g -p PID\` and \`perf stat\` (system calls, sched_waking, sched_switch) over the same ${seconds} s` +
      `${Number(opt.rate) < 1000000 ? `, dnsperf capped at ${opt.rate} QPS (-Q)` : ''}. ` +
      '*↳ sendmmsg:* rows split the sendmmsg row by the first of skb_defer_free_flush, sock_def_readable, __udp_enqueue_schedule_skb, the softirq, sock_wfree, __dev_queue_xmit, ip_make_skb, ip_route_output_flow, udp_sendmsg on the stack. ' +
      `CPU µs/query from /proc (utime + stime of every thread) ÷ answered queries; ` +
      'each bucket = that × its share of the samples (medians over rounds); *GC* holds every sample with a V8 heap/GC frame on its stack, on any thread. ' +
      "*scavenge pauses*: the PerformanceObserver's minor-GC durations in the window ÷ queries (part of the GC bucket). *V8 compiler*: TurboFan/Maglev work (should be ~0 after the 5 s warm-up).",
  );
  L('');
  const byName = new Map();
  for (const r of results) (byName.get(r.name) ?? byName.set(r.name, []).get(r.name)).push(r);
  const med = (xs) => {
    const v = xs.filter(Number.isFinite).sort((a, b) => a - b);
    return v.length ? (v.length % 2 ? v[v.length >> 1] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2) : NaN;
  };
  const cols = [...byName.keys()];
  L(`| µs per answered query | ${cols.join(' | ')} |`);
  L(`|---|${cols.map(() => '---:').join('|')}|`);
  const f = (x) => (Number.isFinite(x) ? x.toFixed(2) : '—');
  const row = (label, fn) => L(`| ${label} | ${cols.map((c) => f(med(byName.get(c).map(fn)))).join(' | ')} |`);
  row('QPS (k)', (r) => r.qps / 1000);
  row('**CPU µs/query (utime + stime)**', (r) => r.usPerQuery);
  row('of it user', (r) => r.userUs);
  row("of it system (kernel, in the process's context)", (r) => r.sysUs);
  for (const b of BUCKETS) {
    if (!results.some((r) => r.buckets[b] > 0)) continue;
    row(b, (r) => (r.usPerQuery * r.buckets[b]) / r.total);
  }
  for (const [b] of SEND_PARTS) {
    if (!results.some((r) => r.sendParts[b] > 0)) continue;
    row(`↳ ${b}`, (r) => (r.usPerQuery * r.sendParts[b]) / r.total);
  }
  const per = (ev) => (r) => (Number.isFinite(r.counts[ev]) ? r.counts[ev] / r.completed : NaN);
  row('sendmmsg calls per 100 queries', (r) => 100 * per('syscalls:sys_enter_sendmmsg')(r));
  row('answers per sendmmsg', (r) => 1 / per('syscalls:sys_enter_sendmmsg')(r));
  row('recvmmsg calls per 100 queries', (r) => 100 * per('syscalls:sys_enter_recvmmsg')(r));
  row(
    'epoll waits per 100 queries',
    (r) => 100 * (per('syscalls:sys_enter_epoll_wait')(r) || 0) + 100 * (per('syscalls:sys_enter_epoll_pwait')(r) || 0),
  );
  row('wakeups made by the server per 100 queries (sched_waking)', (r) => 100 * per('sched:sched_waking')(r));
  row("server's context switches per 100 queries", (r) => 100 * per('sched:sched_switch')(r));
  row('scavenge pauses of the main thread (observer)', (r) => r.gcPauseUs ?? NaN);
  row('scavenges per second', (r) => (r.gcCount ?? NaN) / seconds);
  row('mark-compacts in the window', (r) => r.majorGcs ?? NaN);
  row('perf samples', (r) => r.total);
  row('other work (% of machine)', (r) => r.otherCpu);
  row('load average', (r) => r.load);
  for (const [name, rs] of byName) {
    L('');
    L(
      `${name}, round 1, hottest leaves (bucket | symbol, share of samples): ` +
        rs[0].topLeaf
          .slice(0, 18)
          .map(([k, n]) => `${k} ${((100 * n) / rs[0].total).toFixed(1)}%`)
          .join('; '),
    );
  }
  return out.join('\n');
}

async function main() {
  const t0 = Date.now();
  tmp = mkdtempSync(join(tmpdir(), 'clusterdns-cpu-breakdown-'));
  const workload = makeWorkload(tmp);
  const machine = await machineInfo();
  log(`machine: ${machineLine(machine)}; temp dir ${tmp}`);
  const probe = await runCommand('perf', [
    'record',
    '-e',
    'cpu-clock',
    '-o',
    join(tmp, 'probe.perf'),
    '--',
    'true',
  ]).catch((e) => ({ code: 1, stderr: e.message }));
  if (probe.code !== 0) throw new Error(`perf record does not work here: ${probe.stderr.trim()}`);

  const taken = new Set();
  const targets = [];
  for (const n of names) {
    const sc = scenarios.find((s) => s.name === n);
    const def = clusterdnsServer(sc);
    const ctx = {
      root,
      dir: tmp,
      workload,
      mode: 'breakdown',
      pin: 1,
      workers: 1,
      port: await freePort(taken),
      startProcess,
      nodeArgs: ['--perf-basic-prof', '--import', pathToFileURL(join(root, 'bench/lib/gc-observer.mjs')).href],
      env: { ...process.env, CLUSTERDNS_GC_LOG: join(tmp, `gc-${n}.log`) },
    };
    if (def.setup) await def.setup(ctx);
    const proc = def.start(ctx);
    perfMaps.push(`/tmp/perf-${proc.pid}.map`);
    targets.push({ name: def.name, kind: 'clusterdns', def, ctx, proc, gcLog: ctx.env.CLUSTERDNS_GC_LOG });
  }
  if (!opt['no-knot'] && !knot.available()) {
    const ctx = {
      root,
      dir: tmp,
      workload,
      mode: 'breakdown',
      pin: 1,
      workers: 1,
      port: await freePort(taken),
      startProcess,
    };
    targets.push({ name: 'knot', kind: 'knot', def: knot, ctx, proc: knot.start(ctx) });
    if (opt['knot-own-affinity']) {
      const own = { ...ctx, mode: 'breakdown-own', port: await freePort(taken) };
      targets.push({
        name: 'knot-own-affinity',
        kind: 'knot',
        def: knot,
        ctx: own,
        proc: knot.start(own),
        ownAffinity: true,
      });
    }
  }
  for (const t of targets) {
    const samples =
      t.def.samples?.(t.ctx) ??
      sampleRecords(workload.records).map((r) => ({ name: r.name, type: 'A', data: r.ip, ttl: workload.ttl }));
    await waitAnswering(t.ctx.port, samples[0].name, 30000, () => t.proc.child.exitCode === null);
    if (!t.ownAffinity) await t.def.ready?.(t.ctx, t.proc);
    log(`${t.name}: pid ${t.proc.pid}, threads on CPUs ${threadCpus(t.proc.pid)}`);
    const problems = await checkAnswers(t.ctx.port, samples);
    if (problems.length) throw new Error(`${t.name} answers wrong: ${problems.join('; ')}`);
    await runDnsperf({ port: t.ctx.port, queryFile: t.def.queries(t.ctx), seconds: 5, pin: 0 }); // warm-up: JIT, caches
  }
  const results = [];
  for (let round = 0; round < rounds; round++) {
    for (let k = 0; k < targets.length; k++) {
      const t = targets[(round + k) % targets.length];
      const r = await measureOne(t, t.ctx, t.def.queries(t.ctx), round);
      results.push(r);
      log(
        `${t.name} r${round + 1}: ${(r.qps / 1000).toFixed(1)}k QPS, ${r.usPerQuery.toFixed(2)} µs/query (user ${r.userUs.toFixed(2)}, sys ${r.sysUs.toFixed(2)}), ` +
          `${r.total} samples: ${BUCKETS.filter((b) => r.buckets[b])
            .map((b) => `${b} ${((100 * r.buckets[b]) / r.total).toFixed(1)}%`)
            .join(', ')}` +
          `${r.gcPauseUs !== null ? `; GC pauses ${r.gcPauseUs.toFixed(2)} µs/query (${r.gcCount})` : ''}; other work ${r.otherCpu.toFixed(0)}%`,
      );
    }
  }
  for (const t of targets) await stopProcess(t.proc);
  const md = render(machine, results, (Date.now() - t0) / 1000);
  process.stdout.write('\n' + md + '\n');
  mkdirSync(join(root, 'bench/results'), { recursive: true });
  writeFileSync(join(root, 'bench/results/cpu-breakdown-latest.md'), md + '\n');
}

main()
  .catch((e) => {
    console.error(`cpu-breakdown: ${e.stack ?? e}`);
    process.exitCode = 1;
  })
  .finally(() => cleanup());
