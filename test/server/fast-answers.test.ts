// The JS half of the native answer table (fast-answers.ts) with a stand-in addon: which answers
// are offered to the table, and how hits the addon counted fold into CoreDNS's counters (requests,
// responses by rcode and plugin, sizes, a plugin's own counter) and clusterdns_fast_answers_total.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { QType } from '../../src/dns/constants.js';
import { parseQuery } from '../../src/dns/query.js';
import { encodeMessage, emptyMessage } from '../../src/dns/message.js';
import { FastTable, hasCookie } from '../../src/server/fast-answers.js';
import { recordsReply } from '../../src/server/reply.js';
import { Request, Response, type ClientInfo } from '../../src/server/request.js';
import { ServerStats } from '../../src/server/stats.js';
import { QueryNames } from '../../src/status/names.js';
import type { UdpBatchAddon, UdpBatchSocket } from '../../src/server/udp-native.js';
import { buildQuery } from '../helpers/dns.js';

const client: ClientInfo = {
  proto: 'udp',
  remoteAddress: '127.0.0.1',
  remotePort: 5000,
  family: 1,
  localAddress: '127.0.0.1',
  localPort: 53,
};

function request(raw: Buffer): Request {
  const q = parseQuery(raw);
  assert.ok(typeof q !== 'number');
  const r = new Request(raw, q, client);
  r.server = 'dns://:53';
  r.zone = 'example.';
  return r;
}

function rig(counting = true) {
  const puts: Array<{ slot: number; answer: Buffer; validMs: number; stat: number }> = [];
  let hits: Float64Array | null = null;
  let flushes = 0;
  const addon = {
    fastEnable: (_s: UdpBatchSocket, h: Float64Array) => (hits = h),
    fastPut: (_s: UdpBatchSocket, slot: number, answer: Uint8Array, validMs: number, stat: number) => {
      puts.push({ slot, answer: Buffer.from(answer), validMs, stat });
      return true;
    },
    fastFlush: () => flushes++,
    fastStats: () => [puts.length, 0],
  } as unknown as UdpBatchAddon;
  const stats = new ServerStats();
  const release = counting ? stats.count() : () => {};
  const table = new FastTable(addon, {} as UdpBatchSocket, stats, new QueryNames());
  return {
    puts,
    hits: () => hits!,
    flushes: () => flushes,
    stats,
    table,
    done: () => (table.close(), release()),
  };
}

test('turning counting on retires the answers kept while nothing counted (they would repeat uncounted)', () => {
  const r = rig(false);
  try {
    const zone = r.stats.zone('dns://:53', 'example.');
    const req = request(buildQuery('a.example.', QType.A, { id: 1 }));
    const out = answer(req);
    const res = Response.wire(out, 'hosts');
    res.fastMs = 30_000;
    r.table.keep(0, req, res, out, zone);
    assert.equal(r.puts.length, 1, 'kept while nothing counts');
    const before = r.flushes();
    const stop = r.stats.count();
    assert.equal(r.flushes(), before + 1, 'the first holder flushes');
    const again = r.stats.count();
    assert.equal(r.flushes(), before + 1, 'a second holder does not');
    again();
    stop();
    r.stats.count()();
    assert.equal(r.flushes(), before + 2, 'on again after every holder let go: flushed again');
  } finally {
    r.done();
  }
});

function answer(req: Request, rcode = 0): Buffer {
  const rr = Buffer.from([0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 30, 0, 4, 10, 0, 0, 1]);
  return recordsReply(req, rcode, 0x0400, rr, 1, 0, 0);
}

test('a hit the addon counted folds into requests, responses, sizes and the plugin counter', () => {
  const r = rig();
  try {
    const zone = r.stats.zone('dns://:53', 'example.');
    const req = request(buildQuery('a.example.', QType.A, { id: 1 }));
    const out = answer(req);
    const res = Response.wire(out, 'hosts');
    res.fastMs = 60_000;
    let extra = 0;
    res.fastCount = (n) => (extra += n);
    r.table.keep(3, req, res, out, zone);
    assert.equal(r.puts.length, 1);
    assert.equal(r.puts[0]!.slot, 3);
    assert.equal(r.puts[0]!.validMs, 30_000, 'capped at 30 s');
    // The addon answered it 5 times.
    r.hits()[r.puts[0]!.stat] = 5;
    const z = [...r.stats.all()].find((x) => x.zone === 'example.')!;
    assert.equal(
      z.requests.reduce((a, b) => a + b, 0),
      5,
    );
    assert.equal(z.responses.get('hosts')![0], 5, 'NOERROR by hosts');
    assert.equal(z.requestSizeSums[0], 5 * req.raw.length);
    assert.equal(z.responseSizeSums[0], 5 * out.length);
    assert.equal(z.durations[0 * 17 + 0], 5, 'the first duration bucket');
    assert.equal(extra, 5);
    assert.equal(r.stats.fastAnswers.get('dns://:53'), 5);
    // Folded once: a second read adds nothing.
    r.stats.fold();
    assert.equal(z.responses.get('hosts')![0], 5);
  } finally {
    r.done();
  }
});

test('what is not offered: SERVFAIL, TC, an error, a veto, a dropped reply, a COOKIE', () => {
  const r = rig();
  try {
    const zone = r.stats.zone('dns://:53', 'example.');
    const offer = (req: Request, out: Buffer, f?: (res: Response) => void) => {
      const res = Response.wire(out, 'hosts');
      res.fastMs = 1000;
      f?.(res);
      r.table.keep(0, req, res, out, zone);
    };
    let req = request(buildQuery('a.example.', QType.A));
    offer(req, answer(req, 2));
    const tc = answer(req);
    tc[2] = tc[2]! | 0x02;
    offer(req, tc);
    offer(req, answer(req), (res) => (res.error = 'x'));
    req.noFast();
    offer(req, answer(req));
    req = request(buildQuery('a.example.', QType.A));
    offer(req, answer(req), (res) => (res.dropped = true));
    const m = emptyMessage(9);
    m.questions.push({ name: 'a.example.', type: QType.A, class: 1 });
    m.edns = { udpSize: 1232, version: 0, do: false, zflags: 0, options: [{ code: 10, data: Buffer.alloc(8, 1) }] };
    const withCookie = request(encodeMessage(m));
    assert.equal(hasCookie(withCookie), true);
    offer(withCookie, answer(withCookie));
    assert.equal(r.puts.length, 0);
    // NXDOMAIN is offered.
    offer(req, answer(req, 3));
    assert.equal(r.puts.length, 1);
  } finally {
    r.done();
  }
});

test('a fold counts what JS would have: every kind, each server its own total, in any order', () => {
  const r = rig();
  try {
    const zone = r.stats.zone('dns://:53', 'example.');
    const other = r.stats.zone('dns://:5353', 'example.');
    const stats: number[] = [];
    // Kinds of two servers, interleaved, with different names (sizes), qtypes, rcodes and plugins.
    const shapes: Array<[string, number, number, string, 'dns://:53' | 'dns://:5353']> = [
      ['a.example.', QType.A, 0, 'hosts', 'dns://:53'],
      ['longer-name.example.', QType.AAAA, 0, 'hosts', 'dns://:5353'],
      ['b.example.', QType.TXT, 3, 'kubernetes', 'dns://:53'],
      ['c.example.', QType.A, 0, 'cache', 'dns://:5353'],
      ['d.example.', QType.MX, 3, 'hosts', 'dns://:53'],
    ];
    shapes.forEach(([name, qtype, rcode, plugin, server], i) => {
      const req = request(buildQuery(name, qtype, { id: i + 1 }));
      req.server = server;
      const out = answer(req, rcode);
      const res = Response.wire(out, plugin);
      res.fastMs = 500;
      r.table.keep(i, req, res, out, server === 'dns://:53' ? zone : other);
      stats.push(r.puts[r.puts.length - 1]!.stat);
    });
    assert.equal(new Set(stats).size, shapes.length);
    // What JS would have counted for the same hits, one record() per query.
    const want = new ServerStats();
    want.count();
    const counts = [7, 1, 3, 0, 11];
    shapes.forEach(([name, qtype, rcode, plugin, server], i) => {
      r.hits()[stats[i]!] = counts[i]!;
      const req = request(buildQuery(name, qtype, { id: i + 1 }));
      const out = answer(req, rcode);
      const z = want.zone(server, 'example.');
      for (let k = 0; k < counts[i]!; k++) z.record(0, 1, qtype, false, req.raw.length, out.length, rcode, plugin, 0);
    });
    r.stats.fold();
    assert.equal(r.stats.fastAnswers.get('dns://:53'), 7 + 3 + 11);
    assert.equal(r.stats.fastAnswers.get('dns://:5353'), 1);
    for (const server of ['dns://:53', 'dns://:5353']) {
      const got = r.stats.zone(server, 'example.');
      const exp = want.zone(server, 'example.');
      for (const field of [
        'requests',
        'durations',
        'durationSums',
        'requestSizes',
        'requestSizeSums',
        'responseSizes',
        'responseSizeSums',
      ] as const)
        assert.deepEqual([...got[field]], [...exp[field]], `${server} ${field}`);
      assert.equal(got.doRequests, exp.doRequests);
      assert.deepEqual(
        [...got.responses].filter(([, row]) => row.some((x) => x > 0)).map(([p, row]) => [p, [...row]]),
        [...exp.responses].map(([p, row]) => [p, [...row]]),
        `${server} responses`,
      );
    }
    // Nothing new: a second fold adds nothing.
    r.stats.fold();
    assert.equal(r.stats.fastAnswers.get('dns://:53'), 21);
  } finally {
    r.done();
  }
});
