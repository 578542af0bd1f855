// The server core as a client sees it: routing, error rcodes, EDNS, truncation, TCP.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { startServer, type RunningServer } from '../helpers/server.js';
import { buildQuery, dig, query, sendTcp, sendUdp } from '../helpers/dns.js';
import { decodeMessage } from '../../src/dns/message.js';
import { QClass, QType, Rcode } from '../../src/dns/constants.js';

const bigHosts = Array.from({ length: 100 }, (_, i) => `10.1.${i >> 8}.${i & 255} big.example.org`).join('\n');

describe('server core', () => {
  let s: RunningServer;
  before(async () => {
    s = await startServer({
      corefile: `
example.org:PORT {
    bind 127.0.0.1
    whoami
}
sub.example.org:PORT {
    bind 127.0.0.1
    hosts big.hosts {
        10.0.0.7 www.sub.example.org
        fallthrough
    }
}
empty.test:PORT {
    bind 127.0.0.1
    hosts {
        fallthrough
    }
}
`,
      files: { 'big.hosts': bigHosts.replaceAll('example.org', 'sub.example.org') },
    });
  });
  after(async () => {
    await s.stop();
  });

  test('the block with the longest matching zone answers', async () => {
    const a = await query(s.port, 'www.sub.example.org.', QType.A);
    assert.equal(a.answers[0]?.type, QType.A);
    assert.deepEqual(a.answers[0]?.data, { address: '10.0.0.7' });
    const w = await query(s.port, 'other.example.org.', QType.A);
    // whoami puts the client in the additional section
    assert.equal(w.answers.length, 0);
    assert.deepEqual(w.additionals.find((r) => r.type === QType.A)?.data, { address: '127.0.0.1' });
  });

  test('a name no block serves is REFUSED', async () => {
    const r = await query(s.port, 'example.com.', QType.A);
    assert.equal(r.rcode, Rcode.REFUSED);
    assert.equal(r.questions[0]?.name, 'example.com.');
  });

  test('a class other than IN is REFUSED', async () => {
    const r = await query(s.port, 'www.sub.example.org.', QType.A, { qclass: QClass.CH });
    assert.equal(r.rcode, Rcode.REFUSED);
  });

  test('an opcode other than QUERY gets NOTIMP', async () => {
    const q = buildQuery('www.sub.example.org.', QType.A);
    q.writeUInt16BE((q.readUInt16BE(2) & ~0x7800) | (2 << 11), 2); // STATUS
    const r = decodeMessage(await sendUdp(s.port, q));
    assert.equal(r.rcode, Rcode.NOTIMP);
    assert.equal(r.id, q.readUInt16BE(0));
  });

  test('a malformed message with a readable header gets FORMERR with its ID', async () => {
    const q = buildQuery('www.sub.example.org.', QType.A).subarray(0, 20);
    const r = decodeMessage(await sendUdp(s.port, Buffer.from(q)));
    assert.equal(r.rcode, Rcode.FORMERR);
    assert.equal(r.id, q.readUInt16BE(0));
    assert.equal(r.qr, true);
  });

  test('a message with QR set is dropped', async () => {
    const q = buildQuery('www.sub.example.org.', QType.A);
    q[2] = q[2]! | 0x80;
    await assert.rejects(sendUdp(s.port, q, 400), /timeout/);
  });

  test('the end of the chain without an answer is SERVFAIL', async () => {
    const r = await query(s.port, 'nothing.empty.test.', QType.A);
    assert.equal(r.rcode, Rcode.SERVFAIL);
  });

  test('the OPT record is echoed with the DO bit, and absent when the query had none', async () => {
    const withOpt = await query(s.port, 'www.sub.example.org.', QType.A, { edns: 1232, do: true });
    assert.equal(withOpt.edns?.do, true);
    assert.equal(withOpt.edns?.udpSize, 1232);
    const without = await query(s.port, 'www.sub.example.org.', QType.A);
    assert.equal(without.edns, null);
  });

  test('EDNS version 1 gets BADVERS', async () => {
    const q = buildQuery('www.sub.example.org.', QType.A, { edns: 1232 });
    // The OPT TTL's second byte is the version; the OPT record ends the message.
    q[q.length - 5] = 1;
    const r = decodeMessage(await sendUdp(s.port, q));
    assert.equal(r.rcode, Rcode.BADVERS);
    assert.equal(r.edns?.version, 0);
  });

  test('a UDP answer larger than 512 octets without EDNS is truncated with TC set', async () => {
    const r = await query(s.port, 'big.sub.example.org.', QType.A);
    assert.equal(r.tc, true);
    const raw = await sendUdp(s.port, buildQuery('big.sub.example.org.', QType.A));
    assert.ok(raw.length <= 512, `reply is ${raw.length} octets`);
    // EDNS 4096: cut at the default cap on UDP answers (1232 octets), as many records as fit.
    const biggerRaw = await sendUdp(s.port, buildQuery('big.sub.example.org.', QType.A, { edns: 4096 }));
    assert.ok(biggerRaw.length > 1100 && biggerRaw.length <= 1232, `reply is ${biggerRaw.length} octets`);
    const bigger = decodeMessage(biggerRaw);
    assert.equal(bigger.tc, true);
    assert.ok(bigger.answers.length > 60 && bigger.answers.length < 100, `${bigger.answers.length} records`);
  });

  test('dig retries a truncated answer over TCP and gets every record', async () => {
    const noTcp = await dig(s.port, ['+bufsize=512', '+ignore', 'big.sub.example.org', 'A']);
    assert.ok(noTcp.flags.includes('tc'), noTcp.raw);
    const full = await dig(s.port, ['+bufsize=512', 'big.sub.example.org', 'A']);
    assert.equal(full.status, 'NOERROR');
    assert.equal(full.answer.length, 100);
    assert.match(full.raw, /\(TCP\)/);
  });

  test('TCP carries several pipelined queries on one connection', async () => {
    const qs = [
      buildQuery('www.sub.example.org.', QType.A, { id: 1 }),
      buildQuery('big.sub.example.org.', QType.A, { id: 2 }),
      buildQuery('x.example.org.', QType.A, { id: 3 }),
      buildQuery('example.com.', QType.A, { id: 4 }),
    ];
    const replies = (await sendTcp(s.port, qs)).map((b) => decodeMessage(b));
    assert.deepEqual(replies.map((r) => r.id).sort(), [1, 2, 3, 4]);
    const big = replies.find((r) => r.id === 2)!;
    assert.equal(big.answers.length, 100);
    assert.equal(big.tc, false);
    assert.equal(replies.find((r) => r.id === 4)!.rcode, Rcode.REFUSED);
  });

  test('a silent or half-open TCP client does not stop others being served', async () => {
    const silent = net.connect({ port: s.port, host: '127.0.0.1' });
    const halfFrame = net.connect({ port: s.port, host: '127.0.0.1' });
    await new Promise((r) => halfFrame.on('connect', r));
    halfFrame.write(Buffer.from([0xff, 0xff, 0x00, 0x01])); // claims 65535 octets, sends 2
    const r = await query(s.port, 'www.sub.example.org.', QType.A, { tcp: true });
    assert.equal(r.answers.length, 1);
    const u = await query(s.port, 'www.sub.example.org.', QType.A);
    assert.equal(u.answers.length, 1);
    silent.destroy();
    halfFrame.destroy();
  });

  test('TCP frames split anywhere (one octet at a time, or two queries across reads) are answered', async () => {
    const sock = net.connect({ port: s.port, host: '127.0.0.1' });
    await new Promise((r) => sock.on('connect', r));
    sock.setNoDelay(true);
    const frames = [1, 2].map((id) => {
      const q = buildQuery('www.sub.example.org.', QType.A, { id });
      return Buffer.concat([Buffer.from([q.length >> 8, q.length & 255]), q]);
    });
    let got = Buffer.alloc(0);
    const replies = new Promise<number[]>((resolve) =>
      sock.on('data', (d: Buffer) => {
        got = Buffer.concat([got, d]);
        const ids: number[] = [];
        for (
          let at = 0;
          at + 2 <= got.length && at + 2 + got.readUInt16BE(at) <= got.length;
          at += 2 + got.readUInt16BE(at)
        )
          ids.push(got.readUInt16BE(at + 2));
        if (ids.length === 2) resolve(ids);
      }),
    );
    // The first query one octet at a time, well within the 3 s deadline; the second split
    // across two writes with its length prefix cut in half.
    for (const b of frames[0]!) {
      sock.write(Buffer.from([b]));
      await new Promise((r) => setTimeout(r, 5));
    }
    sock.write(frames[1]!.subarray(0, 1));
    await new Promise((r) => setTimeout(r, 20));
    sock.write(frames[1]!.subarray(1));
    assert.deepEqual((await replies).sort(), [1, 2]);
    sock.destroy();
  });

  test('a frame shorter than a DNS header closes the connection', async () => {
    const sock = net.connect({ port: s.port, host: '127.0.0.1' });
    await new Promise((r) => sock.on('connect', r));
    const closed = new Promise<void>((r) => sock.on('close', () => r()));
    sock.on('error', () => {});
    sock.write(Buffer.from([0x00, 0x03, 1, 2, 3]));
    await closed;
  });

  test('the answer keeps the letter case of the question', async () => {
    const r = await query(s.port, 'WwW.Sub.Example.ORG.', QType.A);
    assert.equal(r.questions[0]?.name, 'WwW.Sub.Example.ORG.');
    assert.equal(r.answers[0]?.name, 'WwW.Sub.Example.ORG.');
  });
});

describe('TCP limits', () => {
  test(
    'a TCP connection that sends nothing is closed after 3 s, one that asked after the 10 s idle timeout (CoreDNS)',
    { timeout: 30000 },
    async () => {
      const s = await startServer({ corefile: `.:PORT {\n bind 127.0.0.1\n whoami\n}\n` });
      try {
        const closedAfter = (sock: net.Socket, t0: number) =>
          new Promise<number>((r) => sock.on('close', () => r(Date.now() - t0)));
        const silent = net.connect({ port: s.port, host: '127.0.0.1' });
        silent.on('error', () => {});
        const silentClosed = closedAfter(silent, Date.now());
        const asking = net.connect({ port: s.port, host: '127.0.0.1' });
        asking.on('error', () => {});
        await new Promise((r) => asking.on('connect', r));
        const q = buildQuery('whoami.example.', QType.A, { id: 5 });
        const answered = new Promise<number>((r) => asking.once('data', () => r(Date.now())));
        asking.write(Buffer.concat([Buffer.from([0, q.length]), q]));
        const askingClosed = closedAfter(asking, await answered);
        const s1 = await silentClosed;
        assert.ok(s1 >= 2500 && s1 < 8000, `silent connection closed after ${s1} ms`);
        const s2 = await askingClosed;
        assert.ok(s2 >= 9000 && s2 < 20000, `connection closed ${s2} ms after its answer`);
      } finally {
        await s.stop();
      }
    },
  );
});

describe('bursts and connection caps', () => {
  test('a burst of 300 UDP queries sent at once is answered in full', async () => {
    const s = await startServer({ corefile: `.:PORT {\n bind 127.0.0.1\n hosts {\n 10.0.0.1 burst.test\n }\n}\n` });
    try {
      const dgram = await import('node:dgram');
      const sock = dgram.createSocket('udp4');
      const ids = new Set<number>();
      sock.on('message', (m) => ids.add(m.readUInt16BE(0)));
      await new Promise<void>((r) => sock.bind(0, '127.0.0.1', () => r()));
      sock.setRecvBufferSize(4 * 1024 * 1024);
      const qs = Array.from({ length: 300 }, (_, i) => buildQuery('burst.test.', QType.A, { id: i }));
      for (const q of qs) sock.send(q, s.port, '127.0.0.1');
      const t0 = Date.now();
      while (ids.size < 300 && Date.now() - t0 < 3000) await new Promise((r) => setTimeout(r, 20));
      sock.close();
      assert.equal(ids.size, 300);
    } finally {
      await s.stop();
    }
  });

  test(
    'TCP connections over the cap are refused while existing clients keep being served',
    { timeout: 60000 },
    async () => {
      const s = await startServer({ corefile: `.:PORT {\n bind 127.0.0.1\n hosts {\n 10.0.0.1 cap.test\n }\n}\n` });
      const socks: net.Socket[] = [];
      try {
        const first = net.connect({ port: s.port, host: '127.0.0.1' });
        await new Promise((r) => first.on('connect', r));
        socks.push(first);
        const q0 = buildQuery('cap.test.', QType.A, { id: 76 });
        const answered = new Promise((r) => first.once('data', r));
        // A connection that asked once is kept for the idle timeout; one that never asks, 3 s.
        first.write(Buffer.concat([Buffer.from([0, q0.length]), q0]));
        await answered;
        let closedEarly = 0;
        let opened = 0;
        for (let i = 0; i < 1100; i++) {
          // From 11 addresses, 100 each: the per-address cap (100) is not what refuses them.
          const c = net.connect({ port: s.port, host: '127.0.0.1', localAddress: `127.0.0.${2 + (i % 11)}` });
          let at = 0;
          c.on('error', () => {});
          c.on('connect', () => {
            opened++;
            at = Date.now();
          });
          // Refused at once, not closed by the 3 s deadline of a connection that sends nothing.
          c.on('close', () => {
            if (at > 0 && Date.now() - at < 1500) closedEarly++;
          });
          socks.push(c);
        }
        // Wait until the server has accepted (and kept or dropped) them all; slow on a busy machine.
        const until = Date.now() + 20000;
        while (Date.now() < until && (opened < 1100 || closedEarly < 100)) await new Promise((r) => setTimeout(r, 100));
        assert.ok(closedEarly >= 90, `only ${closedEarly} of 1,100 extra connections were refused (cap 1000)`);
        // The first client still gets answers on its connection.
        const q = buildQuery('cap.test.', QType.A, { id: 77 });
        const frame = Buffer.concat([Buffer.from([0, q.length]), q]);
        const reply = new Promise<Buffer>((resolve) => first.once('data', (d: Buffer) => resolve(d)));
        first.write(frame);
        const d = await reply;
        assert.equal(decodeMessage(d.subarray(2)).id, 77);
      } finally {
        for (const c of socks) c.destroy();
        await s.stop();
      }
    },
  );
});
