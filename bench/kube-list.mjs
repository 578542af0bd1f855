#!/usr/bin/env node
// How the kubernetes plugin's first list costs the API server (issue 22): API server CPU and
// clusterdns's time to ready with N Services, for each way the client can list.
//
//   node bench/kube-list.mjs [--services 10000] [--runs 3] [--modes paged,cache,watchlist]
//
// Modes (the test API server, test/helpers/kubeapi.ts, compiled to dist/test/helpers/kubeapi.js,
// in a process of its own so that its CPU time is its own):
//   paged      no watch cache: the list is read from storage, 500 a page with continue tokens
//              (what every start cost before: a paged quorum read)
//   cache      a watch cache: resourceVersion=0 answered whole from it
//   watchlist  the streaming list: one watch with sendInitialEvents, closed by its bookmark
// Each run starts `bin/clusterdns -workers 1` with `kubernetes { endpoint API }` and `ready`,
// and measures spawn → /ready 200, and the API server's user+system CPU over that time.
// The figures are the test server's, not kube-apiserver's: they compare the client's requests.

import { fork, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';

const { values: o } = parseArgs({
  options: {
    services: { type: 'string', default: '10000' },
    runs: { type: 'string', default: '3' },
    modes: { type: 'string', default: 'paged,cache,watchlist' },
    'serve-api': { type: 'string' },
  },
});

if (o['serve-api']) {
  // The API server role: mode in --serve-api; reports its CPU on request.
  const { KubeApiServer } = await import(resolve('dist/test/helpers/kubeapi.js'));
  const mode = o['serve-api'];
  const api = await KubeApiServer.create({
    watchCache: mode !== 'paged',
    watchList: mode === 'watchlist',
    bookmarkIntervalMs: 0,
  });
  api.apply({ kind: 'Namespace', metadata: { name: 'bench' } });
  const n = Number(o.services);
  for (let i = 0; i < n; i++) {
    api.apply({
      kind: 'Service',
      metadata: { name: `svc-${i}`, namespace: 'bench', labels: { app: `app-${i}` } },
      spec: {
        type: 'ClusterIP',
        clusterIP: `10.96.${(i >> 8) & 255}.${i & 255}`,
        clusterIPs: [`10.96.${(i >> 8) & 255}.${i & 255}`],
        ports: [{ name: 'http', port: 80, protocol: 'TCP', targetPort: 8080 }],
        selector: { app: `app-${i}` },
      },
    });
  }
  process.on('message', (m) => {
    if (m === 'cpu')
      process.send({ cpu: process.cpuUsage(), requests: api.requestLog.map((r) => `${r.verb} ${r.path} ${r.status}`) });
    if (m === 'exit') void api.close().then(() => process.exit(0));
  });
  process.send({ url: api.url });
} else {
  const modes = o.modes.split(',');
  const runs = Number(o.runs);
  const rows = [];
  for (const mode of modes) {
    const results = [];
    for (let r = 0; r < runs; r++) results.push(await once(mode));
    results.sort((a, b) => a.readyMs - b.readyMs);
    const mid = results[Math.floor(results.length / 2)];
    const cpus = results.map((x) => x.cpuMs).sort((a, b) => a - b);
    rows.push({
      mode,
      readyMs: mid.readyMs,
      cpuMs: cpus[Math.floor(cpus.length / 2)],
      requests: mid.requests,
      all: results,
    });
  }
  console.log(`\n${o.services} Services, median of ${runs} runs`);
  console.log('| mode | time to ready (ms) | API server CPU (ms) | Services requests |');
  console.log('|---|---|---|---|');
  for (const r of rows) console.log(`| ${r.mode} | ${r.readyMs} | ${r.cpuMs} | ${r.requests} |`);
  for (const r of rows)
    console.log(
      `${r.mode}: ready ${r.all.map((x) => x.readyMs).join(', ')} ms; cpu ${r.all.map((x) => x.cpuMs).join(', ')} ms`,
    );
}

async function once(mode) {
  const child = fork(new URL(import.meta.url).pathname, ['--serve-api', mode, '--services', o.services], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const next = () => new Promise((ok) => child.once('message', ok));
  const { url } = await next();
  child.send('cpu');
  const before = (await next()).cpu;
  const dir = mkdtempSync(join(tmpdir(), 'kube-list-'));
  const port = 20000 + Math.floor(Math.random() * 20000);
  const readyPort = port + 1;
  writeFileSync(
    join(dir, 'Corefile'),
    `cluster.local:${port} {\n    bind 127.0.0.1\n    ready 127.0.0.1:${readyPort}\n    kubernetes {\n        endpoint ${url}\n    }\n}\n`,
  );
  const started = Date.now();
  const dns = spawn(
    process.execPath,
    [resolve('bin/clusterdns'), '-conf', join(dir, 'Corefile'), '-workers', '1', '-quiet'],
    { stdio: 'ignore' },
  );
  let readyMs = -1;
  while (Date.now() - started < 60_000) {
    try {
      const res = await fetch(`http://127.0.0.1:${readyPort}/ready`);
      if (res.status === 200) {
        readyMs = Date.now() - started;
        break;
      }
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 10));
  }
  child.send('cpu');
  const after = await next();
  dns.kill('SIGTERM');
  child.send('exit');
  await new Promise((r) => child.once('exit', r));
  rmSync(dir, { recursive: true, force: true });
  const cpuMs = Math.round((after.cpu.user - before.user + after.cpu.system - before.system) / 1000);
  const requests = after.requests
    .filter((l) => l.includes('/api/v1/services'))
    .map((l) => l.split(' ')[0] + (l.endsWith('422') ? ' (422)' : ''))
    .join(', ');
  return { readyMs, cpuMs, requests };
}
