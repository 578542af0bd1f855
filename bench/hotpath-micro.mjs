#!/usr/bin/env node
// The JavaScript of the native UDP path alone, per query: a built tree's DnsListener is given a
// stand-in for the addon (native/udpbatch.c), batches of the bench workload's queries are
// written into its receive slab and its batch callback is called as the addon calls it; the
// answers land in the send slab. No sockets and no kernel: what is measured is the user-space
// work between recvmmsg and sendmmsg, the part of issue 23's CPU per query that the server's
// code decides. Several builds (--root) are loaded into one process per round and measured in
// alternating slices of --slice batches, so that other work on a shared machine falls on all alike.
// Scenarios joined by `+` (`kubernetes+rewrite+template`) are likewise measured in one process.
//
//   node bench/hotpath-micro.mjs [--root DIR ...] [--scenario hosts,kubernetes,rewrite,template,cache,kcache,kcache-miss]
//        [--rounds 5] [--batches 20000] [--batch 64] [--slice 250]
//
// Prints ns per query (median of the rounds, and the spread). A build is a directory with
// dist/src built by `npm run build` (the default: this tree).

import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import dgram from 'node:dgram';
import { makeWorkload } from './lib/workload.mjs';
import { writeClusterManifest } from './scenarios.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const { values: opt } = parseArgs({
  options: {
    root: { type: 'string', multiple: true },
    scenario: { type: 'string', default: 'hosts,kubernetes,rewrite,cache' },
    rounds: { type: 'string', default: '5' },
    batches: { type: 'string', default: '20000' },
    batch: { type: 'string', default: '64' },
    slice: { type: 'string', default: '250' },
    child: { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  },
  strict: true,
});

if (opt.help) {
  process.stdout.write(
    'usage: node bench/hotpath-micro.mjs [--root DIR ...] [--scenario a,b] [--rounds N] [--batches N] [--batch N]\n',
  );
  process.exit(0);
}

/** A query for `name` A, RD set, no EDNS (as dnsperf sends by default). */
function encodeQuery(id, name) {
  const labels = name.split('.').filter(Boolean);
  const len = 12 + labels.reduce((n, l) => n + 1 + l.length, 0) + 1 + 4;
  const b = Buffer.alloc(len);
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

/** One build serving `scenario` behind a stand-in addon: run(batches) → CPU ns and answers. */
async function setup(root, scenario, batchSize) {
  const dist = (p) => pathToFileURL(join(root, 'dist/src', p)).href;
  const { parseConfig, Runtime } = await import(dist('server/runtime.js'));
  const listeners = await import(dist('server/listeners.js'));
  let Dispatcher;
  try {
    ({ Dispatcher } = await import(dist('server/dispatcher.js')));
  } catch {
    ({ Dispatcher } = listeners);
  }
  const { HttpServices } = await import(dist('server/http.js'));
  const { META_INTS, OUT_INTS } = await import(dist('server/udp-native.js'));
  const dir = mkdtempSync(join(tmpdir(), 'hotpath-micro-'));
  const workload = makeWorkload(dir, { queries: 1 });
  let upstream = null;
  let corefile;
  let names = workload.records.map((r) => r.name);
  if (scenario === 'hosts') {
    corefile = `cluster.local:53 {\n    hosts ${workload.hostsFile} {\n        ttl 30\n    }\n}\n`;
  } else if (scenario === 'kubernetes') {
    const m = writeClusterManifest({ dir, workload });
    corefile = `cluster.local:53 {\n    kubernetes {\n        manifests ${m}\n        ttl 30\n    }\n}\n`;
  } else if (scenario === 'rewrite') {
    const m = writeClusterManifest({ dir, workload });
    corefile =
      `example.org:53 {\n    rewrite name regex (.*)\\.example\\.org {1}.svc.cluster.local answer auto\n` +
      `    kubernetes cluster.local {\n        manifests ${m}\n        ttl 30\n    }\n}\n`;
    names = names.map((n) => n.replace('.svc.cluster.local', '.example.org'));
  } else if (scenario === 'template') {
    // As bench/scenarios.mjs's `template` row.
    corefile =
      `cluster.local:53 {\n    template IN A cluster.local {\n` +
      `        match "^svc-(?P<n>[0-9]+)[.]ns-(?P<m>[0-9]+)[.]svc[.]cluster[.]local[.]$"\n` +
      `        answer "{{ .Name }} 30 IN A 10.200.{{ .Group.m }}.{{ .Group.n }}"\n    }\n}\n`;
  } else if (scenario === 'cache') {
    // The upstream: a hosts server of the same build, in this process, on a real socket.
    upstream = dgram.createSocket('udp4');
    await new Promise((r) => upstream.bind(0, '127.0.0.1', r));
    corefile =
      `cluster.local:53 {\n    cache 3600\n    forward . 127.0.0.1:${upstream.address().port}\n}\n` +
      `cluster.local:54 {\n    hosts ${workload.hostsFile} {\n        ttl 30\n    }\n}\n`;
  } else if (scenario === 'kcache' || scenario === 'kcache-miss') {
    // cache in front of kubernetes: every query a hit, or (capacity 1024 < 2,000 names asked in
    // turn) every query a miss refilled from the kubernetes plugin's kept answer.
    const m = writeClusterManifest({ dir, workload });
    const capacity = scenario === 'kcache' ? '' : ' {\n        success 1000\n    }';
    corefile =
      `cluster.local:53 {\n    cache 3600${capacity}\n` +
      `    kubernetes {\n        manifests ${m}\n        ttl 30\n    }\n}\n`;
  } else throw new Error(`unknown scenario ${scenario}`);
  const cf = join(dir, 'Corefile');
  writeFileSync(cf, corefile);
  const config = parseConfig({ file: cf, text: corefile, builtin: false }, 53);
  const http = new HttpServices();
  // Builds since the services split want the server's services (and its dispatcher takes their counters).
  let services;
  try {
    services = new (await import(dist('server/services.js'))).ServerServices();
  } catch {
    services = undefined;
  }
  const rt = await Runtime.create(config, { http, services, requestReload() {}, shuttingDown: () => false });
  await rt.startup();
  const dispatcher = services ? new Dispatcher(services.stats, services.queryNames) : new Dispatcher();
  const routers = rt.routers();
  for (const [k, r] of routers) dispatcher.routers.set(k, r);
  const key = listeners.listenerKey('', 53);
  if (upstream !== null) {
    const up = routers.get(listeners.listenerKey('', 54));
    upstream.on('message', (msg, rinfo) => {
      const client = {
        proto: 'udp',
        remoteAddress: rinfo.address,
        remotePort: rinfo.port,
        family: 1,
        localAddress: '127.0.0.1',
        localPort: 54,
      };
      // The upstream answers for cluster.local as hosts does; its block is on another key.
      dispatcher.handle(msg, client, up, (out) => out && upstream.send(out, rinfo.port, rinfo.address));
    });
  }

  const slotSize = 512;
  const sock = {
    port: 53,
    address: '127.0.0.1',
    in: new ArrayBuffer(batchSize * slotSize),
    meta: new ArrayBuffer(batchSize * META_INTS * 4),
    out: new ArrayBuffer(256 * 1024),
    outMeta: new ArrayBuffer(batchSize * OUT_INTS * 4),
    slots: batchSize,
    slotSize,
  };
  let onBatch = null;
  let late = 0;
  const addon = {
    start: (_s, cb) => (onBatch = cb),
    pause() {},
    close() {},
    sendTo: () => {
      late++;
      return 0;
    },
    ntop: () => '127.0.0.1',
  };
  const listener = new listeners.DnsListener({ host: '', port: 53, routerKey: key }, dispatcher);
  listener.startNative(addon, sock);
  const inBuf = Buffer.from(sock.in);
  const meta = new Int32Array(sock.meta);
  const outMeta = new Int32Array(sock.outMeta);
  const out = Buffer.from(sock.out);
  const queries = names.map((n, i) => encodeQuery(i & 0xffff, n));
  // A batch of the workload's names starting at `first`, as recvmmsg leaves it.
  const fill = (first) => {
    for (let i = 0; i < batchSize; i++) {
      const q = queries[(first + i) % queries.length];
      q.copy(inBuf, i * slotSize);
      const m = i * META_INTS;
      meta[m] = q.length;
      meta[m + 1] = 0;
      meta[m + 2] = 4;
      meta[m + 3] = 40000 + i;
      meta[m + 4] = 0;
      meta[m + 5] = 0x7f000001;
    }
  };
  // Warm-up: every name once (cache: through the upstream, answered later), and the JIT.
  for (let first = 0; first < queries.length; first += batchSize) {
    fill(first);
    onBatch(batchSize);
    // Cache misses are answered later: let them (the upstream's socket would drop a flood).
    if (upstream !== null) await new Promise((r) => setTimeout(r, 20));
  }
  await new Promise((r) => setTimeout(r, 300));
  for (let first = 0; first < queries.length * 4; first += batchSize) {
    fill(first);
    onBatch(batchSize);
  }
  // Every answer checked once: one per query, and NOERROR with an answer record.
  fill(0);
  const n0 = onBatch(batchSize);
  if (n0 !== batchSize) throw new Error(`${scenario}: ${n0} answers in the batch of ${batchSize} (late ${late})`);
  for (let k = 0; k < n0; k++) {
    const at = outMeta[k * OUT_INTS];
    if ((out[at + 3] & 0xf) !== 0 || out.readUInt16BE(at + 6) < 1)
      throw new Error(
        `${scenario}: answer ${k} is not an answer: ${out.subarray(at, at + outMeta[k * OUT_INTS + 1]).toString('hex')}`,
      );
  }
  // CPU time (not wall time: the machine may be shared), less that of the fill alone, which
  // stands for recvmmsg's copy (the kernel's, not ours).
  const cpu = () => {
    const u = process.cpuUsage();
    return u.user + u.system;
  };
  let next = 0;
  const run = (batches) => {
    let t0 = cpu();
    for (let b = 0; b < batches; b++) fill(((next + b) * batchSize) % queries.length);
    const fillUs = cpu() - t0;
    let answered = 0;
    t0 = cpu();
    for (let b = 0; b < batches; b++) {
      fill(((next + b) * batchSize) % queries.length);
      answered += onBatch(batchSize);
    }
    next += batches;
    return { ns: (cpu() - t0 - fillUs) * 1000, answered };
  };
  const close = async () => {
    await rt.shutdown();
    upstream?.close();
    rmSync(dir, { recursive: true, force: true });
  };
  return { run, close };
}

/**
 * Every build in this one process, measured in alternating slices of `slice` batches, so that
 * other work on the machine falls on all of them alike.
 */
async function child(roots, group, batches, batchSize, slice) {
  const builds = [];
  for (const scenario of group.split('+'))
    for (const root of roots) builds.push(await setup(root, scenario, batchSize));
  const ns = builds.map(() => 0);
  const answered = builds.map(() => 0);
  for (let done = 0; done < batches; done += slice) {
    for (let k = 0; k < builds.length; k++) {
      const r = builds[k].run(slice);
      ns[k] += r.ns;
      answered[k] += r.answered;
    }
  }
  for (const b of builds) await b.close();
  process.stdout.write(JSON.stringify(ns.map((n, k) => n / answered[k])) + '\n');
  process.exit(0);
}

if (opt.child) {
  const [scenario, ...roots] = opt.child.split('|');
  await child(roots, scenario, Number(opt.batches), Number(opt.batch), Number(opt.slice));
} else {
  const roots = (opt.root ?? [resolve(here, '..')]).map((r) => resolve(r));
  const scenarios = opt.scenario.split(',');
  const rounds = Number(opt.rounds);
  const results = new Map();
  for (let r = 0; r < rounds; r++) {
    for (const scenario of scenarios) {
      // Rotate the order of the builds each round so that none always goes first.
      const order = roots.map((_, k) => roots[(k + r) % roots.length]);
      const res = spawnSync(
        process.execPath,
        [
          fileURLToPath(import.meta.url),
          '--child',
          [scenario, ...order].join('|'),
          '--batches',
          opt.batches,
          '--batch',
          opt.batch,
          '--slice',
          opt.slice,
        ],
        { encoding: 'utf8', env: { ...process.env, CLUSTERDNS_LOG: 'error' } },
      );
      const line = res.stdout.trim().split('\n').pop();
      if (res.status !== 0 || !line) {
        process.stderr.write(`${scenario}: failed\n${res.stderr}\n`);
        process.exit(1);
      }
      const vs = JSON.parse(line);
      scenario.split('+').forEach((s, g) =>
        order.forEach((root, k) => {
          const key = `${s}|${root}`;
          const v = vs[g * order.length + k];
          if (!results.has(key)) results.set(key, []);
          results.get(key).push(v);
          process.stderr.write(`round ${r + 1} ${s} ${root}: ${v.toFixed(0)} ns/query\n`);
        }),
      );
    }
  }
  const median = (a) => [...a].sort((x, y) => x - y)[a.length >> 1];
  process.stdout.write(
    `| scenario | build | ns/query (median) | min–max over ${rounds} rounds |\n|---|---|---:|---|\n`,
  );
  for (const [key, vs] of [...results].sort()) {
    const [scenario, root] = key.split('|');
    process.stdout.write(
      `| ${scenario} | ${root} | ${median(vs).toFixed(0)} | ${Math.min(...vs).toFixed(0)}–${Math.max(...vs).toFixed(0)} |\n`,
    );
  }
}
