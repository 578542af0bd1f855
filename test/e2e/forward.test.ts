// forward through the real binary: to a second clusterdns, to unbound, errors logged the
// CoreDNS way, several forward lines, and config errors.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { QType, Rcode } from '../../src/dns/constants.js';
import { dig, query } from '../helpers/dns.js';
import { startServer, type RunningServer } from '../helpers/server.js';
import { freePort } from '../helpers/ports.js';
import { answer, FakeUpstream } from '../forward/upstreams.js';
import { startUnbound, unboundAvailable, type Unbound } from '../forward/unbound.js';

describe('forward to a second clusterdns', () => {
  let upstream: RunningServer;
  let front: RunningServer;
  let forced: RunningServer;
  before(async () => {
    upstream = await startServer({
      corefile: `.:PORT {
    bind 127.0.0.1
    hosts {
        10.1.2.3 www.example.org
        fallthrough
    }
    whoami
}
`,
    });
    front = await startServer({
      corefile: `.:PORT {\n    bind 127.0.0.1\n    forward . 127.0.0.1:${upstream.port}\n}\n`,
    });
    forced = await startServer({
      corefile: `.:PORT {\n    bind 127.0.0.1\n    forward . 127.0.0.1:${upstream.port} {\n        force_tcp\n    }\n}\n`,
    });
  });
  after(async () => {
    await front?.stop();
    await forced?.stop();
    await upstream?.stop();
  });

  it("answers with the upstream's records and flags over UDP and TCP (dig)", async () => {
    for (const tcp of [false, true]) {
      const r = await dig(front.port, [...(tcp ? ['+tcp'] : []), 'WWW.example.org', 'A']);
      assert.equal(r.status, 'NOERROR');
      assert.deepEqual(r.answer, ['WWW.example.org. 3600 IN A 10.1.2.3']);
      assert.ok(r.flags.includes('aa'), 'the authoritative bit of the upstream is kept');
    }
  });

  it("asks the upstream over the client's transport, and over TCP with force_tcp (whoami shows it)", async () => {
    const udp = await query(front.port, 'who.example.org.', QType.A);
    assert.equal(udp.additionals.find((r) => r.type === QType.SRV)?.name, '_udp.who.example.org.');
    const tcp = await query(front.port, 'who.example.org.', QType.A, { tcp: true });
    assert.equal(tcp.additionals.find((r) => r.type === QType.SRV)?.name, '_tcp.who.example.org.');
    const viaForced = await query(forced.port, 'who.example.org.', QType.A);
    assert.equal(viaForced.additionals.find((r) => r.type === QType.SRV)?.name, '_tcp.who.example.org.');
  });

  it('keeps the client ID on every answer, with many queries in flight', async () => {
    const ids = Array.from({ length: 100 }, (_, i) => 1000 + i);
    const answers = await Promise.all(ids.map((id) => query(front.port, `n${id}.example.org.`, QType.A, { id })));
    assert.deepEqual(
      answers.map((a) => a.id),
      ids,
    );
    // Answers completed by one batch of upstream replies leave together, each to its own client socket.
    assert.deepEqual(
      answers.map((a) => a.questions[0]!.name),
      ids.map((id) => `n${id}.example.org.`),
    );
  });
});

describe(
  'forward to unbound',
  { skip: unboundAvailable() ? false : 'unbound is not installed (/usr/sbin/unbound)' },
  () => {
    let unbound: Unbound;
    let front: RunningServer;
    let preferUdp: RunningServer;
    const txt = Array.from(
      { length: 12 },
      (_, i) => `big.example.test. 300 IN TXT "${String(i).padStart(2, '0')}${'x'.repeat(90)}"`,
    );
    before(async () => {
      unbound = await startUnbound('example.test.', ['www.example.test. 300 IN A 192.0.2.53', ...txt]);
      front = await startServer({
        corefile: `.:PORT {\n    bind 127.0.0.1\n    forward . 127.0.0.1:${unbound.port}\n}\n`,
      });
      preferUdp = await startServer({
        corefile: `.:PORT {\n    bind 127.0.0.1\n    forward . 127.0.0.1:${unbound.port} {\n        prefer_udp\n    }\n}\n`,
      });
    });
    after(async () => {
      await front?.stop();
      await preferUdp?.stop();
      await unbound?.stop();
    });

    it("returns unbound's answer", async () => {
      const r = await dig(front.port, ['www.example.test', 'A']);
      assert.equal(r.status, 'NOERROR');
      assert.deepEqual(r.answer, ['www.example.test. 300 IN A 192.0.2.53']);
    });

    it('passes the TC bit of a too-large UDP answer through, and the full answer over TCP', async () => {
      const udp = await dig(front.port, ['+noedns', '+ignore', 'big.example.test', 'TXT']);
      assert.ok(udp.flags.includes('tc'), `flags: ${udp.flags.join(' ')}`);
      const tcp = await dig(front.port, ['+tcp', 'big.example.test', 'TXT']);
      assert.equal(tcp.answer.length, 12);
    });

    it('with prefer_udp answers a TCP client in full after retrying the truncated UDP answer over TCP', async () => {
      const r = await query(preferUdp.port, 'big.example.test.', QType.TXT, { tcp: true });
      assert.equal(r.tc, false);
      assert.equal(r.answers.length, 12);
    });
  },
);

describe('forward errors and chains through the binary', () => {
  let silent: FakeUpstream;
  let nx: FakeUpstream;
  let ok: FakeUpstream;
  before(async () => {
    silent = await FakeUpstream.start({ behaviour: () => {} });
    nx = await FakeUpstream.start({ behaviour: (q, r) => r.send(answer(q, { rcode: Rcode.NXDOMAIN })) });
    ok = await FakeUpstream.start({ behaviour: (q, r) => r.send(answer(q, { a: ['192.0.2.99'] })) });
  });
  after(async () => {
    await silent.close();
    await nx.close();
    await ok.close();
  });

  it("has the errors plugin log CoreDNS's line when no upstream answered", async () => {
    const s = await startServer({
      corefile: `.:PORT {\n    bind 127.0.0.1\n    errors\n    forward . 127.0.0.1:${silent.port} {\n        read_timeout 200ms\n        max_connect_attempts 1\n    }\n}\n`,
    });
    try {
      const r = await query(s.port, 'example.org.', QType.A);
      assert.equal(r.rcode, Rcode.SERVFAIL);
      await s.waitFor(
        /\[ERROR\] plugin\/errors: 2 example\.org\. A: read udp 127\.0\.0\.1:\d+->127\.0\.0\.1:\d+: i\/o timeout/,
        3000,
      );
    } finally {
      await s.stop();
    }
  });

  it('runs several forward lines in the order written, `next` passing NXDOMAIN on, others to whoami', async () => {
    const s = await startServer({
      corefile: `.:PORT {
    bind 127.0.0.1
    forward example.org 127.0.0.1:${nx.port} {
        next NXDOMAIN
    }
    forward example.org 127.0.0.1:${ok.port}
    whoami
}
`,
    });
    try {
      const r = await query(s.port, 'www.example.org.', QType.A);
      assert.equal(r.rcode, Rcode.NOERROR);
      assert.deepEqual(
        r.answers.map((a) => (a.data as { address: string }).address),
        ['192.0.2.99'],
      );
      const other = await query(s.port, 'www.example.com.', QType.A);
      assert.ok(
        other.additionals.some((a) => a.type === QType.SRV),
        'whoami answered a name outside FROM',
      );
    } finally {
      await s.stop();
    }
  });

  it('exports the forward metrics on /metrics, summed over two worker processes', async () => {
    const mport = await freePort();
    const s = await startServer({
      corefile: `.:PORT {\n    bind 127.0.0.1\n    prometheus 127.0.0.1:${mport}\n    forward . 127.0.0.1:${ok.port}\n}\n`,
      workers: 2,
    });
    try {
      for (let i = 0; i < 20; i++) await query(s.port, `m${i}.example.org.`, QType.A);
      const text = await (await fetch(`http://127.0.0.1:${mport}/metrics`)).text();
      const to = `127.0.0.1:${ok.port}`;
      assert.match(
        text,
        new RegExp(
          `coredns_proxy_request_duration_seconds_count\\{proxy_name="forward",to="${to}",rcode="NOERROR"\\} 20\\b`,
        ),
      );
      assert.match(text, new RegExp(`coredns_forward_requests_total\\{to="${to}"\\} 20\\b`));
      assert.match(
        text,
        new RegExp(`coredns_proxy_conn_cache_(hits|misses)_total\\{proxy_name="forward",to="${to}",proto="udp"\\}`),
      );
      assert.match(text, /coredns_forward_max_concurrent_rejects_total 0/);
    } finally {
      await s.stop();
    }
  });

  it('refuses to start on a bad forward option, naming file and line', async () => {
    const s = await startServer({
      corefile: `.:PORT {\n    forward . 127.0.0.1 {\n        bogus 1\n    }\n}\n`,
      noWait: true,
    });
    const code = await new Promise<number | null>((r) => s.proc.on('exit', (c) => r(c)));
    assert.equal(code, 1);
    assert.match(s.output(), /Corefile:3 - Error during parsing: forward: unknown property 'bogus'/);
  });
});
