#!/usr/bin/env node
// Memory per kubernetes answer, kept by the kubernetes plugin alone and with `cache` in front of
// it: a built tree's Runtime serves 10,000 Service names of the bench workload's shape (A) once through its
// real chain, then the heap and the ArrayBuffers are measured after a full GC. What `cache` adds
// per answer is the difference: its entries, and any copy of the answer they make. Each build
// (--root) runs in a child of its own with --expose-gc.
//
//   node bench/answer-memory.mjs [--root DIR ...] [--rounds 3]
//
// Prints bytes per name (median of the rounds), heap and ArrayBuffers together, for `kubernetes`
// and `cache` + `kubernetes`. With --json, one line of JSON per build instead of the table.

import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { makeWorkload } from './lib/workload.mjs';
import { writeClusterManifest } from './scenarios.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const { values: opt } = parseArgs({
  options: {
    root: { type: 'string', multiple: true },
    rounds: { type: 'string', default: '3' },
    json: { type: 'boolean', default: false },
    child: { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  },
  strict: true,
});

if (opt.help) {
  process.stdout.write('usage: node bench/answer-memory.mjs [--root DIR ...] [--rounds N]\n');
  process.exit(0);
}

/** A query for `name` A, RD set, no EDNS. */
function encodeQuery(id, name) {
  const labels = name.split('.').filter(Boolean);
  const b = Buffer.alloc(12 + labels.reduce((n, l) => n + 1 + l.length, 0) + 1 + 4);
  b.writeUInt16BE(id, 0);
  b.writeUInt16BE(0x0100, 2);
  b.writeUInt16BE(1, 4);
  let p = 12;
  for (const l of labels) {
    b[p++] = l.length;
    b.write(l, p, 'latin1');
    p += l.length;
  }
  b[p++] = 0;
  b.writeUInt16BE(1, p);
  b.writeUInt16BE(1, p + 2);
  return b;
}

/** Heap and ArrayBuffer bytes in use after a full GC. */
const used = () => {
  globalThis.gc();
  globalThis.gc();
  const m = process.memoryUsage();
  return { heap: m.heapUsed, buffers: m.arrayBuffers };
};

/** Bytes per name held once every name was asked, for `corefile` served by the build at `root`. */
async function measure(root, withCache) {
  const dist = (p) => pathToFileURL(join(root, 'dist/src', p)).href;
  const { parseConfig, Runtime } = await import(dist('server/runtime.js'));
  const { Dispatcher } = await import(dist('server/dispatcher.js'));
  const { listenerKey } = await import(dist('server/listeners.js'));
  const { HttpServices } = await import(dist('server/http.js'));
  const { ServerServices } = await import(dist('server/services.js'));
  const dir = mkdtempSync(join(tmpdir(), 'answer-memory-'));
  const workload = makeWorkload(dir, { queries: 1, perNamespace: 500 });
  const m = writeClusterManifest({ dir, workload });
  const corefile =
    `cluster.local:53 {\n${withCache ? '    cache 3600 {\n        success 20000\n    }\n' : ''}` +
    `    kubernetes {\n        manifests ${m}\n        ttl 30\n    }\n}\n`;
  const cf = join(dir, 'Corefile');
  writeFileSync(cf, corefile);
  const config = parseConfig({ file: cf, text: corefile, builtin: false }, 53);
  const rt = await Runtime.create(config, {
    http: new HttpServices(),
    services: new ServerServices(),
    requestReload() {},
    shuttingDown: () => false,
  });
  await rt.startup();
  const dispatcher = new Dispatcher();
  const router = rt.routers().get(listenerKey('', 53));
  const client = {
    proto: 'udp',
    remoteAddress: '127.0.0.1',
    remotePort: 40000,
    family: 1,
    localAddress: '127.0.0.1',
    localPort: 53,
  };
  const queries = workload.records.map((r, i) => encodeQuery(i & 0xffff, r.name));
  const ask = (q) =>
    new Promise((done) =>
      dispatcher.handle(Buffer.from(q), client, router, (out) => {
        if (out === null || (out[3] & 0xf) !== 0 || out.readUInt16BE(6) !== 1) throw new Error('not an answer');
        done();
      }),
    );
  // Warm-up, so that what the JIT makes is not counted: every code path many times (hits too).
  const warm = 1000;
  for (let i = 0; i < warm; i++) await ask(queries[i]);
  for (let i = 0; i < warm; i++) await ask(queries[i]);
  const before = used();
  for (let i = warm; i < queries.length; i++) await ask(queries[i]);
  const after = used();
  const n = queries.length - warm;
  await rt.shutdown();
  rmSync(dir, { recursive: true, force: true });
  return { heap: (after.heap - before.heap) / n, buffers: (after.buffers - before.buffers) / n };
}

if (opt.child) {
  const root = opt.child;
  const kubernetes = await measure(root, false);
  const cached = await measure(root, true);
  process.stdout.write(JSON.stringify({ kubernetes, cached }) + '\n');
  process.exit(0);
}

const roots = (opt.root ?? [resolve(here, '..')]).map((r) => resolve(r));
const keys = ['kubernetes', 'cached', 'kubernetesBuffers', 'cachedBuffers'];
const rows = new Map(roots.map((r) => [r, Object.fromEntries(keys.map((k) => [k, []]))]));
for (let round = 0; round < Number(opt.rounds); round++) {
  for (const root of roots) {
    const res = spawnSync(process.execPath, ['--expose-gc', fileURLToPath(import.meta.url), '--child', root], {
      encoding: 'utf8',
      env: { ...process.env, CLUSTERDNS_LOG: 'error' },
    });
    const line = res.stdout.trim().split('\n').pop();
    if (res.status !== 0 || !line) {
      process.stderr.write(`${root}: failed\n${res.stderr}\n`);
      process.exit(1);
    }
    const v = JSON.parse(line);
    const row = rows.get(root);
    row.kubernetes.push(v.kubernetes.heap + v.kubernetes.buffers);
    row.cached.push(v.cached.heap + v.cached.buffers);
    row.kubernetesBuffers.push(v.kubernetes.buffers);
    row.cachedBuffers.push(v.cached.buffers);
    process.stderr.write(`round ${round + 1} ${root}: ${line}\n`);
  }
}
const median = (a) => [...a].sort((x, y) => x - y)[a.length >> 1];
if (opt.json) {
  for (const [root, r] of rows)
    process.stdout.write(JSON.stringify({ root, ...Object.fromEntries(keys.map((k) => [k, median(r[k])])) }) + '\n');
} else {
  process.stdout.write(
    '| build | kubernetes: bytes per name | cache + kubernetes | added by cache |\n|---|---:|---:|---:|\n',
  );
  for (const [root, r] of rows) {
    const k = median(r.kubernetes);
    const c = median(r.cached);
    process.stdout.write(`| ${root} | ${k.toFixed(0)} | ${c.toFixed(0)} | ${(c - k).toFixed(0)} |\n`);
  }
}
