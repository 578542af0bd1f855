#!/usr/bin/env node
// searchfan micro-benchmark (not a test): `npm run -s build && node bench/searchfan.mjs`
//
// 1. Latency of a bare name that only the third search domain answers, with an upstream
//    that adds 5 ms to every query: searchfan's fan-out (every candidate at once, one round
//    trip) against a resolver walking the search list one name after another.
// 2. QPS of cached answers: dnsperf against searchfan with 100 names already in its cache,
//    interleaved with the hosts plugin answering the same names from the same process.
//
//   node bench/searchfan.mjs [--samples 300] [--delay-ms 5] [--seconds 5] [--rounds 3] [--workers 1]

import { spawn } from 'node:child_process';
import dgram from 'node:dgram';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { decodeMessage, encodeMessage } from '../dist/src/dns/message.js';
import { runDnsperf } from './lib/dnsperf.mjs';
import { freePort } from './lib/servers.mjs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const { values: flags } = parseArgs({
  options: {
    samples: { type: 'string', default: '300' },
    'delay-ms': { type: 'string', default: '5' },
    seconds: { type: 'string', default: '5' },
    rounds: { type: 'string', default: '3' },
    workers: { type: 'string', default: '1' },
  },
});
const SAMPLES = Number(flags.samples);
const DELAY_MS = Number(flags['delay-ms']);
const SEARCH = ['a.test', 'b.test', 'c.test'];

// ------------------------------------------------------------------ the slow upstream

/** Answers `*.c.test.` A 10.0.0.1 (TTL 3600), NXDOMAIN with an SOA for anything else, each after DELAY_MS. */
async function startUpstream() {
  const sock = dgram.createSocket('udp4');
  let queries = 0;
  sock.on('message', (raw, rinfo) => {
    queries++;
    let m;
    try {
      m = decodeMessage(raw);
    } catch {
      return;
    }
    const q = m.questions[0];
    const name = q.name.toLowerCase();
    const reply = { ...m, qr: true, ra: true, answers: [], authorities: [], additionals: [], edns: null };
    if (name.endsWith('.c.test.') && q.type === 1) {
      reply.answers.push({ name: q.name, type: 1, class: 1, ttl: 3600, data: { address: '10.0.0.1' } });
    } else if (!name.endsWith('.c.test.')) {
      reply.rcode = 3;
      reply.authorities.push({
        name: 'test.',
        type: 6,
        class: 1,
        ttl: 5,
        data: { mname: 'ns.test.', rname: 'h.test.', serial: 1, refresh: 1, retry: 1, expire: 1, minimum: 5 },
      });
    }
    const bytes = encodeMessage(reply);
    setTimeout(() => sock.send(bytes, rinfo.port, rinfo.address), DELAY_MS);
  });
  await new Promise((r) => sock.bind(0, '127.0.0.1', r));
  return { port: sock.address().port, sock, count: () => queries };
}

// ------------------------------------------------------------------ a tiny stub client

const client = dgram.createSocket('udp4');
await new Promise((r) => client.bind(0, '127.0.0.1', r));
const waiting = new Map();
client.on('message', (msg) => {
  const id = msg.readUInt16BE(0);
  const w = waiting.get(id);
  if (w) {
    waiting.delete(id);
    w(msg);
  }
});
let nextId = 1;

function ask(port, name) {
  const id = nextId++ & 0xffff;
  const wire = encodeMessage({
    id,
    qr: false,
    opcode: 0,
    aa: false,
    tc: false,
    rd: true,
    ra: false,
    ad: false,
    cd: false,
    rcode: 0,
    questions: [{ name, type: 1, class: 1 }],
    answers: [],
    authorities: [],
    additionals: [],
    edns: null,
  });
  return new Promise((ok, fail) => {
    const t = setTimeout(() => {
      waiting.delete(id);
      fail(new Error(`timeout asking ${name}`));
    }, 3000);
    waiting.set(id, (msg) => {
      clearTimeout(t);
      ok({ rcode: msg[3] & 0xf, an: msg.readUInt16BE(6) });
    });
    client.send(wire, port, '127.0.0.1');
  });
}

/** What a stub resolver with this search list and ndots 5 does: one name at a time until one exists. */
async function walk(port, bare) {
  for (const s of SEARCH) {
    const r = await ask(port, `${bare}.${s}.`);
    if (r.rcode !== 3) return r;
  }
  return ask(port, `${bare}.`);
}

function stats(ms) {
  const s = [...ms].sort((a, b) => a - b);
  const pick = (p) => s[Math.min(s.length - 1, Math.floor(p * s.length))];
  return { median: pick(0.5), p90: pick(0.9), p99: pick(0.99), mean: s.reduce((a, b) => a + b, 0) / s.length };
}

const fmt = (x) => x.toFixed(2).padStart(7);

// ------------------------------------------------------------------ run

const up = await startUpstream();
const dir = mkdtempSync(join(tmpdir(), 'clusterdns-bench-searchfan-'));
const port = await freePort();
const hostsPort = await freePort(new Set([port]));
const tag = Date.now().toString(36);
const cachedNames = Array.from({ length: 100 }, (_, i) => `cached-${tag}-${i}`);
// The same 100 names from the hosts plugin, in the same process: the peer for cached QPS.
writeFileSync(join(dir, 'hosts'), cachedNames.map((n) => `10.0.0.1 ${n}`).join('\n') + '\n');
writeFileSync(
  join(dir, 'Corefile'),
  `.:${port} {\n    bind 127.0.0.1\n    searchfan 127.0.0.1:${up.port} {\n        search ${SEARCH.join(' ')}\n        ndots 5\n    }\n}\n` +
    `.:${hostsPort} {\n    bind 127.0.0.1\n    hosts ${join(dir, 'hosts')}\n}\n`,
);
const server = spawn(
  process.execPath,
  [join(root, 'bin/clusterdns'), '-conf', join(dir, 'Corefile'), '-workers', flags.workers, '-quiet'],
  { stdio: 'inherit' },
);
try {
  for (let i = 0; ; i++) {
    try {
      await ask(port, 'warmup.');
      break;
    } catch {
      if (i > 50) throw new Error('clusterdns did not start');
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  const fan = [];
  const seq = [];
  for (let i = 0; i < SAMPLES; i++) {
    const name = `host-${tag}-${i}`;
    let t = performance.now();
    const a = await ask(port, `${name}.`);
    fan.push(performance.now() - t);
    if (a.an !== 1) throw new Error(`searchfan: ${name} rcode ${a.rcode}`);
    t = performance.now();
    const b = await walk(up.port, `${name}-walk`);
    seq.push(performance.now() - t);
    if (b.an !== 1) throw new Error(`walk: ${name} rcode ${b.rcode}`);
  }
  const f = stats(fan);
  const s = stats(seq);
  console.log(
    `\nsearchfan benchmark — ${cpus()[0]?.model ?? 'unknown CPU'}, ${cpus().length} cores, node ${process.version}`,
  );
  console.log(
    `upstream delay ${DELAY_MS} ms per query; search ${SEARCH.join(' ')}; ndots 5; name answered only by the 3rd domain; ${SAMPLES} cache misses each\n`,
  );
  console.log('                                   median     p90     p99    mean   (ms)');
  console.log(`fan-out (searchfan, 1 round trip) ${fmt(f.median)} ${fmt(f.p90)} ${fmt(f.p99)} ${fmt(f.mean)}`);
  console.log(`walk one by one (stub resolver)   ${fmt(s.median)} ${fmt(s.p90)} ${fmt(s.p99)} ${fmt(s.mean)}`);
  console.log(`speed-up (median)                 ${(s.median / f.median).toFixed(2)} ×`);

  // Cached answers: 100 names resolved once, then dnsperf, interleaved with the hosts plugin.
  for (const name of cachedNames) await ask(port, `${name}.`);
  const qfile = join(dir, 'queries.txt');
  writeFileSync(qfile, cachedNames.map((n) => `${n} A`).join('\n') + '\n');
  const before = up.count();
  const rounds = { searchfan: [], hosts: [] };
  for (let round = 0; round < Number(flags.rounds); round++) {
    for (const [what, p] of round % 2 === 0
      ? [
          ['searchfan', port],
          ['hosts', hostsPort],
        ]
      : [
          ['hosts', hostsPort],
          ['searchfan', port],
        ]) {
      const r = await runDnsperf({ port: p, queryFile: qfile, seconds: Number(flags.seconds) });
      if (r.lost > 0 || (r.rcodes.NOERROR ?? 0) !== r.completed) throw new Error(`${what}: ${JSON.stringify(r)}`);
      rounds[what].push(r);
    }
  }
  const med = (list) => [...list].sort((a, b) => a.qps - b.qps)[Math.floor(list.length / 2)];
  const sf = med(rounds.searchfan);
  const hp = med(rounds.hosts);
  console.log(
    `\ncached answers (median of ${flags.rounds} rounds of ${flags.seconds} s, interleaved; upstream queries meanwhile: ${up.count() - before})`,
  );
  console.log(
    `searchfan cache hit  ${sf.qps.toFixed(0).padStart(7)} QPS  avg latency ${(sf.avgLatencyS * 1000).toFixed(2)} ms  rounds ${rounds.searchfan.map((r) => r.qps.toFixed(0)).join(', ')}`,
  );
  console.log(
    `hosts plugin (peer)  ${hp.qps.toFixed(0).padStart(7)} QPS  avg latency ${(hp.avgLatencyS * 1000).toFixed(2)} ms  rounds ${rounds.hosts.map((r) => r.qps.toFixed(0)).join(', ')}`,
  );
  console.log(`ratio                ${(sf.qps / hp.qps).toFixed(2)} ×`);
  console.log(
    `(dnsperf -s 127.0.0.1 -p PORT -d queries.txt -c 4 -T 1 -q 100 -Q 1000000 -l ${flags.seconds}; clusterdns -workers ${flags.workers}, unpinned)`,
  );
} finally {
  server.kill('SIGTERM');
  await new Promise((r) => server.on('exit', r));
  up.sock.close();
  client.close();
  rmSync(dir, { recursive: true, force: true });
}
