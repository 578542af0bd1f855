#!/usr/bin/env node
// "Under attack": a well-behaved UDP client's latency (200 queries a second for a Service's
// A record, 3 s) from clusterdns (-workers 1, the default Kubernetes Corefile shape) while each
// attack of issue 17 runs from a process of its own at the lowest CPU priority, next to the
// same client against an idle clusterdns at the same time (what the machine itself adds).
// The attacks are test/helpers/attack.ts (built into dist/ by `npm run bench`).
//
//   node bench/attack.mjs [--write]     --write: the table goes into BENCHMARKS.md

import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { cpuSnapshot, serverCpuPercent } from './lib/cpu.mjs';
import { printHeaderHelp } from './lib/help.mjs';
import { killAllSync, startProcess, stopProcess, treeRssKiB } from './lib/procs.mjs';
import { freePort, launcherNodeArgs } from './lib/servers.mjs';
import { bigServices } from './truncation.mjs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const BEGIN = '<!-- attack:begin -->';
const END = '<!-- attack:end -->';
const GOOD = 'web.default.svc.cluster.local.';

/** [label, attack argv] in the order measured; null: no attack (the baseline). */
export const ATTACKS = [
  ['none', null],
  [
    'TCP trickle, 1 connection (65,535-octet frame, 60 KB, then 1 octet / 100 ms)',
    ['trickle', '--conns', '1', '--prefill', '60000', '--interval', '100'],
  ],
  [
    'TCP trickle, 1,000 connections from one address',
    ['trickle', '--conns', '1000', '--from', '127.0.0.2', '--prefill', '60000', '--interval', '100'],
  ],
  [
    'TCP pipelining without reading: 20 connections x 2,000 SRV (64 KB answers)',
    ['pipeline', '--conns', '20', '--name', 'srv.default.svc.cluster.local.', '--qtype', '33', '--count', '2000'],
  ],
  [
    'TCP: 100 big SRV queries, client gone at once (x5)',
    [
      'pipeline',
      '--conns',
      '5',
      '--name',
      'srv.default.svc.cluster.local.',
      '--qtype',
      '33',
      '--count',
      '100',
      '--close',
    ],
  ],
  [
    'truncation flood: 200/s big A and SRV at EDNS 1232',
    [
      'truncate',
      '--name',
      'big.default.svc.cluster.local.,srv.default.svc.cluster.local.',
      '--qtype',
      '1,33',
      '--edns',
      '1232',
      '--rate',
      '200',
    ],
  ],
];

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function waitAnswering(goodClient, port) {
  for (let i = 0; i < 300; i++) {
    const r = await goodClient(port, GOOD, 1, { rate: 20, seconds: 0.1 }).catch(() => null);
    if (r && r.lost === 0) return;
    await sleep(100);
  }
  throw new Error(`clusterdns on ${port} did not answer`);
}

/** Runs every attack; returns the markdown table. */
export async function underAttack(log = (s) => process.stderr.write(s + '\n')) {
  const { goodClient, wireQuery } = await import(pathToFileURL(join(root, 'dist/test/helpers/attack.js')).href);
  const dir = mkdtempSync(join(tmpdir(), 'clusterdns-attack-'));
  const port = await freePort();
  const idlePort = await freePort(new Set([port]));
  const yaml = `${bigServices()}---\napiVersion: v1\nkind: Service\nmetadata: { name: web, namespace: default }\nspec: { clusterIP: 10.96.0.80, ports: [{ name: http, port: 80, protocol: TCP }] }\n`;
  writeFileSync(join(dir, 'cluster.yaml'), yaml);
  const conf = (p) =>
    `cluster.local:${p} {\n    bind 127.0.0.1\n    kubernetes cluster.local {\n        manifests ${join(dir, 'cluster.yaml')}\n    }\n    cache 30\n    loadbalance\n}\n`;
  writeFileSync(join(dir, 'Corefile'), conf(port));
  writeFileSync(join(dir, 'Corefile.idle'), conf(idlePort));
  const args = (c) => [
    ...launcherNodeArgs(root),
    join(root, 'bin/clusterdns'),
    '-conf',
    join(dir, c),
    '-workers',
    '1',
    '-quiet',
  ];
  const server = startProcess('clusterdns', process.execPath, args('Corefile'), {
    logFile: join(dir, 'log'),
    cwd: dir,
  });
  const idle = startProcess('clusterdns-idle', process.execPath, args('Corefile.idle'), {
    logFile: join(dir, 'log.idle'),
    cwd: dir,
  });
  const rows = [];
  try {
    await waitAnswering(goodClient, port);
    await waitAnswering(goodClient, idlePort);
    // The big answers prepared before the attacks, as in a running cluster.
    const { default: net } = await import('node:net');
    for (const [name, type] of [
      ['big.default.svc.cluster.local.', 1],
      ['srv.default.svc.cluster.local.', 33],
    ]) {
      const q = wireQuery(name, type);
      await new Promise((res) => {
        const s = net.connect(port, '127.0.0.1', () =>
          s.write(Buffer.concat([Buffer.from([q.length >> 8, q.length & 255]), q])),
        );
        s.once('data', () => (s.destroy(), res()));
        s.on('error', res);
      });
    }
    for (const [label, argv] of ATTACKS) {
      log(`under attack: ${label}`);
      let child = null;
      if (argv)
        child = spawn(
          'nice',
          [
            '-n',
            '19',
            process.execPath,
            join(root, 'dist/test/helpers/attack.js'),
            ...argv,
            '--port',
            String(port),
            '--seconds',
            '5',
          ],
          { stdio: ['ignore', 'pipe', 'inherit'] },
        );
      const done = child ? new Promise((r) => child.on('exit', r)) : Promise.resolve();
      await sleep(700);
      const rssBefore = treeRssKiB(server.pid);
      let rssMost = rssBefore;
      const sampler = setInterval(() => (rssMost = Math.max(rssMost, treeRssKiB(server.pid))), 100);
      const a = cpuSnapshot(server.pid);
      const [g, c] = await Promise.all([
        goodClient(port, GOOD, 1, { rate: 200, seconds: 3 }),
        goodClient(idlePort, GOOD, 1, { rate: 200, seconds: 3 }),
      ]);
      const b = cpuSnapshot(server.pid);
      clearInterval(sampler);
      await done;
      const ms = (x) => (Number.isFinite(x) ? x.toFixed(x < 10 ? 2 : 1) : 'lost');
      rows.push(
        `| ${label} | ${ms(g.p50)} | ${ms(g.p99)} | ${ms(g.max)} | ${g.lost} | ${ms(c.p99)} | ${serverCpuPercent(a, b).toFixed(0)}% | ${(rssBefore / 1024).toFixed(0)} → ${(rssMost / 1024).toFixed(0)} |`,
      );
      await sleep(500);
    }
  } finally {
    await stopProcess(server);
    await stopProcess(idle);
    rmSync(dir, { recursive: true, force: true });
  }
  return [
    '| attack (5 s, from a process at nice 19) | good client p50 ms | p99 ms | max ms | lost of 600 | idle server p99 ms, same time | server CPU | server RSS MB |',
    '|---|---:|---:|---:|---:|---:|---:|---:|',
    ...rows,
  ].join('\n');
}

/** Puts the table between BENCHMARKS.md's attack markers. */
export function writeAttackTable(md) {
  const file = join(root, 'BENCHMARKS.md');
  const text = readFileSync(file, 'utf8');
  const a = text.indexOf(BEGIN);
  const b = text.indexOf(END);
  if (a < 0 || b < a) throw new Error(`BENCHMARKS.md: markers ${BEGIN} … ${END} not found`);
  writeFileSync(file, text.slice(0, a + BEGIN.length) + '\n' + md + '\n' + text.slice(b));
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  // A crash must not leave a server behind.
  process.on('exit', () => killAllSync());
  const { values: o } = parseArgs({ options: { write: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } } });
  if (o.help) {
    printHeaderHelp(import.meta.url);
    process.exit(0);
  }
  const md = await underAttack();
  process.stdout.write(md + '\n');
  if (o.write) writeAttackTable(md);
}
