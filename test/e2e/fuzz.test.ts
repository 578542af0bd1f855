// Hostile packets: random and mutated messages over UDP and TCP. The server must neither
// crash nor stop answering valid queries, and its memory must stay flat.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import net from 'node:net';
import { readFileSync } from 'node:fs';
import { startServer } from '../helpers/server.js';
import { buildQuery, query } from '../helpers/dns.js';
import { QType, Rcode } from '../../src/dns/constants.js';
import { decodeMessage, DecodeError } from '../../src/dns/message.js';
import { parseQuery } from '../../src/dns/query.js';

/** A small deterministic PRNG so a failure can be replayed. */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return s / 0x100000000;
  };
}

const seeds = [
  buildQuery('www.sub.example.org.', QType.A, { edns: 1232 }),
  buildQuery('big.sub.example.org.', QType.AAAA),
  buildQuery('a.b.c.d.e.example.org.', QType.SRV, { edns: 4096, do: true }),
  buildQuery('x.', QType.TXT),
];

function mutate(r: () => number): Buffer {
  const pick = Math.floor(r() * 8);
  const base = Buffer.from(seeds[Math.floor(r() * seeds.length)]!);
  switch (pick) {
    case 0: // pure noise
      return Buffer.from(Array.from({ length: Math.floor(r() * 600) }, () => Math.floor(r() * 256)));
    case 1: // truncated anywhere
      return base.subarray(0, Math.floor(r() * base.length));
    case 2: // counts that lie
      base.writeUInt16BE(Math.floor(r() * 65536), 4 + 2 * Math.floor(r() * 4));
      return base;
    case 3: {
      // a pointer loop or forward pointer in the question
      base[12] = 0xc0;
      base[13] = Math.floor(r() * 2) ? 12 : Math.floor(r() * 255);
      return base;
    }
    case 4: {
      // a label claiming more than 63 octets, or a name over 255
      const long = Buffer.alloc(300, 0x3f);
      return Buffer.concat([base.subarray(0, 12), long, Buffer.from([0, 0, 1, 0, 1])]);
    }
    case 5: {
      // flipped bits
      for (let i = 0; i < 1 + Math.floor(r() * 6); i++)
        base[Math.floor(r() * base.length)]! ^= 1 << Math.floor(r() * 8);
      base[2] = base[2]! & 0x7f; // keep QR clear so most reach the parser
      return base;
    }
    case 6: // junk appended
      return Buffer.concat([
        base,
        Buffer.from(Array.from({ length: Math.floor(r() * 40) }, () => Math.floor(r() * 256))),
      ]);
    default: {
      // an OPT record with an absurd length
      const q = Buffer.from(buildQuery('www.sub.example.org.', QType.A, { edns: 65535 }));
      q.writeUInt16BE(0xffff, q.length - 2);
      return q;
    }
  }
}

test('the codec never throws anything but DecodeError on 300,000 mutated messages', () => {
  const r = rng(7);
  for (let i = 0; i < 300_000; i++) {
    const m = mutate(r);
    parseQuery(m); // must not throw at all
    try {
      decodeMessage(m);
    } catch (e) {
      if (!(e instanceof DecodeError)) throw new Error(`case ${i}: ${(e as Error).stack}`, { cause: e });
    }
  }
});

function rssKb(pid: number): number {
  let total = 0;
  const m = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  total += Number(m?.[1] ?? 0);
  return total;
}

async function blast(port: number, count: number, r: () => number): Promise<void> {
  const sock = dgram.createSocket('udp4');
  sock.on('message', () => {});
  await new Promise<void>((res) => sock.bind(0, '127.0.0.1', () => res()));
  for (let i = 0; i < count; i += 200) {
    await new Promise<void>((res) => {
      let left = Math.min(200, count - i);
      for (let j = 0; j < Math.min(200, count - i); j++) {
        sock.send(mutate(r), port, '127.0.0.1', () => {
          if (--left === 0) res();
        });
      }
    });
    await new Promise((res) => setImmediate(res));
  }
  sock.close();
}

test(
  '100,000 hostile UDP packets and TCP garbage neither crash the server nor stop it answering, and memory stays flat',
  { timeout: 240000 },
  async () => {
    const bigHosts = Array.from({ length: 60 }, (_, i) => `10.1.0.${i} big.sub.example.org`).join('\n');
    const s = await startServer({
      corefile: `.:PORT {\n bind 127.0.0.1\n hosts big.hosts {\n 10.0.0.7 www.sub.example.org\n fallthrough\n }\n whoami\n}\n`,
      files: { 'big.hosts': bigHosts },
    });
    try {
      const r = rng(42);
      await blast(s.port, 20_000, r); // warm up (JIT, buffers)
      const before = rssKb(s.proc.pid!);
      // TCP: huge length prefixes, half frames, garbage, connections left open.
      const socks: net.Socket[] = [];
      for (let i = 0; i < 50; i++) {
        const c = net.connect({ port: s.port, host: '127.0.0.1' });
        c.on('error', () => {});
        c.on('connect', () => c.write(mutate(r)));
        socks.push(c);
      }
      await blast(s.port, 80_000, r);
      // The flood can leave the socket's queue full for a moment: retry as a resolver would.
      let ok;
      for (let i = 0; i < 5 && !ok; i++)
        ok = await query(s.port, 'www.sub.example.org.', QType.A, { timeoutMs: 1000 }).catch(() => undefined);
      assert.ok(ok, `no answer after the flood:\n${s.output().slice(-2000)}`);
      assert.equal(ok.rcode, Rcode.NOERROR);
      assert.deepEqual(ok.answers[0]?.data, { address: '10.0.0.7' });
      const okTcp = await query(s.port, 'www.sub.example.org.', QType.A, { tcp: true });
      assert.equal(okTcp.answers.length, 1);
      const after = rssKb(s.proc.pid!);
      for (const c of socks) c.destroy();
      assert.ok(after - before < 30_000, `RSS grew by ${after - before} kB over 80,000 packets`);
      assert.equal(s.proc.exitCode, null);
      assert.ok(!/plugin failed|TypeError|RangeError/.test(s.output()), s.output().slice(0, 2000));
    } finally {
      await s.stop();
    }
  },
);
