// Attacks on a DNS server, each bounded in count and time, run as a process of their own so
// that the attacker's work does not slow the well-behaved client that measures latency:
//
//   node dist/test/helpers/attack.js KIND --port P --seconds S [options]   (prints one JSON line)
//
// KIND trickle:   --conns N (--from ADDR): each connection announces a 65,535-octet frame,
//                 sends --prefill octets of it at once, then one octet every --interval ms.
// KIND pipeline:  --conns N: each connection writes --count queries for --name/--qtype at once
//                 and never reads its answers (--close: closes right after writing).
// KIND truncate:  --rate R UDP queries per second for --name/--qtype (several, comma-separated,
//                 taken in turn) with EDNS --edns, answers too big for that buffer.
// Also exports the well-behaved client (goodClient) and RSS sampling used by the tests and bench.

import dgram from 'node:dgram';
import net from 'node:net';
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import { encodeMessage, emptyMessage } from '../../src/dns/message.js';
import { QClass } from '../../src/dns/constants.js';

export function wireQuery(name: string, qtype: number, edns?: number, id = 0): Buffer {
  const m = emptyMessage(id);
  m.rd = true;
  m.questions.push({ name, type: qtype, class: QClass.IN });
  if (edns !== undefined) m.edns = { udpSize: edns, version: 0, do: false, zflags: 0, options: [] };
  return encodeMessage(m);
}

function framed(q: Buffer): Buffer {
  const f = Buffer.allocUnsafe(q.length + 2);
  f.writeUInt16BE(q.length, 0);
  q.copy(f, 2);
  return f;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface TrickleResult {
  opened: number;
  /** Closed by the server less than 1 s after connecting (refused by a cap). */
  refused: number;
  /** Closed by the server later (a deadline). */
  closedLater: number;
  /** Milliseconds from connect to close for those, median. */
  closedAfterMs: number;
  stillOpen: number;
  /** Of those still open when counted, how long the oldest had been connected (0 when none). */
  oldestOpenMs: number;
  /** Milliseconds from the start until the last connection was made (an attacker short of CPU opens them late). */
  lastConnectMs: number;
}

export async function trickle(
  port: number,
  o: { conns: number; from?: string; prefill: number; interval: number; seconds: number },
): Promise<TrickleResult> {
  const start = Date.now();
  // Set once every connection is asked for: on busy cores this process opens them late.
  let end = Infinity;
  const frame = Buffer.concat([Buffer.from([0xff, 0xff]), Buffer.alloc(o.prefill)]);
  const byte = Buffer.from([0]);
  // Per connection: when this process saw it connect and close (0: not yet).
  const conns: { sock: net.Socket; at: number; closedAt: number }[] = [];
  let lastClose = 0;
  for (let i = 0; i < o.conns; i++) {
    const c = { sock: net.connect({ port, host: '127.0.0.1', localAddress: o.from }), at: 0, closedAt: 0 };
    conns.push(c);
    c.sock.on('error', () => {});
    c.sock.on('connect', () => {
      c.at = Date.now();
      c.sock.write(frame);
      const t = setInterval(() => {
        if (c.closedAt !== 0 || Date.now() >= end) return clearInterval(t);
        c.sock.write(byte);
      }, o.interval);
    });
    c.sock.on('close', () => {
      c.closedAt = lastClose = Date.now();
    });
    if (i % 50 === 49) await sleep(5);
  }
  end = Date.now() + o.seconds * 1000;
  while (Date.now() < end) await sleep(50);
  // Run at the lowest priority (attacks.test.ts), this process may have waited long for a CPU:
  // the server's closes are in the kernel already, but their events not yet seen here. Let them
  // come in (until none for 300 ms, at most 3 s) before counting, so what is counted is the server's.
  const drainEnd = Date.now() + 3000;
  while (Date.now() < drainEnd && Date.now() - Math.max(lastClose, end) < 300) await sleep(20);
  const now = Date.now();
  let refused = 0;
  let stillOpen = 0;
  let oldestOpenMs = 0;
  let lastConnect = start;
  const later: number[] = [];
  for (const c of conns) {
    if (c.at === 0) continue;
    lastConnect = Math.max(lastConnect, c.at);
    if (c.closedAt === 0) {
      stillOpen++;
      oldestOpenMs = Math.max(oldestOpenMs, now - c.at);
    } else if (c.closedAt - c.at < 1000) refused++;
    else later.push(c.closedAt - c.at);
  }
  for (const c of conns) c.sock.destroy();
  later.sort((a, b) => a - b);
  return {
    opened: conns.filter((c) => c.at !== 0).length,
    refused,
    closedLater: later.length,
    closedAfterMs: later[later.length >> 1] ?? 0,
    stillOpen,
    oldestOpenMs,
    lastConnectMs: lastConnect - start,
  };
}

export interface PipelineResult {
  conns: number;
  written: number;
  closedByServer: number;
}

export async function pipeline(
  port: number,
  o: { conns: number; name: string; qtype: number; count: number; seconds: number; close: boolean },
): Promise<PipelineResult> {
  const end = Date.now() + o.seconds * 1000;
  const batch = Buffer.concat(
    Array.from({ length: o.count }, (_, i) => framed(wireQuery(o.name, o.qtype, undefined, i & 0xffff))),
  );
  let written = 0;
  let closedByServer = 0;
  const socks: net.Socket[] = [];
  for (let i = 0; i < o.conns; i++) {
    const s = net.connect({ port, host: '127.0.0.1' });
    socks.push(s);
    s.on('error', () => {});
    s.on('close', () => {
      if (Date.now() < end && !o.close) closedByServer++;
    });
    s.on('connect', () => {
      // Never read: the kernel's receive buffer fills and the server's answers back up.
      s.pause();
      s.write(batch);
      written += o.count;
      if (o.close) s.destroy();
    });
  }
  while (Date.now() < end) await sleep(50);
  for (const s of socks) s.destroy();
  return { conns: o.conns, written, closedByServer };
}

export interface TruncateResult {
  sent: number;
  answered: number;
  truncated: number;
  largest: number;
  /** Largest reply over its query, in octets. */
  amplification: number;
}

export async function truncate(
  port: number,
  o: { names: string[]; qtypes: number[]; edns: number; rate: number; seconds: number },
): Promise<TruncateResult> {
  const s = dgram.createSocket('udp4');
  await new Promise<void>((r) => s.bind(0, '127.0.0.1', () => r()));
  const qs = o.names.map((n, i) => wireQuery(n, o.qtypes[i % o.qtypes.length]!, o.edns));
  let answered = 0;
  let truncated = 0;
  let largest = 0;
  s.on('message', (m) => {
    answered++;
    if (m[2]! & 2) truncated++;
    largest = Math.max(largest, m.length);
  });
  const start = Date.now();
  const end = start + o.seconds * 1000;
  let sent = 0;
  while (Date.now() < end) {
    const due = Math.floor(((Date.now() - start) / 1000) * o.rate);
    while (sent < due) {
      s.send(qs[sent % qs.length]!, port, '127.0.0.1');
      sent++;
    }
    await sleep(2);
  }
  await sleep(300);
  s.close();
  return { sent, answered, truncated, largest, amplification: largest / Math.min(...qs.map((q) => q.length)) };
}

export interface GoodResult {
  sent: number;
  lost: number;
  p50: number;
  p99: number;
  max: number;
}

/** A well-behaved UDP client: `rate` queries a second, each answered or lost after 1 s; latencies in ms. */
export async function goodClient(
  port: number,
  name: string,
  qtype: number,
  o: { rate: number; seconds: number },
): Promise<GoodResult> {
  const s = dgram.createSocket('udp4');
  await new Promise<void>((r) => s.bind(0, '127.0.0.1', () => r()));
  const sentAt = new Map<number, number>();
  const lat: number[] = [];
  s.on('message', (m) => {
    const t = sentAt.get(m.readUInt16BE(0));
    if (t === undefined) return;
    sentAt.delete(m.readUInt16BE(0));
    lat.push(performance.now() - t);
  });
  const q = wireQuery(name, qtype, 1232);
  const gap = 1000 / o.rate;
  const total = Math.round(o.seconds * o.rate);
  const start = performance.now();
  for (let i = 0; i < total; i++) {
    const wait = start + i * gap - performance.now();
    if (wait > 0) await sleep(wait);
    // A copy each time: dgram sends after the current tick, and the ID must not change meanwhile.
    const one = Buffer.from(q);
    one.writeUInt16BE(i & 0xffff, 0);
    sentAt.set(i & 0xffff, performance.now());
    s.send(one, port, '127.0.0.1');
  }
  await sleep(1000);
  s.close();
  const lost = total - lat.length;
  // A lost query counts as slower than any answer.
  for (let i = 0; i < lost; i++) lat.push(Infinity);
  lat.sort((a, b) => a - b);
  const pct = (p: number) => lat[Math.min(lat.length - 1, Math.floor((p / 100) * lat.length))] ?? Infinity;
  return { sent: total, lost, p50: pct(50), p99: pct(99), max: lat[lat.length - 1] ?? Infinity };
}

/** The resident set of a process, in MiB. */
export function rssMiB(pid: number): number {
  const m = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : 0;
}

async function main(): Promise<void> {
  const { values: v, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      port: { type: 'string' },
      seconds: { type: 'string', default: '5' },
      conns: { type: 'string', default: '1' },
      from: { type: 'string' },
      prefill: { type: 'string', default: '0' },
      interval: { type: 'string', default: '100' },
      name: { type: 'string', default: '' },
      qtype: { type: 'string', default: '1' },
      count: { type: 'string', default: '100' },
      close: { type: 'boolean', default: false },
      rate: { type: 'string', default: '100' },
      edns: { type: 'string', default: '1232' },
    },
  });
  const port = Number(v.port);
  const seconds = Number(v.seconds);
  let out: unknown;
  switch (positionals[0]) {
    case 'trickle':
      out = await trickle(port, {
        conns: Number(v.conns),
        from: v.from,
        prefill: Number(v.prefill),
        interval: Number(v.interval),
        seconds,
      });
      break;
    case 'pipeline':
      out = await pipeline(port, {
        conns: Number(v.conns),
        name: v.name,
        qtype: Number(v.qtype),
        count: Number(v.count),
        seconds,
        close: v.close,
      });
      break;
    case 'truncate':
      out = await truncate(port, {
        names: v.name.split(','),
        qtypes: v.qtype.split(',').map(Number),
        edns: Number(v.edns),
        rate: Number(v.rate),
        seconds,
      });
      break;
    default:
      throw new Error(`unknown attack "${positionals[0]}"`);
  }
  process.stdout.write(JSON.stringify(out) + '\n');
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await main();
