#!/usr/bin/env node
// An open-loop DNS client that records every query's latency (dnsperf reports only averages).
// Run by bench/latency.mjs as its own process (pinned with taskset), but usable alone:
//
//   node bench/lib/latency-client.mjs --port 5353 --rate 20000 --seconds 20 --queries queries.txt
//        [--sockets 4] [--pace spin|timer] [--skip 1] [--timeout-ms 2000] [--raw FILE]
//
// Schedule: query i is due at start + i/rate, whatever happened to the earlier ones (open
// loop: a slow answer never delays the next query). --pace spin sends each query when it is
// due, from a setImmediate loop that keeps polling the sockets (sub-10 µs spacing, at the price
// of a busy core); --pace timer sends what is owed every 1 ms from setInterval (bursts of
// rate/1000 queries; cheap, fine for low sampling rates).
// Queries go round-robin over --sockets connected UDP sockets; an answer is matched by its
// socket and ID (and its question bytes must equal the query's). Each query's send time is
// process.hrtime.bigint() taken just before send(); its latency is the receive time minus that.
// No answer within --timeout-ms: lost. Queries sent in the first --skip seconds are not counted.
//
// stdout: one JSON object (percentiles in ms, lost, rcodes, the client's own CPU, and how late
// it sent queries against the schedule). --raw FILE: a binary file of Float64 pairs
// (send time in ns since `startNs`, latency in ns or NaN if lost), with a JSON header line
// first; `startNs` is CLOCK_MONOTONIC (process.hrtime.bigint()), the same clock in every process;
// `stalls` lists the client's own stalls (send-loop gaps over 3 ms) as [start, end] ns.

import dgram from 'node:dgram';
import { readFileSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { performance } from 'node:perf_hooks';

const { values: o } = parseArgs({
  options: {
    port: { type: 'string' },
    rate: { type: 'string' },
    seconds: { type: 'string', default: '10' },
    queries: { type: 'string' },
    sockets: { type: 'string', default: '4' },
    pace: { type: 'string', default: 'spin' },
    skip: { type: 'string', default: '1' },
    'timeout-ms': { type: 'string', default: '2000' },
    raw: { type: 'string' },
  },
  strict: true,
});
const port = Number(o.port);
const rate = Number(o.rate);
const seconds = Number(o.seconds);
const nsock = Math.max(1, Math.floor(Number(o.sockets)));
const skipS = Number(o.skip);
const timeoutNs = Number(o['timeout-ms']) * 1e6;
if (!(port > 0) || !(rate > 0) || !(seconds > 0) || !o.queries || !['spin', 'timer'].includes(o.pace)) {
  process.stderr.write(
    'usage: latency-client.mjs --port P --rate QPS --seconds S --queries FILE [--sockets N] [--pace spin|timer] [--skip S] [--timeout-ms MS] [--raw FILE]\n',
  );
  process.exit(2);
}

// ---- queries: wire templates, ID 0 (patched per send) --------------------------------------
const TYPES = { A: 1, NS: 2, CNAME: 5, SOA: 6, PTR: 12, MX: 15, TXT: 16, AAAA: 28, SRV: 33, ANY: 255 };
function encodeQuery(name, type) {
  const labels = name.replace(/\.$/, '').split('.');
  const qlen = labels.reduce((a, l) => a + 1 + Buffer.byteLength(l), 1) + 4;
  const b = Buffer.alloc(12 + qlen);
  b.writeUInt16BE(0x0100, 2); // RD, as dnsperf and stub resolvers send
  b.writeUInt16BE(1, 4); // QDCOUNT
  let p = 12;
  for (const l of labels) {
    p = b.writeUInt8(Buffer.byteLength(l), p);
    p += b.write(l, p, 'latin1');
  }
  b[p++] = 0;
  b.writeUInt16BE(TYPES[type.toUpperCase()] ?? Number(type), p);
  b.writeUInt16BE(1, p + 2); // IN
  return b;
}
const templates = readFileSync(o.queries, 'utf8')
  .split('\n')
  .map((l) => l.trim())
  .filter(Boolean)
  .map((l) => {
    const [name, type = 'A'] = l.split(/\s+/);
    return encodeQuery(name, type);
  });
if (templates.length === 0) throw new Error(`${o.queries}: no queries`);

// ---- state: typed arrays indexed by sequence number -------------------------------------
const total = Math.ceil(rate * seconds);
const sendNs = new Float64Array(total); // actual send time, ns since start
const latNs = new Float64Array(total).fill(NaN); // NaN: not answered (yet)
const tmplOf = new Int32Array(total);
const idOf = new Uint16Array(total);
const rcodes = new Float64Array(16);
const slots = Array.from({ length: nsock }, () => new Int32Array(65536)); // id -> seq + 1 (0: free)
const nextId = new Uint16Array(nsock);
let sent = 0;
let answered = 0;
let lost = 0;
let late = 0; // answers after their query was counted lost
let mismatched = 0;
let collisions = 0;
let workNs = 0; // time in send() and in answer handling (not the event loop's own, nor GC)

const socks = [];
for (let k = 0; k < nsock; k++) {
  const s = dgram.createSocket({ type: 'udp4', recvBufferSize: 4 << 20, sendBufferSize: 4 << 20 });
  s.on('error', (e) => process.stderr.write(`socket ${k}: ${e.message}\n`));
  s.on('message', (msg) => onMessage(k, msg));
  await new Promise((r) => s.bind(0, '127.0.0.1', r));
  await new Promise((r) => s.connect(port, '127.0.0.1', r));
  socks.push(s);
}

const t0 = process.hrtime.bigint();
const now = () => Number(process.hrtime.bigint() - t0);
const nsPerQuery = 1e9 / rate;

function send(seq) {
  const k = seq % nsock;
  const tmpl = templates[seq % templates.length];
  let id = nextId[k];
  // An ID still in flight on this socket (only after 65,536 sends inside the timeout): skip it.
  for (let n = 0; slots[k][id] !== 0 && n < 65536; n++) id = (id + 1) & 0xffff;
  if (slots[k][id] !== 0) {
    collisions++;
    return;
  }
  nextId[k] = (id + 1) & 0xffff;
  const b = Buffer.allocUnsafe(tmpl.length);
  tmpl.copy(b);
  b[0] = id >> 8;
  b[1] = id & 0xff;
  slots[k][id] = seq + 1;
  idOf[seq] = id;
  tmplOf[seq] = seq % templates.length;
  const t = now();
  sendNs[seq] = t;
  socks[k].send(b);
  workNs += now() - t;
}

function onMessage(k, msg) {
  const t = now();
  if (msg.length < 12) return;
  const id = (msg[0] << 8) | msg[1];
  const seq = slots[k][id] - 1;
  if (seq < 0) {
    late++;
    return;
  }
  const tmpl = templates[tmplOf[seq]];
  if (msg.length < tmpl.length || msg.compare(tmpl, 12, tmpl.length, 12, tmpl.length) !== 0 || !(msg[2] & 0x80)) {
    mismatched++;
    return;
  }
  slots[k][id] = 0;
  latNs[seq] = t - sendNs[seq];
  rcodes[msg[3] & 0x0f]++;
  answered++;
  workNs += now() - t;
}

// Queries unanswered after the timeout are lost; they are expired in send order.
let expireAt = 0;
function expire(t) {
  while (expireAt < sent && t - sendNs[expireAt] >= timeoutNs) {
    const seq = expireAt++;
    if (Number.isNaN(latNs[seq])) {
      const k = seq % nsock;
      if (slots[k][idOf[seq]] === seq + 1) slots[k][idOf[seq]] = 0;
      lost++;
    }
  }
}

// ---- the schedule ------------------------------------------------------------------------
const cpu0 = process.cpuUsage();
const elu0 = performance.eventLoopUtilization();
let maxLoopGapNs = 0;
// The client's own stalls: gaps between two turns of the send loop longer than STALL_NS
// (descheduled, GC). Answers that arrive meanwhile wait too, so the report can set aside the
// queries in flight during one. [startNs, endNs] since start; at most 100,000 kept.
const STALL_NS = 3e6;
const stalls = [];
await new Promise((resolve) => {
  let lastLoop = 0;
  let lastExpire = 0;
  const step = () => {
    const t = now();
    if (lastLoop > 0 && t - lastLoop > STALL_NS && stalls.length < 100_000) stalls.push([lastLoop, t]);
    if (t - lastLoop > maxLoopGapNs && lastLoop > 0) maxLoopGapNs = t - lastLoop;
    lastLoop = t;
    const due = Math.min(total, Math.floor(t / nsPerQuery) + 1);
    while (sent < due) send(sent++);
    if (t - lastExpire > 50e6) {
      expire(t);
      lastExpire = t;
    }
    return sent >= total;
  };
  if (o.pace === 'spin') {
    const loop = () => (step() ? resolve() : setImmediate(loop));
    setImmediate(loop);
  } else {
    const timer = setInterval(() => {
      if (step()) {
        clearInterval(timer);
        resolve();
      }
    }, 1);
  }
});
const sendEndNs = now();
const workSendingNs = workNs;
const cpu = process.cpuUsage(cpu0);
const elu = performance.eventLoopUtilization(elu0);
// Wait for the answers still due, then count the rest as lost.
const until = sendEndNs + timeoutNs + 100e6;
while (answered + lost < sent && now() < until) {
  await new Promise((r) => setTimeout(r, 20));
  expire(now());
}
expire(Infinity);
for (const s of socks) s.close();

// ---- summary -----------------------------------------------------------------------------
const from = Math.min(sent, Math.ceil(skipS * rate));
const lat = [];
let lostCounted = 0;
const lags = new Float64Array(sent - from);
for (let i = from; i < sent; i++) {
  if (Number.isNaN(latNs[i])) lostCounted++;
  else lat.push(latNs[i]);
  lags[i - from] = sendNs[i] - i * nsPerQuery;
}
const sorted = Float64Array.from(lat).sort();
lags.sort();
const pct = (arr, p) =>
  arr.length ? arr[Math.min(arr.length - 1, Math.max(0, Math.ceil((p / 100) * arr.length) - 1))] : NaN;
const ms = (ns) => Math.round(ns / 1e3) / 1e3; // ns -> ms, µs precision
const rcodeNames = ['NOERROR', 'FORMERR', 'SERVFAIL', 'NXDOMAIN', 'NOTIMP', 'REFUSED'];
const rc = {};
rcodes.forEach((v, i) => v && (rc[rcodeNames[i] ?? `RCODE${i}`] = v));
const sendSeconds = sendEndNs / 1e9;
const summary = {
  client: 'node',
  port,
  rate,
  seconds,
  sockets: nsock,
  pace: o.pace,
  skipS,
  sent: sent - from,
  answered: sorted.length,
  lost: lostCounted,
  lostTotal: lost,
  lateAnswers: late,
  mismatched,
  idCollisions: collisions,
  achievedQps: Math.round((sent - from) / (sendSeconds - from / rate)),
  rcodes: rc,
  latencyMs: {
    p50: ms(pct(sorted, 50)),
    p90: ms(pct(sorted, 90)),
    p99: ms(pct(sorted, 99)),
    p999: ms(pct(sorted, 99.9)),
    max: ms(sorted.length ? sorted[sorted.length - 1] : NaN),
    mean: ms(sorted.reduce((a, b) => a + b, 0) / (sorted.length || 1)),
  },
  // How late the client sent against the schedule: the client's own delays (GC, descheduling).
  sendLagMs: {
    p50: ms(pct(lags, 50)),
    p99: ms(pct(lags, 99)),
    p999: ms(pct(lags, 99.9)),
    max: ms(lags[lags.length - 1]),
  },
  maxLoopGapMs: ms(maxLoopGapNs),
  stalls: { count: stalls.length, totalMs: ms(stalls.reduce((a, [x, y]) => a + y - x, 0)) },
  clientCpuPercent: Math.round(((cpu.user + cpu.system) / 1e4 / sendSeconds) * 10) / 10,
  clientWorkPercent: Math.round((workSendingNs / sendEndNs) * 1000) / 10,
  clientCpuUserPercent: Math.round((cpu.user / 1e4 / sendSeconds) * 10) / 10,
  eventLoopUtilization: Math.round(elu.utilization * 1000) / 1000,
  startNs: t0.toString(),
};
if (o.raw) {
  const header = Buffer.from(
    JSON.stringify({ startNs: t0.toString(), rate, skipS, count: sent, stallNs: STALL_NS, stalls }) + '\n',
  );
  const body = new Float64Array(sent * 2);
  for (let i = 0; i < sent; i++) {
    body[2 * i] = sendNs[i];
    body[2 * i + 1] = latNs[i];
  }
  writeFileSync(o.raw, Buffer.concat([header, Buffer.from(body.buffer)]));
}
process.stdout.write(JSON.stringify(summary) + '\n');
