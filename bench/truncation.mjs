#!/usr/bin/env node
// Server CPU per query for answers too big for the client's buffer (truncated, TC set) against
// the same answers over TCP, through the real binary (-workers 1) with the default Kubernetes
// Corefile shape (kubernetes, cache, loadbalance):
//   - a headless Service with 2,000 endpoints, A, at EDNS 1232;
//   - a Service with 50 ports x 100 endpoints, SRV, at EDNS 1232.
// Each case runs for --seconds with --inflight queries outstanding; CPU is the server process
// tree's user+system time (/proc) over the run divided by the queries answered.
//
//   node bench/truncation.mjs [--seconds 3] [--inflight 4]

import dgram from 'node:dgram';
import net from 'node:net';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { cpuSnapshot } from './lib/cpu.mjs';
import { printHeaderHelp } from './lib/help.mjs';
import { killAllSync, startProcess, stopAll } from './lib/procs.mjs';
import { freePort } from './lib/servers.mjs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');

/** Manifests: `big` (headless, 2,000 endpoints) and `srv` (50 ports x 100 endpoints). */
export function bigServices() {
  const eps = (n, host) =>
    Array.from(
      { length: n },
      (_, i) =>
        `      - addresses: ["10.${100 + (i >> 16)}.${(i >> 8) & 255}.${i & 255}"]${host ? `\n        hostname: pod-${i}` : ''}`,
    ).join('\n');
  const ports = Array.from({ length: 50 }, (_, i) => `{ name: p${i}, port: ${8000 + i}, protocol: TCP }`).join(', ');
  return `apiVersion: v1
kind: Namespace
metadata: { name: default }
---
apiVersion: v1
kind: Service
metadata: { name: big, namespace: default }
spec: { clusterIP: None, ports: [{ name: http, port: 80, protocol: TCP }] }
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { name: big-1, namespace: default, labels: { kubernetes.io/service-name: big } }
addressType: IPv4
ports: [{ name: http, port: 80, protocol: TCP }]
endpoints:
${eps(2000, true)}
---
apiVersion: v1
kind: Service
metadata: { name: srv, namespace: default }
spec: { clusterIP: None, ports: [${ports}] }
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { name: srv-1, namespace: default, labels: { kubernetes.io/service-name: srv } }
addressType: IPv4
ports: [${ports}]
endpoints:
${eps(100, false)}
`;
}

function query(name, type, edns) {
  const labels = name.split('.').filter(Boolean);
  const q = Buffer.concat([
    Buffer.from([0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, edns ? 1 : 0]),
    ...labels.map((l) => Buffer.concat([Buffer.from([l.length]), Buffer.from(l)])),
    Buffer.from([0, type >> 8, type & 255, 0, 1]),
  ]);
  if (!edns) return q;
  const opt = Buffer.from([0, 0, 41, edns >> 8, edns & 255, 0, 0, 0, 0, 0, 0]);
  return Buffer.concat([q, opt]);
}

async function runUdp(port, q, seconds, inflight) {
  const s = dgram.createSocket('udp4');
  await new Promise((r) => s.connect(port, '127.0.0.1', r));
  let answered = 0;
  let tc = 0;
  let size = 0;
  let id = 0;
  const end = Date.now() + seconds * 1000;
  return new Promise((done, fail) => {
    s.on('error', (e) => {
      s.close();
      fail(e);
    });
    const send = () => {
      if (Date.now() >= end) return;
      q.writeUInt16BE(++id & 0xffff, 0);
      s.send(q);
    };
    s.on('message', (m) => {
      answered++;
      if (m[2] & 2) tc++;
      size = m.length;
      if (Date.now() >= end) {
        if (--inflight === 0) {
          s.close();
          done({ answered, tc, size });
        }
        return;
      }
      send();
    });
    for (let i = 0; i < inflight; i++) send();
  });
}

async function runTcp(port, q, seconds, inflight) {
  const s = net.connect(port, '127.0.0.1');
  await new Promise((r) => s.once('connect', r));
  let answered = 0;
  let tc = 0;
  let size = 0;
  let pending = Buffer.alloc(0);
  const end = Date.now() + seconds * 1000;
  const frame = Buffer.alloc(q.length + 2);
  frame.writeUInt16BE(q.length, 0);
  q.copy(frame, 2);
  return new Promise((done) => {
    let open = inflight;
    s.on('data', (d) => {
      pending = Buffer.concat([pending, d]);
      while (pending.length >= 2 && pending.length >= 2 + pending.readUInt16BE(0)) {
        const len = pending.readUInt16BE(0);
        const m = pending.subarray(2, 2 + len);
        pending = pending.subarray(2 + len);
        answered++;
        if (m[2] & 2) tc++;
        size = len;
        if (Date.now() < end) s.write(frame);
        else if (--open === 0) {
          s.destroy();
          done({ answered, tc, size });
        }
      }
    });
    for (let i = 0; i < inflight; i++) s.write(frame);
  });
}

async function main() {
  const { values: o } = parseArgs({
    options: {
      seconds: { type: 'string', default: '3' },
      inflight: { type: 'string', default: '4' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (o.help) {
    printHeaderHelp(import.meta.url);
    process.exit(0);
  }
  const dir = mkdtempSync(join(tmpdir(), 'clusterdns-trunc-'));
  const port = await freePort();
  writeFileSync(join(dir, 'cluster.yaml'), bigServices());
  writeFileSync(
    join(dir, 'Corefile'),
    `cluster.local:${port} {\n    bind 127.0.0.1\n    kubernetes cluster.local {\n        manifests ${join(dir, 'cluster.yaml')}\n    }\n    cache 30\n    loadbalance\n}\n`,
  );
  const p = startProcess(
    'clusterdns',
    process.execPath,
    [join(root, 'bin/clusterdns'), '-conf', join(dir, 'Corefile'), '-workers', '1', '-quiet'],
    { logFile: join(dir, 'log'), cwd: dir },
  );
  try {
    const probe = query('big.default.svc.cluster.local', 1, 0);
    for (let i = 0; ; i++) {
      const ok = await runUdp(port, probe, 0.05, 1).catch(() => null);
      if (ok && ok.answered > 0) break;
      if (i > 200) throw new Error('server did not answer');
      await new Promise((r) => setTimeout(r, 100));
    }
    const seconds = Number(o.seconds);
    const inflight = Number(o.inflight);
    const cases = [
      ['headless 2,000 endpoints A', 'big.default.svc.cluster.local', 1],
      ['50 ports x 100 endpoints SRV', 'srv.default.svc.cluster.local', 33],
    ];
    const rows = [];
    for (const [label, name, type] of cases) {
      for (const proto of ['udp', 'tcp']) {
        const q = query(name, type, 1232);
        await (proto === 'udp' ? runUdp : runTcp)(port, q, 0.3, inflight);
        const a = cpuSnapshot(p.pid);
        const r = await (proto === 'udp' ? runUdp : runTcp)(port, q, seconds, inflight);
        const b = cpuSnapshot(p.pid);
        const ms = ((b.server - a.server) * 10) / r.answered;
        rows.push(
          `| ${label} | ${proto === 'udp' ? 'UDP, EDNS 1232' : 'TCP'} | ${r.size} | ${r.tc === r.answered ? 'yes' : r.tc === 0 ? 'no' : 'some'} | ${r.answered} | ${ms.toFixed(3)} |`,
        );
      }
    }
    process.stdout.write(
      '| answer | transport | reply bytes | TC | queries | server CPU ms/query |\n|---|---|---:|---|---:|---:|\n' +
        rows.join('\n') +
        '\n',
    );
  } finally {
    await stopAll();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  // A crash must not leave a server behind.
  process.on('exit', () => killAllSync());
  await main();
}
