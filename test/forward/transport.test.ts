// How forward talks to upstreams over real sockets: IDs, source ports, answer matching,
// truncation, transports, EDNS size, pooled and pipelined TCP, and misbehaving servers.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { QType, Rcode } from '../../src/dns/constants.js';
import { answer, answerAll, FakeUpstream, sleep, waitUntil, type Received } from './upstreams.js';
import { forwardChain } from './harness.js';
import { freePort } from '../helpers/ports.js';

const A = QType.A;

function ips(m: { answers: Array<{ data: unknown }> }): string[] {
  return m.answers.map((r) => (r.data as { address: string }).address);
}

describe('forward over UDP', () => {
  let up: FakeUpstream;
  before(async () => {
    up = await FakeUpstream.start();
  });
  after(() => up.close());

  it("returns the upstream's answer with the client's ID and the question as the client wrote it", async () => {
    up.behaviour = answerAll;
    up.reset();
    const h = forwardChain(`forward . 127.0.0.1:${up.port}`);
    try {
      const r = await h.ask('WwW.Example.ORG.', A, { id: 0x1234 });
      assert.equal(r.msg.id, 0x1234);
      assert.equal(r.msg.rcode, Rcode.NOERROR);
      assert.equal(r.msg.questions[0]!.name, 'WwW.Example.ORG.');
      assert.deepEqual(ips(r.msg), ['192.0.2.1']);
      assert.equal(r.res.plugin, 'forward');
      assert.ok(r.res.hasWire, 'the answer is passed on as bytes, not re-encoded');
      assert.equal(up.queries.length, 1);
      assert.equal(up.queries[0]!.proto, 'udp');
      assert.equal(up.queries[0]!.msg.questions[0]!.name, 'WwW.Example.ORG.');
    } finally {
      h.stop();
    }
  });

  it('sends every query with a fresh random ID and moves to new random source ports', async () => {
    up.behaviour = answerAll;
    up.reset();
    const h = forwardChain(`forward . 127.0.0.1:${up.port}`);
    try {
      for (let i = 0; i < 300; i++) await h.ask(`q${i}.example.org.`, A, { id: 7 });
      await sleep(1100);
      await h.ask('late.example.org.', A, { id: 7 });
      const ids = new Set(up.queries.map((q) => q.msg.id));
      const ports = new Set(up.queries.map((q) => q.port));
      assert.ok(ids.size >= 290, `only ${ids.size} distinct IDs in 301 queries`);
      assert.ok(!up.queries.every((q) => q.msg.id === 7));
      assert.ok(ports.size >= 3, `only ${ports.size} source ports`);
      const firstPorts = new Set(up.queries.slice(0, 300).map((q) => q.port));
      assert.ok(!firstPorts.has(up.queries[300]!.port), 'a socket older than a second is not reused');
    } finally {
      h.stop();
    }
  });

  it('never accepts spoofed answers: other source port, wrong ID, other question, not a response, garbage', async () => {
    up.reset();
    up.behaviour = (q: Received, r) => {
      r.spoof(answer(q, { a: ['6.6.6.1'] })); // right ID and question, wrong source port
      r.send(answer(q, { a: ['6.6.6.2'], id: (q.msg.id + 1) & 0xffff }));
      r.send(answer(q, { a: ['6.6.6.3'], qname: 'evil.example.org.' }));
      const notResponse = answer(q, { a: ['6.6.6.4'] });
      notResponse[2] = notResponse[2]! & 0x7f;
      r.send(notResponse);
      r.send(Buffer.from('garbage that is not DNS at all'));
      const idOnly = Buffer.alloc(12);
      idOnly.writeUInt16BE(q.msg.id, 0);
      r.send(idOnly); // header only: no question
      setTimeout(() => r.send(answer(q, { a: ['192.0.2.77'] })), 50);
    };
    const h = forwardChain(`forward . 127.0.0.1:${up.port}`);
    try {
      for (let i = 0; i < 5; i++) {
        const r = await h.ask(`spoof${i}.example.org.`, A);
        assert.deepEqual(ips(r.msg), ['192.0.2.77']);
      }
    } finally {
      h.stop();
    }
  });

  it('answers SERVFAIL when only wrong-ID answers come back, after the read timeout', async () => {
    up.reset();
    up.behaviour = (q, r) => r.send(answer(q, { a: ['6.6.6.6'], id: (q.msg.id ^ 0x5a5a) & 0xffff }));
    const h = forwardChain(`forward . 127.0.0.1:${up.port} {\n read_timeout 150ms\n max_connect_attempts 1\n}`);
    try {
      const r = await h.ask('wrongid.example.org.', A);
      assert.equal(r.msg.rcode, Rcode.SERVFAIL);
      assert.ok(r.ms >= 140, `answered after ${r.ms} ms`);
      assert.match(r.res.error ?? '', /^read udp 127\.0\.0\.1:\d+->127\.0\.0\.1:\d+: i\/o timeout$/);
    } finally {
      h.stop();
    }
  });

  it('fails a try at once when the right ID and question come with records that do not parse', async () => {
    up.reset();
    up.behaviour = (q, r) => {
      const bad = answer(q, {});
      bad.writeUInt16BE(3, 6); // claims three answers it does not have
      r.send(bad);
    };
    const h = forwardChain(`forward . 127.0.0.1:${up.port} {\n read_timeout 1s\n max_connect_attempts 1\n}`);
    try {
      const r = await h.ask('malformed.example.org.', A);
      assert.equal(r.msg.rcode, Rcode.SERVFAIL);
      assert.ok(r.ms < 500, `took ${r.ms} ms`);
      assert.match(r.res.error ?? '', /overflow unpacking/);
    } finally {
      h.stop();
    }
  });

  it('passes a truncated UDP answer on with TC set (the client retries over TCP)', async () => {
    up.reset();
    up.behaviour = (q, r) => r.send(answer(q, { tc: true }));
    const h = forwardChain(`forward . 127.0.0.1:${up.port}`);
    try {
      const r = await h.ask('big.example.org.', QType.TXT);
      assert.equal(r.msg.tc, true);
      assert.deepEqual(
        up.queries.map((q) => q.proto),
        ['udp'],
      );
    } finally {
      h.stop();
    }
  });

  it('turns an answer that sets TC and breaks off mid-record into an empty truncated answer', async () => {
    up.reset();
    up.behaviour = (q, r) => {
      const full = answer(q, { txt: ['x'.repeat(200), 'y'.repeat(200)], tc: true });
      r.send(full.subarray(0, full.length - 100));
    };
    const h = forwardChain(`forward . 127.0.0.1:${up.port}`);
    try {
      const r = await h.ask('cut.example.org.', QType.TXT);
      assert.equal(r.msg.tc, true);
      assert.equal(r.msg.rcode, Rcode.NOERROR);
      assert.equal(r.msg.answers.length, 0);
    } finally {
      h.stop();
    }
  });

  it('with prefer_udp asks over UDP even for a TCP client, and retries a truncated answer over TCP', async () => {
    up.reset();
    up.behaviour = (q, r) => r.send(q.proto === 'udp' ? answer(q, { tc: true }) : answer(q, { txt: ['complete'] }));
    const h = forwardChain(`forward . 127.0.0.1:${up.port} {\n prefer_udp\n}`);
    try {
      const r = await h.ask('retry.example.org.', QType.TXT, { tcp: true });
      assert.equal(r.msg.tc, false);
      assert.equal(r.msg.answers.length, 1);
      assert.deepEqual(
        up.queries.map((q) => q.proto),
        ['udp', 'tcp'],
      );
    } finally {
      h.stop();
    }
  });

  it("uses the client's transport by default and TCP for everyone with force_tcp", async () => {
    up.behaviour = answerAll;
    up.reset();
    const plain = forwardChain(`forward . 127.0.0.1:${up.port}`);
    const forced = forwardChain(`forward . 127.0.0.1:${up.port} {\n force_tcp\n prefer_udp\n}`);
    try {
      await plain.ask('a.example.org.', A);
      await plain.ask('b.example.org.', A, { tcp: true });
      await forced.ask('c.example.org.', A);
      assert.deepEqual(
        up.queries.map((q) => q.proto),
        ['udp', 'tcp', 'tcp'],
      );
    } finally {
      plain.stop();
      forced.stop();
    }
  });

  it("passes the client's EDNS buffer on, raised to at least 512", async () => {
    up.behaviour = answerAll;
    up.reset();
    const h = forwardChain(`forward . 127.0.0.1:${up.port}`);
    try {
      await h.ask('e1.example.org.', A, { edns: 1232, do: true });
      await h.ask('e2.example.org.', A, { edns: 100 });
      await h.ask('e3.example.org.', A);
      const seen = up.queries.map((q) => (q.msg.edns ? [q.msg.edns.udpSize, q.msg.edns.do] : null));
      assert.deepEqual(seen, [[1232, true], [512, false], null]);
    } finally {
      h.stop();
    }
  });

  it('fails fast with "connection refused" when nothing listens on the upstream port', async () => {
    const port = await freePort();
    const h = forwardChain(`forward . 127.0.0.1:${port} {\n max_connect_attempts 1\n}`);
    try {
      const r = await h.ask('refused.example.org.', A);
      assert.equal(r.msg.rcode, Rcode.SERVFAIL);
      assert.ok(r.ms < 500, `took ${r.ms} ms`);
      assert.match(r.res.error ?? '', /^read udp .*: connection refused$/);
    } finally {
      h.stop();
    }
  });
});

describe('forward over TCP', () => {
  let up: FakeUpstream;
  before(async () => {
    up = await FakeUpstream.start();
  });
  after(() => up.close());

  it('pipelines concurrent queries on one pooled connection and matches answers given in any order', async () => {
    up.reset();
    up.accepted = 0;
    const held: Array<() => void> = [];
    up.behaviour = (q, r) => {
      const n = Number(/^n(\d+)\./.exec(q.msg.questions[0]!.name)?.[1]);
      held.push(() => r.send(answer(q, { a: [`10.0.${n >> 8}.${n & 255}`] })));
      if (held.length === 50) for (const f of held.splice(0).reverse()) f();
    };
    const h = forwardChain(`forward . 127.0.0.1:${up.port} {\n force_tcp\n}`);
    try {
      const answers = await Promise.all(Array.from({ length: 50 }, (_, i) => h.ask(`n${i}.example.org.`, A)));
      answers.forEach((r, i) => assert.deepEqual(ips(r.msg), [`10.0.${i >> 8}.${i & 255}`]));
      assert.equal(up.accepted, 1, 'all 50 queries shared one connection');
    } finally {
      h.stop();
    }
  });

  it('takes answers however the upstream splits them: a length prefix over two reads, 40 KB over many, several in one', async () => {
    up.reset();
    up.accepted = 0;
    const held: Array<{ q: Received; send(b: Buffer): void; raw(b: Buffer, close: boolean): void }> = [];
    const frame = (b: Buffer) => Buffer.concat([Buffer.from([b.length >> 8, b.length & 255]), b]);
    const big = Array.from({ length: 160 }, (_, i) => `${String(i).padStart(3, '0')}${'x'.repeat(247)}`);
    up.behaviour = (q, r) => {
      held.push({ q, ...r });
      if (held.length < 3) return;
      const byName = (n: string) => held.find((h) => h.q.msg.questions[0]!.name === n)!.q;
      const wire = Buffer.concat([
        frame(answer(byName('s1.example.org.'), { a: ['10.0.0.1'] })),
        frame(answer(byName('big.example.org.'), { txt: big })),
        frame(answer(byName('s2.example.org.'), { a: ['10.0.0.2'] })),
      ]);
      const writer = held[0]!;
      // One octet, then the rest of the first answer and three of the next, then 1,000 at a time.
      const cuts = [1, wire.readUInt16BE(0) + 2 + 3];
      while (cuts[cuts.length - 1]! < wire.length) cuts.push(Math.min(wire.length, cuts[cuts.length - 1]! + 1000));
      void (async () => {
        let from = 0;
        for (const to of cuts) {
          writer.raw(wire.subarray(from, to), false);
          from = to;
          await sleep(2);
        }
      })();
    };
    const h = forwardChain(`forward . 127.0.0.1:${up.port} {\n force_tcp\n}`);
    try {
      const [s1, b, s2] = await Promise.all([
        h.ask('s1.example.org.', A),
        h.ask('big.example.org.', QType.TXT, { tcp: true }),
        h.ask('s2.example.org.', A),
      ]);
      assert.deepEqual(ips(s1.msg), ['10.0.0.1']);
      assert.deepEqual(ips(s2.msg), ['10.0.0.2']);
      assert.deepEqual(
        b.msg.answers.map((r) => (r.data as { texts: string[] }).texts[0]),
        big,
        'the 40 KB answer arrives whole and in order',
      );
      assert.equal(up.accepted, 1);
    } finally {
      h.stop();
    }
  });

  it('reuses an idle connection and closes it once it has been idle for `expire`', async () => {
    up.behaviour = answerAll;
    up.reset();
    up.accepted = 0;
    const h = forwardChain(`forward . 127.0.0.1:${up.port} {\n force_tcp\n expire 300ms\n}`);
    try {
      await h.ask('r1.example.org.', A);
      await sleep(100);
      await h.ask('r2.example.org.', A);
      assert.equal(up.accepted, 1);
      assert.equal(h.forwards[0]!.opts.upstreams[0]!.openConnections, 1);
      await waitUntil(() => up.open.size === 0, 2000, 'the idle connection to be closed');
      assert.equal(h.forwards[0]!.opts.upstreams[0]!.openConnections, 0);
      await h.ask('r3.example.org.', A);
      assert.equal(up.accepted, 2);
    } finally {
      h.stop();
    }
  });

  it('retries on a new connection when the upstream closes a pooled one instead of answering', async () => {
    up.reset();
    up.accepted = 0;
    const served = new WeakMap<object, number>();
    up.behaviour = (q, r) => {
      const n = (served.get(q.conn!) ?? 0) + 1;
      served.set(q.conn!, n);
      if (n === 1) r.send(answer(q, { a: ['192.0.2.9'] }));
      else r.raw(Buffer.alloc(0), true); // second query on a connection: hang up
    };
    const h = forwardChain(`forward . 127.0.0.1:${up.port} {\n force_tcp\n max_connect_attempts 1\n}`);
    try {
      await h.ask('c1.example.org.', A);
      const r = await h.ask('c2.example.org.', A);
      assert.deepEqual(ips(r.msg), ['192.0.2.9']);
      assert.equal(up.accepted, 2);
    } finally {
      h.stop();
    }
  });

  it('answers SERVFAIL at once when a fresh connection is closed mid-answer', async () => {
    up.reset();
    up.behaviour = (q, r) => {
      const full = answer(q, { a: ['192.0.2.1'] });
      const frame = Buffer.alloc(2 + full.length);
      frame.writeUInt16BE(full.length, 0);
      full.copy(frame, 2);
      r.raw(frame.subarray(0, 10), true);
    };
    const h = forwardChain(`forward . 127.0.0.1:${up.port} {\n force_tcp\n max_connect_attempts 1\n}`);
    try {
      const r = await h.ask('half.example.org.', A);
      assert.equal(r.msg.rcode, Rcode.SERVFAIL);
      assert.ok(r.ms < 500, `took ${r.ms} ms`);
      assert.match(r.res.error ?? '', /^read tcp 127\.0\.0\.1:\d+->127\.0\.0\.1:\d+: EOF$/);
    } finally {
      h.stop();
    }
  });

  it('answers FORMERR when a TCP answer carries our ID but another question, as CoreDNS does', async () => {
    up.reset();
    up.behaviour = (q, r) => r.send(answer(q, { a: ['6.6.6.6'], qname: 'other.example.org.' }));
    const h = forwardChain(`forward . 127.0.0.1:${up.port} {\n force_tcp\n}`);
    try {
      const r = await h.ask('asked.example.org.', A);
      assert.equal(r.msg.rcode, Rcode.FORMERR);
      assert.equal(r.msg.questions[0]!.name, 'asked.example.org.');
      assert.equal(r.msg.answers.length, 0);
    } finally {
      h.stop();
    }
  });

  it('answers SERVFAIL with "connection refused" when the TCP port is closed', async () => {
    const port = await freePort();
    const h = forwardChain(`forward . 127.0.0.1:${port} {\n force_tcp\n max_connect_attempts 1\n}`);
    try {
      const r = await h.ask('closed.example.org.', A);
      assert.equal(r.msg.rcode, Rcode.SERVFAIL);
      assert.equal(r.res.error, `dial tcp 127.0.0.1:${port}: connect: connection refused`);
    } finally {
      h.stop();
    }
  });
});

describe('forward to an IPv6 upstream', () => {
  it('asks [::1]:PORT over UDP and TCP, labelling it as Go would', async () => {
    let up: FakeUpstream;
    try {
      up = await FakeUpstream.start({ host: '::1' });
    } catch {
      return; // no IPv6 loopback here
    }
    const h = forwardChain(`forward . [::1]:${up.port}`);
    try {
      assert.deepEqual(ips((await h.ask('v6.example.org.', A)).msg), ['192.0.2.1']);
      assert.deepEqual(ips((await h.ask('v6.example.org.', A, { tcp: true })).msg), ['192.0.2.1']);
      assert.deepEqual(
        up.queries.map((q) => [q.proto, q.address]),
        [
          ['udp', '::1'],
          ['tcp', '::1'],
        ],
      );
      assert.equal(h.forwards[0]!.opts.upstreams[0]!.addr, `[::1]:${up.port}`);
    } finally {
      h.stop();
      await up.close();
    }
  });
});
