#!/usr/bin/env node
// Bytes allocated per answered query and where (issue 23): clusterdns on scenarios of
// bench/scenarios.mjs, pinned to CPU 1, driven by dnsperf at a fixed rate (CPU 0), with V8's
// sampling heap profiler (lib/alloc-profile.mjs) counting every allocation, collected or not,
// over the measured window (after a warm-up). Prints per scenario the bytes per query in all,
// by allocating function and by the innermost frame in clusterdns's own code (src/).
//
//   node bench/alloc.mjs [--scenario forward,kubernetes,cache] [--qps 10000] [--seconds 10]
//        [--warmup 3] [--server-node-args "FLAGS"]
//
// The sampling interval (CLUSTERDNS_ALLOC_INTERVAL, 1024 bytes) makes the per-site figures
// estimates; the total agrees with scavenges × semi-space ÷ queries to within the sampling.
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { waitAnswering } from './lib/check.mjs';
import { runDnsperf } from './lib/dnsperf.mjs';
import { killAllSync, startProcess, stopAll, stopProcess } from './lib/procs.mjs';
import { clusterdnsServer, freePort } from './lib/servers.mjs';
import { makeWorkload, sampleRecords } from './lib/workload.mjs';
import { scenarios } from './scenarios.mjs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const { values: opt } = parseArgs({
  options: {
    scenario: { type: 'string', default: 'forward,kubernetes,cache' },
    qps: { type: 'string', default: '10000' },
    seconds: { type: 'string', default: '10' },
    warmup: { type: 'string', default: '3' },
    'server-node-args': { type: 'string', default: '' },
  },
});
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
process.on('SIGINT', () => {
  killAllSync();
  process.exit(130);
});

const tmp = mkdtempSync(join(tmpdir(), 'clusterdns-alloc-'));
const workload = makeWorkload(tmp);
const taken = new Set();
const kb = (b) => (b / 1024).toFixed(2);
for (const name of opt.scenario.split(',')) {
  const sc = scenarios.find((s) => s.name === name);
  if (!sc) throw new Error(`unknown scenario ${name}`);
  const def = clusterdnsServer(sc);
  const profile = join(tmp, `alloc-${name}.json`);
  const ctx = {
    root,
    dir: tmp,
    workload,
    mode: 'alloc',
    pin: 1,
    workers: 1,
    port: await freePort(taken),
    startProcess,
    nodeArgs: [
      ...opt['server-node-args'].split(' ').filter(Boolean),
      '--import',
      pathToFileURL(join(root, 'bench/lib/alloc-profile.mjs')).href,
    ],
    env: { ...process.env, CLUSTERDNS_ALLOC_PROFILE: profile },
  };
  const skip = await sc.setup?.(ctx);
  if (typeof skip === 'string') throw new Error(`${name}: ${skip}`);
  const proc = def.start(ctx);
  const first = def.samples?.(ctx)?.[0]?.name ?? sampleRecords(workload.records)[0].name;
  await waitAnswering(ctx.port, first, 30000, () => proc.child.exitCode === null);
  const queryFile = def.queries(ctx);
  const dp = { port: ctx.port, queryFile, clients: 4, outstanding: 100, maxQps: Number(opt.qps), pin: 0 };
  await runDnsperf({ ...dp, seconds: Number(opt.warmup) });
  process.kill(proc.pid, 'SIGUSR2');
  await sleep(200);
  const r = await runDnsperf({ ...dp, seconds: Number(opt.seconds) });
  // Writing the profile on exit takes a while with a big heap (kubernetes).
  await stopProcess(proc, 60_000);
  const a = JSON.parse(readFileSync(profile, 'utf8'));
  const q = r.completed;
  console.log(
    `\n## ${name}: ${q} queries answered at ${Math.round(r.qps)} QPS; ${kb(a.bytes / q)} KB allocated per query`,
  );
  console.log('\n| allocating function (self) | bytes per query |\n|---|---:|');
  for (const [k, v] of a.self.slice(0, 15)) console.log(`| ${k} | ${Math.round(v / q)} |`);
  console.log('\n| innermost frame in src/ | bytes per query |\n|---|---:|');
  for (const [k, v] of a.ours.slice(0, 15)) console.log(`| ${k} | ${Math.round(v / q)} |`);
}
await stopAll();
