#!/usr/bin/env node
// Is clusterdns's memory flat under sustained load? (issue 11) clusterdns on a scenario of
// bench/scenarios.mjs (default `cache`: all answers are cache hits after the first pass) under
// dnsperf for --minutes N, the RSS of the server's process tree (VmRSS of the process and its
// cluster workers) sampled every --interval seconds. Reports first/last/min/max, the slope in
// MB per minute after the first minute (least squares), and says flat or not flat: flat when
// neither the slope times the settled span nor the rise of the troughs (lowest sample of the
// second half of the settled run minus the lowest of the first half; RSS saws with the JS
// heap, so end points alone depend on the phase) comes to --threshold-mb (2) or more.
//
//   node bench/rss-flat.mjs [--minutes 10] [--scenario cache] [--interval 10] [--warmup-s 60]
//        [--workers 1] [--rate QPS] [--threshold-mb 2] [--trace-gc] [--node-flags="FLAGS"]
//        [--json FILE] [--keep]
//
// --workers 1 (default): server on CPU 1, dnsperf on CPU 0 (as bench/run.mjs --pinned);
// --workers N > 1: nothing pinned. --rate: dnsperf -Q QPS instead of the closed loop.
// --trace-gc: the server also runs with --trace-gc, and the JS heap after each major GC is
// reported the same way (RSS alone cannot tell a leak from the heap settling).
// --node-flags: more node/V8 flags for the server (after its usual --max-semi-space-size=2).
// Writes bench/results/rss-flat-latest.md.

import { printHeaderHelp } from './lib/help.mjs';
import { mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { checkAnswers, waitAnswering } from './lib/check.mjs';
import { cpuSnapshot, otherCpuPercent, serverCpuPercent } from './lib/cpu.mjs';
import { runDnsperf } from './lib/dnsperf.mjs';
import { parseTraceGc } from './lib/gc-trace.mjs';
import { descendants, killAllSync, startProcess, statusKiB, stopAll, stopProcess } from './lib/procs.mjs';
import { machineInfo, machineLine } from './lib/report.mjs';
import { clusterdnsServer, freePort } from './lib/servers.mjs';
import { slope } from './lib/soak-report.mjs';
import { makeWorkload, sampleRecords } from './lib/workload.mjs';
import { scenarios } from './scenarios.mjs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');

const { values: opt } = parseArgs({
  options: {
    minutes: { type: 'string', default: '10' },
    scenario: { type: 'string', default: 'cache' },
    interval: { type: 'string', default: '10' },
    'warmup-s': { type: 'string', default: '60' },
    workers: { type: 'string', default: '1' },
    rate: { type: 'string' },
    'threshold-mb': { type: 'string', default: '2' },
    'trace-gc': { type: 'boolean', default: false },
    'node-flags': { type: 'string', default: '' },
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
  minutes: Number(opt.minutes),
  scenario: opt.scenario,
  interval: Number(opt.interval),
  warmupS: Number(opt['warmup-s']),
  workers: Math.floor(Number(opt.workers)),
  rate: opt.rate === undefined ? null : Number(opt.rate),
  thresholdMB: Number(opt['threshold-mb']),
  traceGc: opt['trace-gc'],
};
const sc = scenarios.find((s) => s.name === cfg.scenario);
if (
  !sc ||
  !(cfg.minutes > 0) ||
  !(cfg.interval >= 1) ||
  !(cfg.workers >= 1) ||
  !(cfg.warmupS >= 0) ||
  (cfg.rate !== null && !(cfg.rate > 0))
) {
  console.error(`bad options (scenarios: ${scenarios.map((s) => s.name).join(', ')}); see --help`);
  process.exit(2);
}
const pinned = cfg.workers === 1;

const log = (s) => process.stderr.write(`[rss-flat ${new Date().toISOString().slice(11, 19)}] ${s}\n`);
let tmp = null;
let cleaning = null;
let failed = false;
function cleanup() {
  cleaning ??= (async () => {
    await stopAll();
    if (tmp && (opt.keep || failed)) log(`kept ${tmp} (Corefile, server log)`);
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

/** VmRSS and its anonymous / file-backed parts (KiB) of one process; zeros when it is gone. */
function rssKiB(pid) {
  return { rss: statusKiB(pid, 'VmRSS'), anon: statusKiB(pid, 'RssAnon'), file: statusKiB(pid, 'RssFile') };
}

const r2 = (x) => Math.round(x * 100) / 100;

/** [{ atS, mb }] → first/last/min/max, slope after warm-up, and the verdict. */
function trend(samples, warmupS, thresholdMB) {
  const settled = samples.filter((s) => s.atS >= warmupS);
  const use = settled.length >= 2 ? settled : samples;
  const perMin = slope(use.map((s) => ({ x: s.atS / 60, y: s.mb })));
  const spanMin = (use[use.length - 1].atS - use[0].atS) / 60;
  const growth = use[use.length - 1].mb - use[0].mb;
  const projected = perMin * spanMin;
  // RSS saws up and down with the JS heap (down at each major GC), so the end points depend on
  // where in a cycle they fall; a leak raises the troughs. Lowest sample of the second half of
  // the settled run against the lowest of the first half:
  const half = Math.floor(use.length / 2);
  const troughs =
    use.length >= 4
      ? Math.min(...use.slice(half).map((s) => s.mb)) - Math.min(...use.slice(0, half).map((s) => s.mb))
      : growth;
  return {
    firstMB: r2(samples[0].mb),
    lastMB: r2(samples[samples.length - 1].mb),
    minMB: r2(Math.min(...samples.map((s) => s.mb))),
    maxMB: r2(Math.max(...samples.map((s) => s.mb))),
    settledFromS: use[0].atS,
    settledFirstMB: r2(use[0].mb),
    settledMinMB: r2(Math.min(...use.map((s) => s.mb))),
    settledMaxMB: r2(Math.max(...use.map((s) => s.mb))),
    growthAfterWarmupMB: r2(growth),
    troughGrowthMB: r2(troughs),
    slopeMBPerMinute: Math.round(perMin * 1000) / 1000,
    slopeOverRunMB: r2(projected),
    flat: troughs < thresholdMB && projected < thresholdMB,
    warmupLongEnough: settled.length >= 2,
  };
}

async function main() {
  const t0 = Date.now();
  tmp = mkdtempSync(join(tmpdir(), 'clusterdns-rss-'));
  const workload = makeWorkload(tmp);
  const machine = await machineInfo();
  log(`machine: ${machineLine(machine)}; temp dir ${tmp}`);
  const def = clusterdnsServer(sc);
  const ctx = {
    root,
    dir: tmp,
    workload,
    mode: 'rss',
    pin: pinned ? 1 : null,
    workers: cfg.workers,
    port: await freePort(),
    startProcess,
    nodeArgs: [...(cfg.traceGc ? ['--trace-gc'] : []), ...opt['node-flags'].split(/\s+/).filter(Boolean)],
  };
  if (def.setup) await def.setup(ctx);
  const proc = def.start(ctx);
  const samples0 =
    def.samples?.(ctx) ??
    sampleRecords(workload.records).map((r) => ({ name: r.name, type: 'A', data: r.ip, ttl: workload.ttl }));
  await waitAnswering(
    ctx.port,
    samples0[0].name,
    30000,
    () => proc.child.exitCode === null && proc.child.signalCode === null,
  );
  const problems = await checkAnswers(ctx.port, samples0);
  if (problems.length) throw new Error(`${def.name} answers wrong:\n  ${problems.join('\n  ')}`);
  await new Promise((r) => setTimeout(r, 1000)); // cluster workers up
  const idleKiB = [proc.pid, ...descendants(proc.pid)].reduce((a, p) => a + rssKiB(p).rss, 0);
  log(
    `${def.name}: pid ${proc.pid} on 127.0.0.1:${ctx.port}, ${cfg.workers} worker(s), ${pinned ? 'CPU 1' : 'unpinned'}; idle RSS ${(idleKiB / 1024).toFixed(1)} MB`,
  );

  const seconds = Math.round(cfg.minutes * 60);
  const samples = [];
  const start = performance.now();
  const take = () => {
    const pids = [proc.pid, ...descendants(proc.pid)];
    const per = pids.map((p) => rssKiB(p));
    const sum = (k) => per.reduce((a, b) => a + b[k], 0) / 1024;
    const s = {
      atS: Math.round((performance.now() - start) / 1000),
      mb: sum('rss'),
      anonMB: r2(sum('anon')),
      fileMB: r2(sum('file')),
      perProcessMB: per.map((k) => r2(k.rss / 1024)),
    };
    samples.push(s);
    log(
      `  ${String(s.atS).padStart(5)} s  RSS ${s.mb.toFixed(1)} MB (anon ${s.anonMB}, file ${s.fileMB})${per.length > 1 ? ` (${s.perProcessMB.join(' + ')})` : ''}`,
    );
  };
  const before = cpuSnapshot(proc.pid);
  take();
  const timer = setInterval(take, cfg.interval * 1000);
  log(
    `dnsperf for ${seconds} s (${cfg.rate ? `-Q ${cfg.rate}` : 'closed loop, 100 outstanding'}), RSS every ${cfg.interval} s`,
  );
  let perf;
  try {
    perf = await runDnsperf({
      port: ctx.port,
      queryFile: def.queries(ctx),
      seconds,
      pin: pinned ? 0 : null,
      ...(cfg.rate ? { maxQps: cfg.rate } : {}),
    });
  } finally {
    clearInterval(timer);
  }
  if ((performance.now() - start) / 1000 - samples[samples.length - 1].atS >= 2) take();
  const after = cpuSnapshot(proc.pid);
  if (proc.child.exitCode !== null || proc.child.signalCode !== null)
    throw new Error(`${def.name} exited during the run`);
  const problemsAfter = await checkAnswers(ctx.port, samples0);
  const t = trend(samples, cfg.warmupS, cfg.thresholdMB);

  let heap = null;
  if (cfg.traceGc) {
    const gcs = parseTraceGc(readFileSync(join(tmp, `${def.name}-${ctx.mode}.log`), 'utf8')).filter((e) =>
      /Mark/.test(e.kind),
    );
    if (gcs.length >= 2) {
      // Isolate time ≈ time since the process started; the load began a few seconds later.
      const off = gcs[0].atMs;
      heap = {
        majorGcs: gcs.length,
        afterMB: gcs.map((e) => ({ atS: Math.round((e.atMs - off) / 1000), mb: e.afterMB })),
        committedMB: gcs.map((e) => ({ atS: Math.round((e.atMs - off) / 1000), mb: e.afterCommittedMB })),
      };
      heap.trend = trend(heap.afterMB, cfg.warmupS, cfg.thresholdMB);
    }
  }
  await stopProcess(proc);

  const L = [];
  L.push(`Machine: ${machineLine(machine)}.`);
  L.push('');
  L.push(
    `Command: \`node bench/rss-flat.mjs ${process.argv.slice(2).join(' ')}\` (${new Date().toISOString().slice(0, 10)}, whole run ${Math.round((Date.now() - t0) / 1000)} s).`,
  );
  L.push('');
  L.push(
    `clusterdns \`${sc.name}\` (${sc.description}), ${cfg.workers} worker(s), ${pinned ? 'server on CPU 1, dnsperf on CPU 0' : 'unpinned'}; ` +
      `\`dnsperf -c 4 -T 1 -q 100 -Q ${cfg.rate ?? 1000000} -l ${seconds}\`: ${Math.round(perf.qps)} QPS, ${perf.completed} answered, ${perf.lost} lost; ` +
      `server CPU ${serverCpuPercent(before, after).toFixed(0)}%, other work ${otherCpuPercent(before, after).toFixed(0)}% of the machine. ` +
      `RSS of the server's process tree every ${cfg.interval} s; idle before the load ${(idleKiB / 1024).toFixed(1)} MB.`,
  );
  L.push('');
  L.push(
    '| samples | first MB | last MB | min MB | max MB | after warm-up (from s) | settled min–max MB | last − first settled MB | troughs: 2nd half − 1st half MB | slope MB/min | slope × span MB | verdict |',
  );
  L.push('|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---|');
  L.push(
    `| ${samples.length} | ${t.firstMB} | ${t.lastMB} | ${t.minMB} | ${t.maxMB} | ${t.settledFromS} | ${t.settledMinMB}–${t.settledMaxMB} | ${t.growthAfterWarmupMB} | ${t.troughGrowthMB} | ${t.slopeMBPerMinute} | ${t.slopeOverRunMB} | ` +
      `**${t.flat ? 'flat' : 'NOT flat'}** (threshold ${cfg.thresholdMB} MB${t.warmupLongEnough ? '' : '; run shorter than the warm-up: whole run used'}) |`,
  );
  L.push('');
  L.push(`Samples (s: MB): ${samples.map((s) => `${s.atS}: ${s.mb.toFixed(1)}`).join(', ')}`);
  const set = samples.filter((s) => s.atS >= t.settledFromS);
  if (set.length >= 2) {
    const a = set[0];
    const b = set[set.length - 1];
    L.push('');
    L.push(
      `Of the RSS after warm-up (${a.atS} s → ${b.atS} s): anonymous (heap, malloc) ${a.anonMB} → ${b.anonMB} MB, file-backed (code, mapped files) ${a.fileMB} → ${b.fileMB} MB.`,
    );
  }
  if (heap) {
    const h = heap.trend;
    L.push('');
    L.push(
      `JS heap after each major GC (--trace-gc, ${heap.majorGcs} major GCs; s from the first: used / committed MB): ` +
        `${heap.afterMB.map((x, i) => `${x.atS}: ${x.mb} / ${heap.committedMB[i].mb}`).join(', ')}; used: slope ${h.slopeMBPerMinute} MB/min`,
    );
  }
  if (problemsAfter.length) L.push(`\nAnswers wrong AFTER the load: ${problemsAfter.join('; ')}`);
  const md = L.join('\n');
  process.stdout.write('\n' + md + '\n');
  mkdirSync(join(root, 'bench/results'), { recursive: true });
  writeFileSync(join(root, 'bench/results/rss-flat-latest.md'), md + '\n');
  log('wrote bench/results/rss-flat-latest.md');
  if (opt.json)
    writeFileSync(
      opt.json,
      JSON.stringify({ config: cfg, machine, dnsperf: perf, idleMB: idleKiB / 1024, samples, trend: t, heap }, null, 2),
    );
  if (!t.flat) process.exitCode = 3;
}

main()
  .catch((e) => {
    console.error(`rss-flat: ${e.stack ?? e}`);
    failed = true;
    process.exitCode = 1;
  })
  .finally(() => cleanup());
