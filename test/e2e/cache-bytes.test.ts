// The cache is bounded in bytes as well as entries: 3,000 distinct answers of ~60 KB over TCP
// (from a local upstream serving big TXT records) leave RSS bounded, the evictions counted in
// coredns_cache_evictions_total, and a well-behaved client fast: its p99 within 20 ms of what the
// same client sees from an idle server at the same time (the machine's share).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { readFileSync } from 'node:fs';
import { startServer } from '../helpers/server.js';
import { buildQuery, sendTcp } from '../helpers/dns.js';
import { freePort } from '../helpers/ports.js';
import { childrenOf } from '../helpers/procs.js';
import { goodClientAtRest, goodP99Bound, IDLE_NAME, startGoodClient, startIdleServer } from '../helpers/good-client.js';
import { QType } from '../../src/dns/constants.js';

const TXT_STRINGS = 240;
/** 240 character-strings of 249 octets: 60,000 octets of RDATA. */
const RDATA = Buffer.concat(
  Array.from({ length: TXT_STRINGS }, () => Buffer.concat([Buffer.from([249]), Buffer.alloc(249, 0x78)])),
);

/** A TCP upstream answering every query with one ~60 KB TXT record for the asked name. */
async function bigTxtUpstream(): Promise<{ port: number; close(): Promise<void> }> {
  const server = net.createServer((sock) => {
    let pending = Buffer.alloc(0);
    sock.on('error', () => {});
    sock.on('data', (d) => {
      pending = Buffer.concat([pending, d]);
      while (pending.length >= 2 && pending.length >= 2 + pending.readUInt16BE(0)) {
        const q = pending.subarray(2, 2 + pending.readUInt16BE(0));
        pending = pending.subarray(2 + q.length);
        let p = 12;
        while (q[p] !== 0) p += 1 + q[p]!;
        const questionEnd = p + 5;
        const header = Buffer.from([q[0]!, q[1]!, 0x81, 0x80, 0, 1, 0, 1, 0, 0, 0, 0]);
        const rr = Buffer.alloc(12);
        rr.writeUInt16BE(0xc00c, 0);
        rr.writeUInt16BE(QType.TXT, 2);
        rr.writeUInt16BE(1, 4);
        rr.writeUInt32BE(300, 6);
        rr.writeUInt16BE(RDATA.length, 10);
        const msg = Buffer.concat([header, q.subarray(12, questionEnd), rr, RDATA]);
        const len = Buffer.alloc(2);
        len.writeUInt16BE(msg.length);
        sock.write(Buffer.concat([len, msg]));
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return { port: (server.address() as net.AddressInfo).port, close: () => new Promise((r) => server.close(() => r())) };
}

function rssMB(pid: number): number {
  let kb = 0;
  for (const p of [pid, ...childrenOf(pid)]) {
    try {
      kb += Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${p}/status`, 'utf8'))?.[1] ?? 0);
    } catch {
      /* gone */
    }
  }
  return kb / 1024;
}

function metric(text: string, name: string, type: string): number {
  const m = new RegExp(`^${name}\\{[^}]*type="${type}"[^}]*\\} (\\d+)`, 'm').exec(text);
  return m === null ? 0 : Number(m[1]);
}

test(
  '3,000 answers of 60 KB through the cache: bytes stay under the default bound, evictions are counted',
  { timeout: 120_000 },
  async () => {
    const upstream = await bigTxtUpstream();
    const idle = await startIdleServer();
    const mp = await freePort();
    const s = await startServer({
      corefile: `.:PORT {\n    bind 127.0.0.1\n    prometheus 127.0.0.1:${mp}\n    cache\n    hosts {\n        10.0.0.1 good.test\n        fallthrough\n    }\n    forward . 127.0.0.1:${upstream.port} {\n        force_tcp\n    }\n}\n`,
      probe: 'good.test.',
    });
    try {
      // Warm up (JIT, the forward connection), then measure from there.
      for (let i = 0; i < 20; i++) await sendTcp(s.port, [buildQuery(`warm${i}.big.test.`, QType.TXT)], 5000);
      const rest = await goodClientAtRest(s.port, 'good.test.');
      const before = rssMB(s.proc.pid!);
      let peak = before;
      const sampler = setInterval(() => (peak = Math.max(peak, rssMB(s.proc.pid!))), 200);
      const good = startGoodClient(s.port, 'good.test.');
      const control = startGoodClient(idle.port, IDLE_NAME);
      await Promise.all([good.ready, control.ready]);
      let mid = 0;
      let answered = 0;
      try {
        for (let i = 0; i < 3000; i += 10) {
          const batch = Array.from({ length: 10 }, (_, k) => buildQuery(`n${i + k}.big.test.`, QType.TXT));
          const replies = await sendTcp(s.port, batch, 10_000);
          for (const r of replies) if (r.length > 60_000) answered++;
          if (i === 1500) mid = peak;
        }
      } finally {
        clearInterval(sampler);
      }
      const g = await good.stop();
      const c = await control.stop();
      const text = await (await fetch(`http://127.0.0.1:${mp}/metrics`)).text();
      const entries = metric(text, 'coredns_cache_entries', 'success');
      const evictions = metric(text, 'coredns_cache_evictions_total', 'success');
      process.stderr.write(
        `# RSS ${before.toFixed(1)} -> ${mid.toFixed(1)} at half -> peak ${peak.toFixed(1)} MB; ${entries} entries, ${evictions} evictions; good client p50 ${g.p50.toFixed(2)} p99 ${g.p99.toFixed(2)} ms over ${g.count} (${g.lost} lost), at rest p99 ${rest.p99.toFixed(2)} ms, an idle server's at the same time ${c.p99.toFixed(2)} ms\n`,
      );
      assert.equal(answered, 3000, 'every big answer came back whole over TCP');
      // 32 MiB hold 556 entries of 60,271 bytes (the RDATA, its name and the entry itself).
      assert.ok(entries > 400 && entries <= 557, `${entries} entries of 60 KB held`);
      assert.ok(evictions >= 3000 + 20 - 557, `${evictions} evictions counted`);
      // Unbounded, RSS grew with every answer (over 200 MB here); bounded, it levels off: what
      // stays above the 32 MiB is dead buffers V8 frees at its next collection.
      assert.ok(peak - before < 120, `RSS grew ${(peak - before).toFixed(1)} MB`);
      assert.ok(peak - mid < 25, `RSS kept growing in the second half: ${mid.toFixed(1)} -> ${peak.toFixed(1)} MB`);
      assert.ok(
        g.p99 < goodP99Bound(rest, c),
        `good client p99 ${g.p99.toFixed(2)} ms while the cache filled (at rest ${rest.p99.toFixed(2)} ms, an idle server's at the same time ${c.p99.toFixed(2)} ms)`,
      );
      // What is still cached answers from the cache: the newest name is a hit.
      const hitsBefore = Number(/^coredns_cache_hits_total\{[^}]*type="success"[^}]*\} (\d+)/m.exec(text)?.[1] ?? 0);
      await sendTcp(s.port, [buildQuery('n2999.big.test.', QType.TXT)], 5000);
      const after = await (await fetch(`http://127.0.0.1:${mp}/metrics`)).text();
      assert.equal(
        Number(/^coredns_cache_hits_total\{[^}]*type="success"[^}]*\} (\d+)/m.exec(after)?.[1] ?? 0),
        hitsBefore + 1,
      );
    } finally {
      await s.stop();
      await idle.stop();
      await upstream.close();
    }
  },
);
