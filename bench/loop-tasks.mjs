#!/usr/bin/env node
// The serving thread's periodic work (timers: the cache sweep, the native table's fold, the
// manifests and hosts polls, the status recorder, the clock...) under a steady load: how often
// each runs and how long one run takes, each callback timed in the server (bench/lib/loop-tasks.mjs).
//
//   npm run build && node bench/loop-tasks.mjs [--scenario hosts,kubernetes,kubernetes-status,cache,cache-big,forward-cache]
//       [--seconds 20] [--qps 5000] [--root DIR (another build, for before/after)]
//
// cache-big: `cache` (success capacity 200,000) in front of an upstream with 100,000 names of
// TTL 5, asked all of them: a big store whose entries keep expiring. forward-cache: the default
// cache in front of the same upstream (TTL 30), evicting. kubernetes-status: `kubernetes` with
// the health plugin's status page on (the fold counts names). One worker (`-workers 1`).

import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { makeWorkload, seededRandom } from './lib/workload.mjs';
import { writeClusterManifest } from './scenarios.mjs';
import { freePort, launcherNodeArgs } from './lib/servers.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const { values } = parseArgs({
  options: {
    scenario: { type: 'string', default: 'hosts,kubernetes,kubernetes-status,cache,cache-big,forward-cache' },
    seconds: { type: 'string', default: '20' },
    qps: { type: 'string', default: '5000' },
    root: { type: 'string', default: resolve(here, '..') },
  },
});
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function measure(scenario) {
  const dir = mkdtempSync(join(tmpdir(), 'clusterdns-loop-tasks-'));
  const port = await freePort();
  const up = await freePort(new Set([port]));
  const statusPort = await freePort(new Set([port, up]));
  const workload = makeWorkload(dir);
  let queryFile = workload.queryFile;
  let upstream = null;
  const bigUpstream = (ttl) => {
    const names = 100_000;
    const lines = [];
    for (let i = 0; i < names; i++)
      lines.push(`10.${100 + (i >> 16)}.${(i >> 8) & 255}.${i & 255} big-${i}.ns.svc.cluster.local`);
    writeFileSync(join(dir, 'big-hosts.txt'), lines.join('\n') + '\n');
    const rnd = seededRandom(5);
    const q = Array.from({ length: 400_000 }, () => `big-${Math.floor(rnd() * names)}.ns.svc.cluster.local A`);
    queryFile = join(dir, 'big-queries.txt');
    writeFileSync(queryFile, q.join('\n') + '\n');
    startUpstream(join(dir, 'big-hosts.txt'), ttl);
  };
  const startUpstream = (hosts, ttl) => {
    upstream = spawn(
      process.execPath,
      [join(here, 'bare-responder.mjs'), '--port', String(up), '--hosts', hosts, '--ttl', String(ttl)],
      { stdio: 'ignore' },
    );
  };
  const head = `cluster.local:${port} {\n    bind 127.0.0.1\n`;
  const kubernetes = () =>
    `    kubernetes {\n        manifests ${writeClusterManifest({ dir, workload })}\n        ttl 30\n    }\n}\n`;
  let corefile;
  switch (scenario) {
    case 'hosts':
      corefile = `${head}    hosts ${workload.hostsFile} {\n        ttl 30\n    }\n}\n`;
      break;
    case 'kubernetes':
      corefile = head + kubernetes();
      break;
    case 'kubernetes-status':
      corefile = `${head}    health 127.0.0.1:${statusPort} {\n        status\n    }\n${kubernetes()}`;
      break;
    case 'cache':
      startUpstream(workload.hostsFile, 30);
      corefile = `${head}    cache 3600\n    forward . 127.0.0.1:${up}\n}\n`;
      break;
    case 'cache-big':
      bigUpstream(5);
      corefile = `${head}    cache 3600 {\n        success 200000\n    }\n    forward . 127.0.0.1:${up}\n}\n`;
      break;
    case 'forward-cache':
      bigUpstream(30);
      corefile = `${head}    cache\n    forward . 127.0.0.1:${up}\n}\n`;
      break;
    default:
      throw new Error(`unknown scenario ${scenario}`);
  }
  writeFileSync(join(dir, 'Corefile'), corefile);
  const outFile = join(dir, 'tasks.json');
  const server = spawn(
    process.execPath,
    [
      ...launcherNodeArgs(values.root),
      '--import',
      join(here, 'lib/loop-tasks.mjs'),
      join(values.root, 'dist/src/cli.js'),
      '-conf',
      join(dir, 'Corefile'),
      '-quiet',
      '-workers',
      '1',
    ],
    { env: { ...process.env, LOOP_TASKS_OUT: outFile }, stdio: ['ignore', 'ignore', 'inherit'] },
  );
  try {
    const probe =
      scenario === 'cache-big' || scenario === 'forward-cache'
        ? 'big-1.ns.svc.cluster.local'
        : workload.records[0].name;
    for (let i = 0; i < 300; i++) {
      try {
        const a = execFileSync('dig', ['+short', '+tries=1', '+time=1', '-p', String(port), '@127.0.0.1', probe]);
        if (a.toString().trim()) break;
      } catch {
        /* not up yet */
      }
      await sleep(200);
    }
    server.kill('SIGUSR2'); // start counting: start-up is left out
    await sleep(100);
    const ticks = () => {
      const f = readFileSync(`/proc/${server.pid}/stat`, 'utf8').split(') ')[1].split(' ');
      return Number(f[11]) + Number(f[12]);
    };
    const t0 = ticks();
    const perf = execFileSync(
      'dnsperf',
      ['-s', '127.0.0.1', '-p', String(port), '-d', queryFile, '-l', values.seconds, '-Q', values.qps, '-c', '4'],
      { maxBuffer: 1 << 24 },
    ).toString();
    const cpuMs = (ticks() - t0) * 10;
    const completed = Number(/Queries completed:\s+(\d+)/.exec(perf)?.[1] ?? 0);
    server.kill('SIGUSR2');
    let rows = null;
    for (let i = 0; i < 50 && rows === null; i++) {
      await sleep(100);
      try {
        rows = JSON.parse(readFileSync(`${outFile}.${server.pid}`, 'utf8'));
      } catch {
        /* not written yet */
      }
    }
    console.log(
      `\n${scenario}: ${completed} queries answered, server CPU ${cpuMs} ms (${((cpuMs * 1000) / completed).toFixed(1)} µs a query)`,
    );
    console.log('| task (scheduled from) | runs | wall p50 / p99 / max ms | CPU mean / max ms |');
    console.log('|---|---:|---|---|');
    for (const r of rows ?? [])
      console.log(
        `| ${r.label} | ${r.n} | ${r.p50.toFixed(3)} / ${r.p99.toFixed(3)} / ${r.max.toFixed(3)} | ${r.cpuMean.toFixed(3)} / ${r.cpuMax.toFixed(3)} |`,
      );
  } finally {
    server.kill('SIGTERM');
    upstream?.kill('SIGTERM');
    await sleep(300);
    rmSync(dir, { recursive: true, force: true });
  }
}

for (const s of values.scenario.split(',')) await measure(s);
