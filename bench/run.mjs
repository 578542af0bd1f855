#!/usr/bin/env node
// `npm run bench`: clusterdns against unbound, dnsmasq, kresd, Knot DNS and a bare Node responder,
// measured with dnsperf, interleaved round-robin, medians. See BENCHMARKS.md.
//
//   node bench/run.mjs [--rounds 3] [--seconds 10] [--only name,name] [--pinned|--unpinned|--both]
//                      [--warmup 1] [--quiet-wait S] [--all] [--write] [--keep]
//
// --quiet-wait S: before each measurement, wait up to S seconds for other work on the
// machine to fall below 10% (it is reported per measurement either way).
//
// Default: both modes; single-threaded peers (dnsmasq, kresd) are measured pinned only
// unless --all or --only names them, which keeps the default run around 5 minutes.
// Server names for --only: clusterdns (every scenario) or clusterdns-<scenario>, unbound,
// dnsmasq, kresd, knot, bare-node, unbound-forward, unbound-forward-cache, dnsmasq-forward.

import { mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { checkAnswers, waitAnswering } from './lib/check.mjs';
import { cpuSnapshot, otherCpuPercent, serverCpuPercent, waitQuiet } from './lib/cpu.mjs';
import { dnsperfCommandTemplate, runDnsperf } from './lib/dnsperf.mjs';
import { killAllSync, startProcess, stopAll, stopProcess, treeRssKiB } from './lib/procs.mjs';
import { machineInfo, machineLine, replaceMarked, summarize, table } from './lib/report.mjs';
import { clusterdnsServer, freePort, peers } from './lib/servers.mjs';
import { makeWorkload, sampleRecords } from './lib/workload.mjs';
import { scenarios } from './scenarios.mjs';
import { underAttack, writeAttackTable } from './attack.mjs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');

const { values: flags } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    seconds: { type: 'string', default: '10' },
    warmup: { type: 'string', default: '1' },
    'quiet-wait': { type: 'string', default: '0' },
    only: { type: 'string' },
    pinned: { type: 'boolean' },
    unpinned: { type: 'boolean' },
    both: { type: 'boolean' },
    all: { type: 'boolean' },
    write: { type: 'boolean' },
    keep: { type: 'boolean' },
    variant: { type: 'string', multiple: true },
    help: { type: 'boolean', short: 'h' },
  },
  strict: true,
});
if (flags.help) {
  process.stdout.write(
    'usage: node bench/run.mjs [--rounds N] [--seconds S] [--warmup S] [--quiet-wait S] [--only a,b] [--pinned|--unpinned|--both] [--all] [--write] [--keep]\n' +
      '                        [--variant=NAME=NODE_FLAGS ...]\n' +
      '  --variant=NAME=FLAGS also runs every selected clusterdns server as `NAME+FLAGS` with those node\n' +
      '  flags added (an A/B in the same interleaved run), e.g. --variant="ofs=--optimize-for-size";\n' +
      '  words NAME=VALUE are environment variables, e.g. --variant="dgram=CLUSTERDNS_NATIVE_UDP=0".\n',
  );
  process.exit(0);
}
const rounds = Number(flags.rounds);
const seconds = Number(flags.seconds);
const warmup = Number(flags.warmup);
const quietWait = Number(flags['quiet-wait']);
if (!(rounds >= 1) || !(seconds >= 1) || !(warmup >= 0) || !(quietWait >= 0)) {
  console.error('--rounds and --seconds must be ≥ 1, --warmup and --quiet-wait ≥ 0');
  process.exit(2);
}
// Default: both, so that `npm run bench` shows the one-core ratio and the use of both cores.
const modes =
  flags.both || (!flags.pinned && !flags.unpinned)
    ? ['pinned', 'unpinned']
    : [...(flags.pinned ? ['pinned'] : []), ...(flags.unpinned ? ['unpinned'] : [])];

const allServers = [...scenarios.map(clusterdnsServer), ...peers];
let servers = allServers;
let explicit = new Set();
if (flags.only) {
  const want = flags.only
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  servers = allServers.filter((s) => want.some((w) => s.name === w || s.name.startsWith(w + '-')));
  explicit = new Set(servers.map((s) => s.name));
  const unknown = want.filter((w) => !allServers.some((s) => s.name === w || s.name.startsWith(w + '-')));
  if (unknown.length) {
    console.error(
      `--only: unknown server(s) ${unknown.join(', ')}; known: ${allServers.map((s) => s.name).join(', ')}`,
    );
    process.exit(2);
  }
}
// A peer made for one scenario (forScenario, e.g. unbound-mix) runs with that scenario or when named.
const named = new Set((flags.only ?? '').split(',').map((x) => x.trim()));
servers = servers.filter(
  (s) => !s.forScenario || named.has(s.name) || servers.some((x) => x.name === `clusterdns-${s.forScenario}`),
);
// The before/after rows (`…-base`: a scenario served by another build, its `root`) need
// BENCH_BASE_ROOT: without it they are left out of the table, with one note saying so.
const baseRows = servers.filter((s) => s.scenario?.root !== undefined);
const baseNote =
  !process.env.BENCH_BASE_ROOT && baseRows.length
    ? `before/after rows (${baseRows.map((s) => s.name).join(', ')}) not measured: BENCH_BASE_ROOT is not set`
    : null;
if (baseNote) servers = servers.filter((s) => !baseRows.includes(s));
// --variant=NAME=FLAGS: a copy of every selected clusterdns server with more node flags.
for (const v of flags.variant ?? []) {
  const eq = v.indexOf('=');
  if (eq <= 0) {
    console.error(`--variant: expected NAME=NODE_FLAGS, got "${v}"`);
    process.exit(2);
  }
  const tag = v.slice(0, eq);
  const words = v
    .slice(eq + 1)
    .split(/\s+/)
    .filter(Boolean);
  // NAME=VALUE words are environment variables for the server, the rest node flags.
  const isEnv = (w) => /^[A-Z_][A-Z0-9_]*=/.test(w);
  const env = Object.fromEntries(
    words.filter(isEnv).map((w) => [w.slice(0, w.indexOf('=')), w.slice(w.indexOf('=') + 1)]),
  );
  const extra = words.filter((w) => !isEnv(w));
  for (const base of servers.filter((s) => s.kind === 'clusterdns' && !s.variantOf)) {
    servers.push({
      ...base,
      name: `${base.name}+${tag}`,
      variantOf: base.name,
      label: (ctx) => `${base.label(ctx)} +${tag} (${words.join(' ')})`,
      start(ctx) {
        return base.start.call(this, {
          ...ctx,
          nodeArgs: [...(ctx.nodeArgs ?? []), ...extra],
          env: { ...process.env, ...(ctx.env ?? {}), ...env },
        });
      },
    });
  }
}

// ---- cleanup: every process we start dies with us --------------------------------------
let tmp = null;
let cleaning = null;
let interrupted = false;
function cleanup() {
  cleaning ??= (async () => {
    await stopAll();
    // On failure the temp dir stays: it holds every server's config and log.
    if (tmp && (flags.keep || (process.exitCode && !interrupted))) log(`kept ${tmp} (configs and server logs)`);
    else if (tmp) rmSync(tmp, { recursive: true, force: true });
  })();
  return cleaning;
}
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(sig, () => {
    interrupted = true;
    console.error(`\n${sig}: stopping every process the benchmark started`);
    void cleanup().finally(() => process.exit(sig === 'SIGINT' ? 130 : 143));
  });
}
process.on('exit', () => killAllSync());

const log = (s) => process.stderr.write(s + '\n');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function main() {
  const t0 = Date.now();
  tmp = mkdtempSync(join(tmpdir(), 'clusterdns-bench-'));
  const workload = makeWorkload(tmp);
  const machine = await machineInfo();
  log(`workload: ${workload.records.length} names, ${workload.queries} queries (seed ${workload.seed}) in ${tmp}`);
  log(`machine: ${machineLine(machine)}`);

  const results = {}; // mode -> rows
  const notes = baseNote ? [baseNote] : [];
  for (const mode of modes) {
    results[mode] = await measureMode(mode, workload, notes);
  }

  // The "under attack" row (issue 17): a good client's latency while each attack runs.
  const attackMd = await underAttack(log);
  process.stdout.write('\nUnder attack:\n' + attackMd + '\n');
  if (flags.write) writeAttackTable(attackMd);

  const command = ['node', 'bench/run.mjs', ...process.argv.slice(2)].join(' ');
  const md = render({ machine, command, results, notes, elapsedS: (Date.now() - t0) / 1000 });
  process.stdout.write('\n' + md + '\n');
  mkdirSync(join(root, 'bench/results'), { recursive: true });
  writeFileSync(join(root, 'bench/results/latest.md'), md + '\n');
  log('wrote bench/results/latest.md');
  if (flags.write) {
    replaceMarked(join(root, 'BENCHMARKS.md'), md);
    log('updated BENCHMARKS.md');
  }
}

async function measureMode(mode, workload, notes) {
  const pinned = mode === 'pinned';
  const workers = pinned ? 1 : 2;
  const taken = new Set();
  const rows = [];
  log(`\n== ${mode}: ${pinned ? 'servers on CPU 1, dnsperf on CPU 0' : 'servers and dnsperf share both CPUs'} ==`);

  // Start and check every server before measuring any.
  const inMode = servers.filter((d) => pinned || d.unpinnedByDefault !== false || flags.all || explicit.has(d.name));
  const left = servers.filter((d) => !inMode.includes(d)).map((d) => d.name);
  if (left.length)
    notes.push(
      `${mode}: ${left.join(', ')} measured pinned only (single-threaded; \`--all\` measures them unpinned too)`,
    );
  for (const def of inMode) {
    const ctx = {
      root,
      dir: tmp,
      workload,
      mode,
      pin: pinned ? 1 : null,
      workers,
      port: await freePort(taken),
      startProcess,
    };
    const row = {
      name: def.name,
      label: def.label(ctx),
      def,
      ctx,
      proc: null,
      runs: [],
      summary: null,
      rssKiB: 0,
      note: null,
    };
    rows.push(row);
    const unavailable = def.available?.();
    if (unavailable) {
      if (!def.optional) throw new Error(`${def.name}: ${unavailable}`);
      row.note = unavailable;
      notes.push(`${def.name} skipped: ${unavailable}`);
      continue;
    }
    if (def.setup) {
      const skip = await def.setup(ctx);
      if (typeof skip === 'string') {
        row.note = skip;
        notes.push(`${def.name} skipped: ${skip}`);
        continue;
      }
    }
    row.proc = def.start(ctx);
    const samples =
      def.samples?.(ctx) ??
      sampleRecords(workload.records).map((r) => ({ name: r.name, type: 'A', data: r.ip, ttl: workload.ttl }));
    try {
      await waitAnswering(
        ctx.port,
        samples[0].name,
        20000,
        () => row.proc.child.exitCode === null && row.proc.child.signalCode === null,
      );
    } catch (e) {
      const why = `did not start: ${e.message} (log: ${ctx.dir}/${def.name}-${mode}.log)`;
      await stopProcess(row.proc);
      row.proc = null;
      if (!def.optional) throw new Error(`${def.name} ${why}`, { cause: e });
      row.note = 'did not start';
      notes.push(`${def.name} (${mode}) skipped: ${why}`);
      log(`  ${def.name}: skipped, ${why}`);
      continue;
    }
    await def.ready?.(ctx, row.proc);
    const problems = await checkAnswers(ctx.port, samples);
    if (problems.length) {
      throw new Error(`${def.name} answers wrong, refusing to benchmark it:\n  ${problems.join('\n  ')}`);
    }
    log(`  ${row.label}: pid ${row.proc.pid}, 127.0.0.1:${ctx.port}, ${samples.length} sample answers correct`);
  }
  const live = rows.filter((r) => r.proc);

  // Warm-up (JIT, caches), not recorded.
  if (warmup > 0) {
    for (const r of live) {
      await runDnsperf({ port: r.ctx.port, queryFile: r.def.queries(r.ctx), seconds: warmup, pin: pinned ? 0 : null });
    }
  }

  // Round-robin; the starting server rotates so no one always runs right after the same peer.
  const loads = [];
  for (let round = 0; round < rounds; round++) {
    for (let k = 0; k < live.length; k++) {
      const r = live[(round + k) % live.length];
      assertAlive(r);
      if (quietWait > 0) {
        const q = await waitQuiet(
          live.map((x) => x.proc.pid),
          quietWait,
        );
        if (q.waited >= 2)
          log(`  waited ${q.waited.toFixed(0)} s for other work to calm down (now ${q.last.toFixed(0)}%)`);
      }
      loads.push(loadAverage());
      const before = cpuSnapshot(r.proc.pid);
      const res = await runDnsperf({
        port: r.ctx.port,
        queryFile: r.def.queries(r.ctx),
        seconds,
        pin: pinned ? 0 : null,
      });
      const after = cpuSnapshot(r.proc.pid);
      res.serverCpu = serverCpuPercent(before, after);
      res.cpuUsPerQuery =
        before && after && res.completed > 0 ? ((after.server - before.server) * 1e4) / res.completed : NaN;
      res.otherCpu = otherCpuPercent(before, after);
      // The same split into user and kernel (system) time: where the server's CPU goes.
      res.sysUsPerQuery =
        before && after && res.completed > 0 ? ((after.serverSys - before.serverSys) * 1e4) / res.completed : NaN;
      r.runs.push(res);
      log(
        `  round ${round + 1}/${rounds} ${r.name.padEnd(18)} ${(res.qps / 1000).toFixed(1).padStart(6)}k QPS  ` +
          `${(res.avgLatencyS * 1000).toFixed(2)} ms  lost ${res.lost}  server CPU ${res.serverCpu.toFixed(0)}% (${res.cpuUsPerQuery.toFixed(1)} µs/query, ${res.sysUsPerQuery.toFixed(1)} of it system)  ` +
          `other work ${res.otherCpu.toFixed(0)}% of the machine`,
      );
      await sleep(200);
    }
  }

  if (loads.length) {
    const lo = Math.min(...loads);
    const hi = Math.max(...loads);
    const msg =
      `${mode}: 1-min load average before each measurement ${lo.toFixed(2)}–${hi.toFixed(2)} ` +
      '(about 1–2 is this benchmark alone; more means other work shared the cores)';
    if (hi > 2.5) notes.push(msg);
    log('  ' + msg);
  }

  // RSS after the run, then check the answers are still right and stop everything.
  for (const r of live) {
    assertAlive(r);
    r.rssKiB = treeRssKiB(r.proc.pid);
    r.summary = summarize(r.runs);
    const bad = Object.entries(r.summary.rcodes).filter(([k]) => k !== 'NOERROR');
    const badCount = bad.reduce((a, [, v]) => a + v, 0);
    if (badCount > 0.001 * r.summary.sent) {
      notes.push(
        `${r.name} (${mode}): responses other than NOERROR under load: ${bad.map(([k, v]) => `${k} ${v}`).join(', ')}`,
      );
    }
    const samples =
      r.def.samples?.(r.ctx) ??
      sampleRecords(workload.records).map((x) => ({ name: x.name, type: 'A', data: x.ip, ttl: workload.ttl }));
    const problems = await checkAnswers(r.ctx.port, samples);
    if (problems.length) notes.push(`${r.name} (${mode}) answered wrong AFTER the load: ${problems.join('; ')}`);
  }
  await Promise.all(live.map((r) => stopProcess(r.proc)));
  return rows;
}

function loadAverage() {
  try {
    return Number(readFileSync('/proc/loadavg', 'latin1').split(' ')[0]);
  } catch {
    return NaN;
  }
}

function assertAlive(r) {
  const c = r.proc.child;
  if (c.exitCode !== null || c.signalCode !== null) {
    throw new Error(
      `${r.name} exited (${c.exitCode ?? c.signalCode}) during the run; log: ${r.ctx.dir}/${r.name}-${r.ctx.mode}.log`,
    );
  }
}

function render({ machine, command, results, notes, elapsedS }) {
  const out = [];
  out.push(`Machine: ${machineLine(machine)}.`);
  out.push('');
  out.push(
    `Command: \`${command}\` (${rounds} round${rounds > 1 ? 's' : ''} × ${seconds} s per server per mode, ${warmup} s warm-up, ` +
      `interleaved round-robin, medians; whole run ${Math.round(elapsedS)} s, ${new Date().toISOString().slice(0, 10)}).`,
  );
  out.push('');
  out.push(
    `Load: \`${dnsperfCommandTemplate(seconds)}\` against each server on its own 127.0.0.1 port; ` +
      "2,000 names, 100k queries, seeded. *CPU µs/query*: the server's CPU time per answered query, and in " +
      "parentheses unbound's ÷ this one (1 × = as cheap as unbound; less sensitive to other work than QPS). " +
      '*other work*: share of both cores used by other processes during the measurement.',
  );
  for (const mode of modes) {
    out.push('');
    out.push(
      mode === 'pinned'
        ? '### Pinned: server `taskset -c 1`, dnsperf `taskset -c 0`'
        : '### Unpinned: servers and dnsperf share both cores (clusterdns `-workers 2`, unbound 2 threads)',
    );
    out.push('');
    out.push(table(results[mode]));
  }
  const verdicts = targetVerdicts(results);
  if (verdicts.length) {
    out.push('');
    out.push('Targets:');
    for (const v of verdicts) out.push(`- ${v}`);
  }
  if (notes.length) {
    out.push('');
    out.push('Notes from this run:');
    for (const n of notes) out.push(`- ${n}`);
  }
  return out.join('\n');
}

function targetVerdicts(results) {
  const out = [];
  for (const sc of scenarios) {
    if (!sc.targets) continue;
    const name = `clusterdns-${sc.name}`;
    const get = (mode, n) => results[mode]?.find((r) => r.name === n)?.summary?.qps;
    const p = get('pinned', name);
    const pu = get('pinned', 'unbound');
    const u = get('unpinned', name);
    if (sc.targets.pinnedVsUnbound && p && pu) {
      const ratio = p / pu;
      out.push(
        `\`${sc.name}\` pinned ≥ ${sc.targets.pinnedVsUnbound} × unbound: ${ratio.toFixed(2)} × — ` +
          `${ratio >= sc.targets.pinnedVsUnbound ? 'met' : 'NOT met'}`,
      );
    }
    // Issue 23: CPU per answered query against Knot's (pinned), and forwarding against unbound's.
    const cpu = (n) => results.pinned?.find((r) => r.name === n)?.summary?.cpuUsPerQuery;
    if (sc.targets.cpuVsKnot && cpu(name) && cpu('knot')) {
      const x = cpu(name) / cpu('knot');
      out.push(
        `\`${sc.name}\` pinned CPU per query ≤ ${sc.targets.cpuVsKnot} × Knot's: ${cpu(name).toFixed(1)} vs ${cpu('knot').toFixed(1)} µs (${x.toFixed(2)} ×) — ${x <= sc.targets.cpuVsKnot ? 'met' : 'NOT met'}`,
      );
    }
    if (sc.targets.cpuVsUnboundForward && cpu(name) && cpu('unbound-forward')) {
      const x = cpu(name) / cpu('unbound-forward');
      out.push(
        `\`${sc.name}\` pinned CPU per query ≤ ${sc.targets.cpuVsUnboundForward} × unbound forwarding (cache off): ${cpu(name).toFixed(1)} vs ${cpu('unbound-forward').toFixed(1)} µs (${x.toFixed(2)} ×) — ${x <= sc.targets.cpuVsUnboundForward ? 'met' : 'NOT met'}`,
      );
    }
    if (sc.targets.unpinnedBeatsPinned && p && u) {
      out.push(
        `\`${sc.name}\` unpinned (2 workers) > one core's worth (pinned, 1 worker): ` +
          `${(u / 1000).toFixed(0)}k vs ${(p / 1000).toFixed(0)}k (${(u / p).toFixed(2)} ×) — ${u > p ? 'met' : 'NOT met'}`,
      );
    }
  }
  return out;
}

main()
  .catch(async (e) => {
    if (interrupted) return; // the signal handler reports and exits
    console.error(`bench: ${e.stack ?? e}`);
    process.exitCode = 1;
  })
  .finally(async () => {
    await cleanup();
  });
