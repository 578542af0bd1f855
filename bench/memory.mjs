#!/usr/bin/env node
// Memory and start-up of the kubernetes plugin against the real list/watch API (issues 3, 11).
//
//   node bench/memory.mjs [--sizes 1000,10000,100000] [--workers 1,2,auto] [--ready-services 10000]
//                         [--settle 5] [--queries 20000] [--namespaces 10] [--write-json FILE]
//                         [--tls] [--node-flags "--max-semi-space-size=1"]
//
// For each size N (objects = Services + Pods, the quantity of CoreDNS's published sizing
// rule "(Pods + Services) / 1000 + 54 MB"): N/2 Services, each with one EndpointSlice holding
// one ready endpoint (a Pod of the set), and N/2 Running Pods, spread over --namespaces
// namespaces. The objects are shaped like a real cluster's (labels, owner references,
// container specs, conditions: 1-2 KB of JSON each) so that list decoding costs what it does
// in a cluster. They live in the test API server (test/helpers/kubeapi.ts, compiled to
// dist/test/helpers/kubeapi.js), which speaks the real list/watch protocol (paged LIST with
// continue tokens, then WATCH from the list's resourceVersion).
//
// clusterdns is started the way a user starts it (bin/clusterdns -conf Corefile -workers W)
// with
//     cluster.local:PORT { bind 127.0.0.1; ready 127.0.0.1:RPORT
//                          kubernetes cluster.local { endpoint http://127.0.0.1:API; pods verified } }
// and we measure: time from spawn to /ready answering 200; time from spawn to the first dig
// answer that is right for both the Service and the Pod listed last; VmRSS of the process tree
// after a settle period (--settle seconds after ready); the peak (VmHWM) over the tree; then
// RSS again after --queries queries (A for Services and Pods, SRV for Services) and a short
// settle. PSS (smaps_rollup, shared pages divided among the processes that map them) is summed
// over the process tree, and `× 1 worker` compares it with the 1-worker run of the same case;
// `per process` gives each process's PSS (the primary first). `auto` runs without -workers
// (the server's default).
//
// --tls: the API over HTTPS with a client certificate (as in a cluster, where the API is
// always TLS); the default is plain HTTP. --node-flags: run `node FLAGS bin/clusterdns`
// instead of bin/clusterdns with the flags of its #! line.
//
// --ready-services S adds one run with S Services (each with a one-endpoint slice) and no
// Pods: the "time to ready with S Services" figure.
// Sizes of 0 measure the server with the kubernetes plugin on an empty cluster.
//
// --serve-api N (or SERVICES,PODS) only starts the test API server with those objects, prints its URL
// and waits (for measuring a server started by hand, e.g. under --inspect).

import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import dgram from 'node:dgram';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { dig } from './lib/check.mjs';
import { printHeaderHelp } from './lib/help.mjs';
import { descendants, killAllSync, startProcess, statusKiB, stopAll, stopProcess } from './lib/procs.mjs';
import { freePort } from './lib/servers.mjs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');

const { values: args } = parseArgs({
  options: {
    sizes: { type: 'string', default: '1000,10000,100000' },
    workers: { type: 'string', default: '1,2' },
    'ready-services': { type: 'string', default: '10000' },
    settle: { type: 'string', default: '5' },
    queries: { type: 'string', default: '20000' },
    namespaces: { type: 'string', default: '10' },
    'write-json': { type: 'string' },
    keep: { type: 'boolean', default: false },
    'serve-api': { type: 'string' },
    'node-flags': { type: 'string' },
    tls: { type: 'boolean', default: false },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (args.help) {
  printHeaderHelp(import.meta.url);
  process.exit(0);
}

const intList = (s) => (s === '' ? [] : s.split(',').map((x) => Number(x.trim())));
const sizes = intList(args.sizes);
// `auto` (0 here) runs the server without -workers: its default.
const workerCounts = args.workers.split(',').map((x) => (x.trim() === 'auto' ? 0 : Number(x.trim())));
const readyServices = Number(args['ready-services']);
const settleMs = Number(args.settle) * 1000;
const queryCount = Number(args.queries);
const namespaceCount = Math.max(1, Number(args.namespaces));
for (const v of [...sizes, ...workerCounts, readyServices, settleMs, queryCount]) {
  if (!Number.isInteger(v) || v < 0) throw new Error(`bad numeric option: ${v}`);
}

const kubeapiUrl = pathToFileURL(join(root, 'dist/test/helpers/kubeapi.js')).href;
const { KubeApiServer } = await import(kubeapiUrl).catch(() => {
  process.stderr.write('bench/memory.mjs: dist/ is missing; run `npm run build` first\n');
  process.exit(1);
});

process.on('exit', killAllSync);
process.on('SIGINT', () => {
  killAllSync();
  process.exit(130);
});

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const MiB = 1024;

// ------------------------------------------------------------------ the cluster's objects

/** The nth address after base (a.b.0.0), for n below 2^24. */
function nthIp(a, b, n) {
  const x = (b << 16) + n;
  return `${a}.${(x >> 16) & 255}.${(x >> 8) & 255}.${x & 255}`;
}
const serviceIp = (i) => nthIp(10, 96, i);
const podIp = (j) => nthIp(10, 128, j);
const nsOf = (i) => `team-${i % namespaceCount}`;
const hex = (n, w) => n.toString(16).padStart(w, '0');
const uid = (kind, i) => `${hex(kind, 8)}-${hex(i >>> 16, 4)}-4${hex(i & 0xfff, 3)}-8${hex(kind, 3)}-${hex(i, 12)}`;
const STAMP = '2026-11-30T08:00:00Z';

function serviceObject(i) {
  const name = `svc-${i}`;
  return {
    kind: 'Service',
    apiVersion: 'v1',
    metadata: {
      name,
      namespace: nsOf(i),
      labels: { app: name, 'app.kubernetes.io/part-of': 'bench' },
      annotations: { 'meta.helm.sh/release-name': `release-${i % 97}` },
    },
    spec: {
      type: 'ClusterIP',
      clusterIP: serviceIp(i),
      clusterIPs: [serviceIp(i)],
      ipFamilies: ['IPv4'],
      ipFamilyPolicy: 'SingleStack',
      internalTrafficPolicy: 'Cluster',
      sessionAffinity: 'None',
      selector: { app: name },
      ports: [{ name: 'http', port: 80, protocol: 'TCP', targetPort: 8080 }],
    },
    status: { loadBalancer: {} },
  };
}

function sliceObject(i, podCount) {
  const name = `svc-${i}`;
  const j = podCount > 0 ? i % podCount : i;
  return {
    kind: 'EndpointSlice',
    apiVersion: 'discovery.k8s.io/v1',
    metadata: {
      name: `${name}-${hex(i, 5)}`,
      namespace: nsOf(i),
      generateName: `${name}-`,
      labels: {
        'kubernetes.io/service-name': name,
        'endpointslice.kubernetes.io/managed-by': 'endpointslice-controller.k8s.io',
        app: name,
      },
      annotations: { 'endpoints.kubernetes.io/last-change-trigger-time': STAMP },
      ownerReferences: [
        { apiVersion: 'v1', kind: 'Service', name, uid: uid(1, i), controller: true, blockOwnerDeletion: true },
      ],
    },
    addressType: 'IPv4',
    endpoints: [
      {
        addresses: [podIp(j)],
        conditions: { ready: true, serving: true, terminating: false },
        nodeName: `node-${j % 50}`,
        targetRef: { kind: 'Pod', namespace: nsOf(i), name: `pod-${j}`, uid: uid(2, j) },
      },
    ],
    ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
  };
}

function podObject(j) {
  const app = `app-${j % 1000}`;
  return {
    kind: 'Pod',
    apiVersion: 'v1',
    metadata: {
      name: `pod-${j}`,
      namespace: nsOf(j),
      generateName: `${app}-7d4b9c-`,
      labels: { app, 'pod-template-hash': '7d4b9c' },
      ownerReferences: [
        {
          apiVersion: 'apps/v1',
          kind: 'ReplicaSet',
          name: `${app}-7d4b9c`,
          uid: uid(3, j % 1000),
          controller: true,
          blockOwnerDeletion: true,
        },
      ],
    },
    spec: {
      containers: [
        {
          name: 'main',
          image: `registry.example/${app}:1.4.2`,
          ports: [{ containerPort: 8080, protocol: 'TCP' }],
          resources: { requests: { cpu: '100m', memory: '128Mi' }, limits: { memory: '256Mi' } },
          terminationMessagePath: '/dev/termination-log',
          terminationMessagePolicy: 'File',
          imagePullPolicy: 'IfNotPresent',
        },
      ],
      restartPolicy: 'Always',
      terminationGracePeriodSeconds: 30,
      dnsPolicy: 'ClusterFirst',
      serviceAccountName: 'default',
      nodeName: `node-${j % 50}`,
      schedulerName: 'default-scheduler',
      enableServiceLinks: true,
    },
    status: {
      phase: 'Running',
      conditions: ['Initialized', 'Ready', 'ContainersReady', 'PodScheduled'].map((type) => ({
        type,
        status: 'True',
        lastTransitionTime: STAMP,
      })),
      hostIP: nthIp(192, 168, j % 50),
      podIP: podIp(j),
      podIPs: [{ ip: podIp(j) }],
      startTime: STAMP,
      qosClass: 'Burstable',
      containerStatuses: [
        {
          name: 'main',
          ready: true,
          started: true,
          restartCount: 0,
          image: `registry.example/${app}:1.4.2`,
          imageID: '',
          containerID: `containerd://${hex(j, 16)}`,
          state: { running: { startedAt: STAMP } },
        },
      ],
    },
  };
}

/** A test API server holding `services` Services (+ one slice each) and `pods` Pods. */
async function cluster(services, pods) {
  const api = await KubeApiServer.create({
    eventWindow: 1000,
    ...(args.tls ? { tls: true, clientCertAuth: true } : {}),
  });
  for (let n = 0; n < namespaceCount; n++)
    api.apply({ kind: 'Namespace', apiVersion: 'v1', metadata: { name: `team-${n}` } });
  for (let i = 0; i < services; i++) {
    api.apply(serviceObject(i));
    api.apply(sliceObject(i, pods));
  }
  for (let j = 0; j < pods; j++) api.apply(podObject(j));
  return api;
}

// ------------------------------------------------------------------ measuring the process

function pssKiB(pid) {
  try {
    const m = /^Pss:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/smaps_rollup`, 'latin1'));
    return m ? Number(m[1]) : 0;
  } catch {
    return 0;
  }
}

/**
 * Over pid and its descendants, in KiB: RSS, peak RSS (VmHWM) and PSS summed; the private
 * (anonymous) part of RSS summed; and `once`: that plus the file-backed pages of the
 * largest process only. Cluster workers are separate executions of node, so what they
 * share is the node binary's pages (RssFile): VmRSS summed counts them once per process.
 */
function treeMemory(pid) {
  const pids = [pid, ...descendants(pid)];
  let rss = 0;
  let hwm = 0;
  let pss = 0;
  let anon = 0;
  let file = 0;
  const pssEach = [];
  for (const p of pids) {
    rss += statusKiB(p, 'VmRSS');
    hwm += statusKiB(p, 'VmHWM');
    const own = pssKiB(p);
    pss += own;
    pssEach.push(own);
    anon += statusKiB(p, 'RssAnon') + statusKiB(p, 'RssShmem');
    file = Math.max(file, statusKiB(p, 'RssFile'));
  }
  return { rss, hwm, pss, pssEach, anon, once: anon + file, processes: pids.length };
}

function httpStatus(port, path) {
  return new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port, path, timeout: 1000, agent: false }, (res) => {
      res.resume();
      resolve(res.statusCode);
    });
    req.on('error', () => resolve(0));
    req.on('timeout', () => {
      req.destroy();
      resolve(0);
    });
  });
}

// ------------------------------------------------------------------ a small pipelined DNS client

function encodeQuery(id, name, qtype) {
  const labels = name.split('.').filter(Boolean);
  const len = 12 + labels.reduce((n, l) => n + 1 + l.length, 1) + 4;
  const b = Buffer.alloc(len);
  b.writeUInt16BE(id, 0);
  b.writeUInt16BE(0x0100, 2); // RD
  b.writeUInt16BE(1, 4);
  let o = 12;
  for (const l of labels) {
    b[o++] = l.length;
    o += b.write(l, o, 'latin1');
  }
  b[o++] = 0;
  b.writeUInt16BE(qtype, o);
  b.writeUInt16BE(1, o + 2);
  return b;
}

/** Sends every [name, qtype] with up to `window` in flight; counts NOERROR answers with records. */
async function runQueries(port, list, window = 64) {
  const sock = dgram.createSocket('udp4');
  await new Promise((r) => sock.bind(0, '127.0.0.1', r));
  const pending = new Map();
  let next = 0;
  let answered = 0;
  let good = 0;
  let lost = 0;
  let idSeq = 0;
  await new Promise((done) => {
    const send = () => {
      while (pending.size < window && next < list.length) {
        const [name, qtype] = list[next++];
        const id = idSeq++ & 0xffff;
        const timer = setTimeout(() => {
          pending.delete(id);
          lost++;
          send();
          if (pending.size === 0 && next >= list.length) done();
        }, 2000);
        pending.set(id, timer);
        sock.send(encodeQuery(id, name, qtype), port, '127.0.0.1');
      }
    };
    sock.on('message', (m) => {
      const id = m.readUInt16BE(0);
      const t = pending.get(id);
      if (t === undefined) return;
      clearTimeout(t);
      pending.delete(id);
      answered++;
      if ((m[3] & 0x0f) === 0 && m.readUInt16BE(6) > 0) good++;
      if (pending.size === 0 && next >= list.length) done();
      else send();
    });
    send();
    if (list.length === 0) done();
  });
  sock.close();
  return { sent: list.length, answered, good, lost };
}

// ------------------------------------------------------------------ one run

const formulaMiB = (objects) => objects / 1000 + 54;

async function runOne({ label, services, pods, workers }) {
  const t0 = performance.now();
  const api = await cluster(services, pods);
  const populateMs = performance.now() - t0;
  const dir = mkdtempSync(join(tmpdir(), 'clusterdns-memory-'));
  const dnsPort = await freePort();
  const readyPort = await freePort(new Set([dnsPort]));
  const corefile = join(dir, 'Corefile');
  writeFileSync(
    corefile,
    `cluster.local:${dnsPort} {\n    bind 127.0.0.1\n    ready 127.0.0.1:${readyPort}\n    kubernetes cluster.local {\n        endpoint ${api.url}\n` +
      (api.pki ? `        tls ${api.pki.clientCertFile} ${api.pki.clientKeyFile} ${api.pki.caFile}\n` : '') +
      `        pods verified\n    }\n}\n`,
  );
  const logFile = join(dir, 'clusterdns.log');
  // The last object of each list (the test API server lists by `ns/name`): an answer for it means the list is in.
  const byKey = (n, name) =>
    Array.from({ length: n }, (_, i) => [`${nsOf(i)}/${name(i)}`, i]).sort((a, b) => a[0].localeCompare(b[0]));
  const lastSvc = services > 0 ? byKey(services, (i) => `svc-${i}`).at(-1)[1] : -1;
  const lastPod = pods > 0 ? byKey(pods, (j) => `pod-${j}`).at(-1)[1] : -1;
  const svcName = (i) => `svc-${i}.${nsOf(i)}.svc.cluster.local`;
  const podName = (j) => `${podIp(j).replaceAll('.', '-')}.${nsOf(j)}.pod.cluster.local`;

  const cdnsArgs = ['-conf', corefile, ...(workers > 0 ? ['-workers', String(workers)] : []), '-quiet'];
  // As a user starts it (bin/clusterdns and the flags on its #! line), or with other Node flags.
  const proc =
    args['node-flags'] === undefined
      ? startProcess('clusterdns', join(root, 'bin/clusterdns'), cdnsArgs, { logFile, cwd: dir })
      : startProcess(
          'clusterdns',
          process.execPath,
          [...args['node-flags'].split(' ').filter(Boolean), join(root, 'bin/clusterdns'), ...cdnsArgs],
          { logFile, cwd: dir },
        );
  const spawned = performance.now();
  const alive = () =>
    proc.pid !== undefined &&
    (() => {
      try {
        process.kill(proc.pid, 0);
        return true;
      } catch {
        return false;
      }
    })();
  const deadline = spawned + 600_000;
  let readyMs = NaN;
  let answerMs = NaN;
  const readyLoop = (async () => {
    while (performance.now() < deadline && alive()) {
      if ((await httpStatus(readyPort, '/ready')) === 200) return (readyMs = performance.now() - spawned);
      await sleep(10);
    }
    throw new Error('never ready');
  })();
  const answerLoop = (async () => {
    while (performance.now() < deadline && alive()) {
      // With no objects: the zone's dns-version TXT record.
      const okSvc =
        lastSvc < 0
          ? lastPod >= 0 ||
            (await dig(dnsPort, 'dns-version.cluster.local', 'TXT')).answers.some((a) => a.type === 'TXT')
          : (await dig(dnsPort, svcName(lastSvc))).answers.some((a) => a.type === 'A' && a.data === serviceIp(lastSvc));
      const okPod =
        okSvc &&
        (lastPod < 0 ||
          (await dig(dnsPort, podName(lastPod))).answers.some((a) => a.type === 'A' && a.data === podIp(lastPod)));
      if (okSvc && okPod) return (answerMs = performance.now() - spawned);
      await sleep(50);
    }
    throw new Error('never answered right');
  })();
  try {
    await Promise.all([readyLoop, answerLoop]);
    await sleep(settleMs);
    const settled = treeMemory(proc.pid);
    // Queries: A for every Service and Pod, SRV for Services, up to queryCount in all.
    const list = [];
    for (let k = 0; list.length < queryCount && k < Math.max(services, pods); k++) {
      if (k < services) list.push([svcName(k), 1]);
      if (k < pods && list.length < queryCount) list.push([podName(k), 1]);
      if (k < services && list.length < queryCount) list.push([`_http._tcp.${svcName(k)}`, 33]);
    }
    const q = await runQueries(dnsPort, list);
    await sleep(Math.min(settleMs, 2000));
    const queried = treeMemory(proc.pid);
    const objects = services + pods;
    return {
      label,
      workers,
      objects,
      services,
      endpointSlices: services,
      endpoints: services,
      pods,
      namespaces: namespaceCount,
      populateMs: Math.round(populateMs),
      readyMs: Math.round(readyMs),
      firstAnswerMs: Math.round(answerMs),
      settleMs,
      rssSettledMiB: +(settled.rss / MiB).toFixed(1),
      rssPeakMiB: +(Math.max(settled.hwm, queried.hwm) / MiB).toFixed(1),
      pssSettledMiB: +(settled.pss / MiB).toFixed(1),
      rssAfterQueriesMiB: +(queried.rss / MiB).toFixed(1),
      pssAfterQueriesMiB: +(queried.pss / MiB).toFixed(1),
      pssEachAfterQueriesMiB: queried.pssEach.map((k) => +(k / MiB).toFixed(1)),
      anonSettledMiB: +(settled.anon / MiB).toFixed(1),
      anonAfterQueriesMiB: +(queried.anon / MiB).toFixed(1),
      rssBinaryOnceAfterQueriesMiB: +(queried.once / MiB).toFixed(1),
      processes: settled.processes,
      workersRunning: Math.max(1, settled.processes - 1),
      queries: q,
      formulaMiB: formulaMiB(objects),
      below: queried.rss / MiB < formulaMiB(objects) && settled.rss / MiB < formulaMiB(objects),
    };
  } catch (e) {
    process.stderr.write(
      `--- ${label}: ${e.message}; clusterdns log:\n${readFileSync(logFile, 'utf8').slice(-4000)}\n`,
    );
    throw e;
  } finally {
    await stopProcess(proc);
    await api.close();
    if (!args.keep) rmSync(dir, { recursive: true, force: true });
  }
}

// ------------------------------------------------------------------ the runs

if (args['serve-api'] !== undefined) {
  // N (N/2 Services with slices, N/2 Pods) or SERVICES,PODS.
  const [a, b] = args['serve-api'].split(',').map(Number);
  const api = b === undefined ? await cluster(Math.floor(a / 2), a - Math.floor(a / 2)) : await cluster(a, b);
  process.stdout.write(`${api.url}\n`);
  await new Promise(() => {});
}

const cases = [];
for (const n of sizes) {
  for (const w of workerCounts)
    cases.push({ label: `${n} objects`, services: Math.floor(n / 2), pods: n - Math.floor(n / 2), workers: w });
}
if (readyServices > 0)
  for (const w of workerCounts)
    cases.push({ label: `${readyServices} Services`, services: readyServices, pods: 0, workers: w });

process.stdout.write(
  `clusterdns memory and start-up, node ${process.version}; objects = Services + Pods; each Service has one EndpointSlice with one ready endpoint; ` +
    `${namespaceCount} namespaces; Corefile: kubernetes cluster.local { endpoint <test API server>${args.tls ? ' (HTTPS, client certificate)' : ' (HTTP)'}; pods verified }; settle ${settleMs / 1000} s; ` +
    `RSS = VmRSS summed over the process tree; formula = CoreDNS's (Pods + Services) / 1000 + 54 MB.\n\n`,
);
const header = [
  'case',
  'workers',
  'Services',
  'slices',
  'Pods',
  'ready s',
  'answer s',
  'RSS settled',
  'RSS queried',
  'peak',
  'anon',
  'bin once',
  'PSS queried',
  '× 1 worker',
  'formula',
  'below',
];
const rows = [];
const results = [];
const fmtRow = (r) => r.map((c, i) => String(c).padStart(i === 0 ? 18 : Math.max(7, header[i].length))).join(' ');
process.stdout.write(fmtRow(header) + '\n');
try {
  for (const c of cases) {
    const r = await runOne(c);
    results.push(r);
    const row = [
      r.label,
      r.workers || `auto (${r.workersRunning})`,
      r.services,
      r.endpointSlices,
      r.pods,
      (r.readyMs / 1000).toFixed(2),
      (r.firstAnswerMs / 1000).toFixed(2),
      r.rssSettledMiB.toFixed(1),
      r.rssAfterQueriesMiB.toFixed(1),
      r.rssPeakMiB.toFixed(1),
      r.anonAfterQueriesMiB.toFixed(1),
      r.rssBinaryOnceAfterQueriesMiB.toFixed(1),
      r.pssAfterQueriesMiB.toFixed(1),
      (() => {
        const one = results.find((x) => x.label === r.label && x.workers === 1);
        return one ? (r.pssAfterQueriesMiB / one.pssAfterQueriesMiB).toFixed(2) : '';
      })(),
      r.formulaMiB.toFixed(1),
      r.below ? 'yes' : 'no',
    ];
    rows.push(row);
    process.stdout.write(
      fmtRow(row) +
        `   (${r.queries.good}/${r.queries.sent} queries answered with records; PSS per process ${r.pssEachAfterQueriesMiB.join(' + ')})\n`,
    );
  }
} finally {
  await stopAll();
}
process.stdout.write(
  '\nMiB throughout. ready = spawn to /ready 200; answer = spawn to dig answering right for the last-listed Service and Pod; ' +
    'RSS queried = after the queries and a short settle; peak = VmHWM summed over processes; anon = RssAnon (private memory) after the queries; ' +
    'bin once = anon plus the file-backed pages (the node binary, shared by the processes) counted once; below = RSS settled and RSS queried both under the formula.\n',
);
if (args['write-json']) {
  writeFileSync(
    args['write-json'],
    JSON.stringify(
      { node: process.version, date: new Date().toISOString(), namespaces: namespaceCount, results },
      null,
      2,
    ) + '\n',
  );
  process.stdout.write(`wrote ${args['write-json']}\n`);
}
