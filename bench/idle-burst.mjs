#!/usr/bin/env node
// Bursts after quiet spells (issue 23 point 3): what V8's memory reducer does to a server whose
// load stops and comes back. clusterdns on a scenario of bench/scenarios.mjs (default
// `kubernetes`: 10,000 Services in memory) pinned to CPU 1 with `--trace-gc`, dnsperf on CPU 0.
// After a warm-up, --cycles times: --idle-s seconds with no query, then --burst-s seconds of
// dnsperf at --rate. Per cycle: RSS at the end of the quiet spell, the burst's slowest query and
// lost ones, and every full GC (mark-compact) of the cycle, said to land in the quiet spell or in
// the burst, with its pause. The memory reducer (V8's GC when allocation falls, "(reduce)" in
// the trace) gives memory back; its pauses are harmless in a quiet spell and not in a burst.
// --idle-s takes a list (10,20): the spells are taken in turn, so that the reducer's timer
// (it looks every 8 s) meets the load's return at different points.
//
//   node bench/idle-burst.mjs [--scenario kubernetes] [--cycles 4] [--idle-s 20] [--burst-s 6]
//        [--rate 16600] [--warmup-s 5] [--variants="FLAGS;FLAGS"] [--json FILE]
//
// --variants: one server per entry, an empty entry for none (node/V8 flags, after the usual
// --max-semi-space-size=2), each run in turn, e.g. "--variants=;--no-memory-reducer".
// Writes bench/results/idle-burst-latest.md.

import { printHeaderHelp } from './lib/help.mjs';
import { mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { waitAnswering } from './lib/check.mjs';
import { dnsperfArgs, parseDnsperf } from './lib/dnsperf.mjs';
import { killAllSync, runCommand, stopAll, stopProcess, statusKiB } from './lib/procs.mjs';
import { machineInfo, machineLine } from './lib/report.mjs';
import { damonLine } from './lib/return-stalls.mjs';
import { clusterdnsServer, freePort } from './lib/servers.mjs';
import { parseTraceGc } from './lib/gc-trace.mjs';
import { makeWorkload } from './lib/workload.mjs';
import { scenarios } from './scenarios.mjs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const { values: opt } = parseArgs({
  options: {
    scenario: { type: 'string', default: 'kubernetes' },
    cycles: { type: 'string', default: '4' },
    'idle-s': { type: 'string', default: '20' },
    'burst-s': { type: 'string', default: '6' },
    rate: { type: 'string', default: '16600' },
    'warmup-s': { type: 'string', default: '5' },
    variants: { type: 'string', default: '' },
    json: { type: 'string' },
    help: { type: 'boolean', short: 'h', default: false },
  },
  strict: true,
});
if (opt.help) {
  printHeaderHelp(import.meta.url);
  process.exit(0);
}

/** A bad option: said in one line, exit 2. */
function refuse(message) {
  console.error(`idle-burst: ${message}`);
  process.exit(2);
}

const scenario = scenarios.find((s) => s.name === opt.scenario);
if (!scenario) refuse(`no scenario ${opt.scenario} (there are: ${scenarios.map((s) => s.name).join(', ')})`);
const idles = opt['idle-s'].split(',').map(Number);
for (const [name, values] of [
  ['--idle-s', idles],
  ['--cycles', [Number(opt.cycles)]],
  ['--burst-s', [Number(opt['burst-s'])]],
  ['--rate', [Number(opt.rate)]],
]) {
  if (values.some((v) => !(v > 0))) refuse(`${name} takes positive numbers (got ${values.join(',')})`);
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function runVariant(flags, ctx) {
  const def = clusterdnsServer(scenario);
  const vctx = { ...ctx, port: await freePort(), mode: `idle-${ctx.variant++}`, nodeArgs: ['--trace-gc', ...flags] };
  // --trace-gc's clock starts with the process's V8 isolate, a few ms after this.
  const startedAt = Date.now();
  const server = def.start(vctx);
  await waitAnswering(vctx.port, ctx.sample, 60_000, () => server.child.exitCode === null);
  const load = async (seconds) => {
    const a = dnsperfArgs({
      port: vctx.port,
      queryFile: ctx.queries,
      seconds,
      maxQps: Number(opt.rate),
      outstanding: 1000,
    });
    return parseDnsperf((await runCommand('dnsperf', a, { pin: 0, timeoutMs: (seconds + 30) * 1000 })).stdout);
  };
  await load(Number(opt['warmup-s']));
  const cycles = [];
  for (let c = 0; c < Number(opt.cycles); c++) {
    const idle = idles[c % idles.length];
    const quietFrom = Date.now() - startedAt;
    await sleep(idle * 1000);
    const rssMiB = statusKiB(server.pid, 'VmRSS') / 1024;
    const burstFrom = Date.now() - startedAt;
    const r = await load(Number(opt['burst-s']));
    const gcs = parseTraceGc(readFileSync(join(ctx.dir, `${def.name}-${vctx.mode}.log`), 'utf8')).filter(
      (g) => g.atMs >= quietFrom && /^Mark-(Compact|sweep)/.test(g.kind),
    );
    cycles.push({
      idleS: idle,
      rssMiB,
      maxMs: r.maxLatencyS * 1000,
      lost: r.lost,
      gcs: gcs.map((g) => ({ ...g, reduce: g.kind.includes('(reduce)'), inBurst: g.atMs >= burstFrom })),
    });
  }
  await stopProcess(server);
  return { flags: flags.join(' ') || '(as deployed)', cycles };
}

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'clusterdns-idle-burst-'));
  mkdirSync(join(root, 'bench/results'), { recursive: true });
  const workload = makeWorkload(dir);
  const ctx = { root, dir, workload, port: 0, pin: 1, workers: 1, variant: 0 };
  const skipped = await scenario.setup?.(ctx);
  if (typeof skipped === 'string') throw new Error(`${scenario.name}: ${skipped}`);
  ctx.queries = scenario.queries(ctx);
  ctx.sample = workload.records[0].name;
  const variants = opt.variants === '' ? [[]] : opt.variants.split(';').map((v) => v.split(' ').filter(Boolean));
  const results = [];
  for (const flags of variants) results.push(await runVariant(flags, ctx));
  const lines = [
    `# Bursts after quiet spells: clusterdns \`${scenario.name}\``,
    '',
    machineLine(await machineInfo()),
    damonLine(),
    '',
    `\`node bench/idle-burst.mjs ${process.argv.slice(2).join(' ')}\``,
    '',
    '| variant | cycle | quiet s | RSS after the quiet MiB | burst max ms | lost | full GCs in the quiet (pause ms) | full GCs in the burst (pause ms) |',
    '|---|---:|---:|---:|---:|---:|---|---|',
  ];
  const gcList = (gcs) => gcs.map((g) => `${g.pauseMs.toFixed(1)}${g.reduce ? ' reduce' : ''}`).join(', ') || '—';
  for (const r of results)
    r.cycles.forEach((c, i) =>
      lines.push(
        `| ${r.flags} | ${i + 1} | ${c.idleS} | ${c.rssMiB.toFixed(0)} | ${c.maxMs.toFixed(1)} | ${c.lost} | ${gcList(c.gcs.filter((g) => !g.inBurst))} | ${gcList(c.gcs.filter((g) => g.inBurst))} |`,
      ),
    );
  const text = lines.join('\n') + '\n';
  process.stdout.write(text);
  writeFileSync(join(root, 'bench/results/idle-burst-latest.md'), text);
  if (opt.json) writeFileSync(opt.json, JSON.stringify(results, null, 2));
  rmSync(dir, { recursive: true, force: true });
}

process.on('SIGINT', () => {
  killAllSync();
  process.exit(130);
});
main()
  .catch((e) => {
    console.error(e.message);
    process.exitCode = 1;
  })
  .finally(() => stopAll());
