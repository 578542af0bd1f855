// Forward over UDP on the native addon: the queries one turn of the event loop sends to an
// upstream leave in one sendmmsg per socket (not a send each), and every answer still finds its query.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { QType, Rcode } from '../../src/dns/constants.js';
import { decodeMessage } from '../../src/dns/message.js';
import { udpBatchAddon } from '../../src/server/udp-native.js';
import { nativeOpenStats, nativeSendStats, SMALL_SLOT_BYTES } from '../../src/upstream/udp.js';
import { answer, FakeUpstream, type Behaviour } from './upstreams.js';
import { forwardChain } from './harness.js';

const noAddon = udpBatchAddon().addon === null ? `no native addon (${udpBatchAddon().why})` : false;

describe('forward over UDP on the native addon', { skip: noAddon }, () => {
  let up: FakeUpstream;
  before(async () => {
    up = await FakeUpstream.start();
  });
  after(() => up.close());

  it('40 queries asked at once leave in at most one sendmmsg per upstream socket, each answer matched to its query', async () => {
    const h = forwardChain(`forward . 127.0.0.1:${up.port}`);
    try {
      const calls = nativeSendStats.calls;
      const sent = nativeSendStats.datagrams;
      const done = await Promise.all(
        Array.from({ length: 40 }, (_, i) => h.ask(`Q${i}.Example.ORG.`, i % 2 ? QType.A : QType.AAAA)),
      );
      for (const [i, r] of done.entries()) {
        assert.equal(r.msg.rcode, Rcode.NOERROR);
        assert.equal(r.msg.id, r.raw.readUInt16BE(0), 'the client ID put back');
        assert.equal(r.msg.questions[0]!.name.toLowerCase(), `q${i}.example.org.`);
        assert.deepEqual(
          r.msg.answers.map((a) => (a.data as { address: string }).address),
          i % 2 ? ['192.0.2.1'] : [],
        );
      }
      assert.equal(nativeSendStats.datagrams - sent, 40);
      // 4 sockets per upstream: one call each (node:dgram made 40 sends).
      assert.ok(nativeSendStats.calls - calls <= 4, `${nativeSendStats.calls - calls} sendmmsg calls for 40 queries`);
      const ports = new Set(up.received.map((q) => q.port));
      assert.ok(ports.size >= 1 && ports.size <= 4, `${ports.size} source ports`);
    } finally {
      h.stop();
    }
  });

  it('queries asking for answers up to 4096 bytes use sockets with small receive slots; larger ones get 64 KiB slots and whole answers', async () => {
    // TXT answers of ~6.4 KB to every query, whatever size it asked for.
    const big: Behaviour = (q, r) =>
      r.send(answer(q, { txt: Array.from({ length: 25 }, (_, i) => `${i}`.padEnd(250, 'x')) }));
    const u = await FakeUpstream.start({ behaviour: big });
    const h = forwardChain(`forward . 127.0.0.1:${u.port}`);
    try {
      const small0 = nativeOpenStats.small;
      const big0 = nativeOpenStats.big;
      // What forward returns (before the server's cap on UDP answers, which bufsize can raise):
      // for a client of 8192 the upstream's answer arrives whole over UDP.
      const whole = await h.ask('big.example.org.', QType.TXT, { edns: 8192 });
      const wire = whole.res.peekWire()!;
      assert.ok(wire.length > SMALL_SLOT_BYTES, `${wire.length} bytes`);
      const m = decodeMessage(wire);
      assert.equal(m.tc, false);
      assert.equal(m.answers.length, 25);
      assert.equal(nativeOpenStats.big - big0, 1, 'one socket with 64 KiB slots');
      // For a client of 1232 (or 512 without EDNS) an answer longer than the slot is an empty TC
      // answer, as CoreDNS gives for an upstream answer that overflows the client's size.
      for (const edns of [1232, undefined]) {
        const cut = await h.ask('big.example.org.', QType.TXT, { edns });
        const c = decodeMessage(cut.res.peekWire()!);
        assert.equal(c.rcode, Rcode.NOERROR);
        assert.equal(c.tc, true, `TC for a client of ${edns ?? 512}`);
        assert.equal(c.answers.length, 0);
        assert.equal(c.questions[0]!.name, 'big.example.org.');
        assert.equal(cut.msg.tc, true);
        assert.ok(cut.ms < 1000, `answered at once (${cut.ms.toFixed(0)} ms), not after the read timeout`);
      }
      assert.ok(nativeOpenStats.small - small0 >= 1 && nativeOpenStats.small - small0 <= 4, 'small-slot sockets');
      assert.equal(nativeOpenStats.big - big0, 1, 'no more 64 KiB sockets');
    } finally {
      h.stop();
      u.close();
    }
  });

  it('queries in flight together, answered in reverse order, each get their own answer', async () => {
    // The upstream holds 30 queries (some the same question) and answers them last first,
    // each with an address of its own; one is answered twice.
    const held: Array<{ q: Parameters<Behaviour>[0]; r: Parameters<Behaviour>[1] }> = [];
    const hold: Behaviour = (q, r) => {
      held.push({ q, r });
      if (held.length < 30) return;
      for (let i = held.length - 1; i >= 0; i--) {
        const { q: hq, r: hr } = held[i]!;
        hr.send(answer(hq, { a: [`198.51.100.${i + 1}`] }));
        if (i === 10) hr.send(answer(hq, { a: ['203.0.113.99'] }));
      }
    };
    const u = await FakeUpstream.start({ behaviour: hold });
    const h = forwardChain(`forward . 127.0.0.1:${u.port}`);
    try {
      const names = Array.from({ length: 30 }, (_, i) => `r${i % 20}.example.org.`);
      const done = await Promise.all(names.map((n, i) => h.ask(n, QType.A, { id: 1000 + i })));
      const byId = new Map(u.received.map((q, i) => [q.msg.id, { name: q.msg.questions[0]!.name, i }]));
      const seen = new Set<string>();
      for (const [i, r] of done.entries()) {
        assert.equal(r.msg.id, 1000 + i, 'the client ID put back');
        assert.equal(r.msg.questions[0]!.name, names[i]);
        assert.equal(r.msg.answers.length, 1);
        const addr = (r.msg.answers[0]!.data as { address: string }).address;
        assert.notEqual(addr, '203.0.113.99', 'a second answer to one ID is dropped');
        // The address says which upstream query it answered: one asking this client's question.
        const k = Number(addr.split('.')[3]) - 1;
        const sent = [...byId.values()].find((v) => v.i === k)!;
        assert.equal(sent.name, names[i]);
        assert.ok(!seen.has(addr), `${addr} given to two clients`);
        seen.add(addr);
      }
    } finally {
      h.stop();
      u.close();
    }
  });

  it('sockets replaced every 100 queries hand their slots on without mixing up answers in flight', async () => {
    // Answers come back after 0-4 ms in any order, each naming the query it answers, while
    // sockets keep being retired and replaced (their slot arrays reused by the new ones).
    const delayed: Behaviour = (q, r) => {
      const name = q.msg.questions[0]!.name;
      const n = Number(name.slice(1, name.indexOf('.')));
      setTimeout(() => r.send(answer(q, { a: [`10.0.${n >> 8}.${n & 255}`] })), n % 5);
    };
    const u = await FakeUpstream.start({ behaviour: delayed });
    const h = forwardChain(`forward . 127.0.0.1:${u.port}`);
    try {
      for (let wave = 0; wave < 12; wave++) {
        const ns = Array.from({ length: 50 }, (_, i) => wave * 50 + i);
        const done = await Promise.all(ns.map((n) => h.ask(`w${n}.example.org.`, QType.A)));
        for (const [i, r] of done.entries()) {
          const n = ns[i]!;
          assert.equal(r.msg.rcode, Rcode.NOERROR, `w${n}`);
          // No answer lost and waited out (a read timeout is 2 s).
          assert.ok(r.ms < 1500, `w${n} answered after ${r.ms.toFixed(0)} ms`);
          assert.deepEqual(
            r.msg.answers.map((a) => (a.data as { address: string }).address),
            [`10.0.${n >> 8}.${n & 255}`],
          );
        }
      }
      const ports = new Set(u.received.map((q) => q.port));
      assert.ok(ports.size >= 6, `${ports.size} source ports for 600 queries`);
    } finally {
      h.stop();
      u.close();
    }
  });
});
