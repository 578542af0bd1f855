// The native batched UDP addon (native/udpbatch.c) on its own, over real loopback sockets:
// batches, truncation, IPv6, close inside a batch, errors, adopting a dgram socket,
// SO_REUSEPORT spreading and steering by question name, and no descriptor leak. Skipped where the addon was not built (the
// server then uses node:dgram, which test/e2e/native-udp.test.ts covers).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import { existsSync, readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import {
  DEFAULT_ADDON_PATH,
  FLAG_TRUNCATED,
  META_INTS,
  OUT_INTS,
  type UdpBatchAddon,
  type UdpBatchSocket,
} from '../../src/server/udp-native.js';
import { shardOf, STEER_PREFIX } from '../../src/server/shards.js';

const built = existsSync(DEFAULT_ADDON_PATH);
const skip = built ? false : `native addon not built (${DEFAULT_ADDON_PATH}); the dgram fallback is tested instead`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The addon itself, whatever CLUSTERDNS_NATIVE_UDP says (that switch is for the server). */
function addon(): UdpBatchAddon {
  const a = createRequire(import.meta.url)(DEFAULT_ADDON_PATH) as UdpBatchAddon;
  assert.equal(a.META_INTS, META_INTS);
  assert.equal(a.OUT_INTS, OUT_INTS);
  return a;
}

/** An echo server on the addon: every datagram goes back to its sender, in the batch's sendmmsg. */
function echo(a: UdpBatchAddon, s: UdpBatchSocket, onBatch?: (n: number) => void): { batches: number[] } {
  const meta = new Int32Array(s.meta);
  const inBuf = Buffer.from(s.in);
  const out = new Uint8Array(s.out);
  const ometa = new Int32Array(s.outMeta);
  const batches: number[] = [];
  a.start(s, (n) => {
    batches.push(n);
    let off = 0;
    for (let i = 0; i < n; i++) {
      const len = meta[i * META_INTS]!;
      out.set(inBuf.subarray(i * s.slotSize, i * s.slotSize + len), off);
      ometa[i * OUT_INTS] = off;
      ometa[i * OUT_INTS + 1] = len;
      ometa[i * OUT_INTS + 2] = i;
      off += len;
    }
    onBatch?.(n);
    return n;
  });
  return { batches };
}

async function client(type: 'udp4' | 'udp6' = 'udp4', host = '127.0.0.1'): Promise<dgram.Socket> {
  const c = dgram.createSocket({ type, recvBufferSize: 4 << 20 });
  await new Promise<void>((r) => c.bind(0, host, () => r()));
  return c;
}

async function collect(c: dgram.Socket, want: number, ms: number): Promise<Buffer[]> {
  const got: Buffer[] = [];
  await new Promise<void>((resolve) => {
    const t = setTimeout(resolve, ms);
    c.on('message', (m) => {
      got.push(m);
      if (got.length >= want) {
        clearTimeout(t);
        resolve();
      }
    });
  });
  return got;
}

test('a burst of 500 datagrams is read in batches and every one is echoed by sendmmsg', { skip }, async () => {
  const a = addon();
  const s = a.open({ address: '127.0.0.1', port: 0, ipv6: false, recvBuffer: 4 << 20 });
  const { batches } = echo(a, s);
  const c = await client();
  try {
    const sent = new Set<string>();
    // Sent while the server's loop is busy here, so they queue up and come out in batches.
    for (let i = 0; i < 500; i++) {
      const p = Buffer.from(`query-${i}`);
      sent.add(p.toString());
      c.send(p, s.port, '127.0.0.1');
    }
    const got = await collect(c, 500, 5000);
    assert.equal(got.length, 500);
    assert.deepEqual(new Set(got.map((b) => b.toString())), sent);
    assert.ok(batches.length < 500, `${batches.length} batches for 500 datagrams`);
    assert.ok(Math.max(...batches) > 1);
    const [received, nBatches, sentCount, sendErrors, truncated] = a.stats(s);
    assert.equal(received, 500);
    assert.equal(nBatches, batches.length);
    assert.equal(sentCount, 500);
    assert.equal(sendErrors, 0);
    assert.equal(truncated, 0);
  } finally {
    c.close();
    a.close(s);
  }
});

test(
  'a datagram longer than a slot is cut to the slot and flagged truncated; the next is whole',
  { skip },
  async () => {
    const a = addon();
    const s = a.open({ address: '127.0.0.1', port: 0, ipv6: false, slotSize: 64 });
    const meta = new Int32Array(s.meta);
    const seen: Array<{ len: number; flags: number; head: string }> = [];
    a.start(s, (n) => {
      for (let i = 0; i < n; i++) {
        const len = meta[i * META_INTS]!;
        seen.push({ len, flags: meta[i * META_INTS + 1]!, head: Buffer.from(s.in, i * s.slotSize, 4).toString() });
      }
      return 0;
    });
    const c = await client();
    try {
      c.send(Buffer.alloc(1000, 'L'), s.port, '127.0.0.1');
      c.send(Buffer.alloc(10, 's'), s.port, '127.0.0.1');
      for (let i = 0; i < 50 && seen.length < 2; i++) await sleep(20);
      assert.deepEqual(seen, [
        { len: 64, flags: FLAG_TRUNCATED, head: 'LLLL' },
        { len: 10, flags: 0, head: 'ssss' },
      ]);
      assert.equal(a.stats(s)[4], 1);
    } finally {
      c.close();
      a.close(s);
    }
  },
);

test(
  'IPv6 on ::1: the peer address and port read as node:dgram reports them, and the answer arrives',
  { skip },
  async () => {
    const a = addon();
    const s = a.open({ address: '::1', port: 0, ipv6: true, ipv6Only: true });
    assert.equal(s.address, '::1');
    const meta = new Int32Array(s.meta);
    let peer = '';
    echo(a, s, () => {
      peer = `${a.ntop(meta[2]!, meta[4]!, meta[5]!, meta[6]!, meta[7]!, meta[8]!)} ${meta[3]}`;
    });
    const c = await client('udp6', '::1');
    try {
      c.send(Buffer.from('hello6'), s.port, '::1');
      const [got] = await collect(c, 1, 2000);
      assert.equal(got?.toString(), 'hello6');
      assert.equal(peer, `::1 ${c.address().port}`);
      // A single send to a peer given as numbers (the path of answers that come after the batch).
      const m = new Int32Array(meta.subarray(0, META_INTS));
      assert.equal(a.sendTo(s, Buffer.from('later'), 6, m[3]!, m[4]!, m[5]!, m[6]!, m[7]!, m[8]!), 0);
      const [later] = await collect(c, 1, 2000);
      assert.equal(later?.toString(), 'later');
    } finally {
      c.close();
      a.close(s);
    }
  },
);

test(
  'close() inside the batch callback: the batch still goes out, nothing is read after, sends then fail with EBADF',
  { skip },
  async () => {
    const a = addon();
    const s = a.open({ address: '127.0.0.1', port: 0, ipv6: false });
    let calls = 0;
    echo(a, s, () => {
      calls++;
      a.close(s);
      a.close(s); // twice is harmless
    });
    const c = await client();
    try {
      c.send(Buffer.from('one'), s.port, '127.0.0.1');
      const [got] = await collect(c, 1, 2000);
      assert.equal(got?.toString(), 'one');
      c.send(Buffer.from('two'), s.port, '127.0.0.1');
      await sleep(100);
      assert.equal(calls, 1);
      assert.equal(a.sendTo(s, Buffer.from('x'), 4, c.address().port, 0, 0x7f000001, 0, 0, 0), -9 /* EBADF */);
      assert.throws(() => a.start(s, () => 0), /EBADF/);
    } finally {
      c.close();
    }
  },
);

test('a port in use fails like node:dgram: EADDRINUSE with the address in the message', { skip }, async () => {
  const a = addon();
  const held = await client();
  try {
    const port = held.address().port;
    assert.throws(
      () => a.open({ address: '127.0.0.1', port, ipv6: false }),
      (e: NodeJS.ErrnoException) =>
        e.code === 'EADDRINUSE' && e.message === `bind EADDRINUSE 127.0.0.1:${port}` && e.syscall === 'bind',
    );
    assert.throws(() => a.open({ address: 'not-an-ip', port: 0, ipv6: false }), /EINVAL/);
    assert.throws(() => a.open({ address: '127.0.0.1', port: 0, ipv6: false, slots: 0 }), RangeError);
  } finally {
    held.close();
  }
});

test('adopt() reads a socket node:dgram bound, through a duplicate descriptor', { skip }, async () => {
  const a = addon();
  const d = await client();
  // As the listener does: node:dgram stops reading, the addon reads a duplicate of its fd.
  const state = Object.getOwnPropertySymbols(d).find((k) => k.description === 'state symbol')!;
  const handle = (d as unknown as Record<symbol, { handle: { fd: number; recvStop(): void } }>)[state]!.handle;
  const s = a.adopt({ fd: handle.fd });
  handle.recvStop();
  assert.equal(s.port, d.address().port);
  assert.equal(s.address, '127.0.0.1');
  echo(a, s);
  const c = await client();
  try {
    c.send(Buffer.from('adopted'), s.port, '127.0.0.1');
    const [got] = await collect(c, 1, 2000);
    assert.equal(got?.toString(), 'adopted');
    assert.throws(() => a.adopt({ fd: 0x7fff }), /EBADF/);
  } finally {
    a.close(s);
    d.close();
    c.close();
  }
});

test(
  'SO_REUSEPORT with spread: two sockets on one port both receive the datagrams of a single client socket',
  { skip },
  async () => {
    const a = addon();
    const s1 = a.open({ address: '127.0.0.1', port: 0, ipv6: false, reusePort: true, spread: 2 });
    const s2 = a.open({ address: '127.0.0.1', port: s1.port, ipv6: false, reusePort: true, spread: 2 });
    const counts = [0, 0];
    echo(a, s1, (n) => (counts[0]! += n));
    echo(a, s2, (n) => (counts[1]! += n));
    const c = await client();
    try {
      for (let i = 0; i < 400; i++) c.send(Buffer.from(`q${i}`), s1.port, '127.0.0.1');
      const got = await collect(c, 400, 5000);
      assert.equal(got.length, 400);
      assert.equal(counts[0]! + counts[1]!, 400);
      assert.ok(counts[0]! > 100 && counts[1]! > 100, `split ${counts.join('/')}`);
      // Without SO_REUSEPORT the port stays exclusive.
      assert.throws(() => a.open({ address: '127.0.0.1', port: s1.port, ipv6: false }), /EADDRINUSE/);
    } finally {
      c.close();
      a.close(s1);
      a.close(s2);
    }
  },
);

test(
  'steer: three reuseport sockets get each query on the socket shardOf() names (case-insensitive, long names, IPv6), and a re-steer moves one shard',
  { skip },
  async () => {
    const a = addon();
    assert.equal(a.STEER_PREFIX, STEER_PREFIX);
    for (const [type, host] of [
      ['udp4', '127.0.0.1'],
      ['udp6', '::1'],
    ] as const) {
      const first = a.open({ address: host, port: 0, ipv6: type === 'udp6', reusePort: true, steer: 3 });
      a.close(first);
      const port = first.port;
      const fds = [0, 1, 2].map(() =>
        a.openFd({ address: host, port, ipv6: type === 'udp6', reusePort: true, steer: 3 }),
      );
      const socks = fds.map((fd) => a.adopt({ fd }));
      const wrong: string[] = [];
      const got = [0, 0, 0];
      let expected = (q: Buffer, i: number) => shardOf(q, 3) === i;
      socks.forEach((sk, i) => {
        const meta = new Int32Array(sk.meta);
        const inBuf = Buffer.from(sk.in);
        a.start(sk, (n) => {
          for (let k = 0; k < n; k++) {
            const q = inBuf.subarray(k * sk.slotSize, k * sk.slotSize + meta[k * META_INTS]!);
            got[i]!++;
            if (!expected(q, i)) wrong.push(`${i}: ${q.toString('latin1', 13)}`);
          }
          return 0;
        });
      });
      const c = await client(type, host);
      const names = Array.from({ length: 150 }, (_, i) =>
        i % 2 ? `Name-${i}.NS.svc.cluster.local.` : `name-${i}.ns.svc.cluster.local.`,
      );
      names.push(`${'long-label-'.repeat(5)}a.example.`, `${'long-label-'.repeat(5)}b.example.`, '.');
      try {
        for (const n of names) {
          c.send(dnsQuery(n), port, host);
          // The same name in another case lands on the same socket.
          c.send(dnsQuery(n.toUpperCase()), port, host);
        }
        await sleep(500);
        assert.deepEqual(wrong, [], type);
        assert.equal(got[0]! + got[1]! + got[2]!, names.length * 2);
        assert.ok(
          got.every((g) => g > 20),
          `split ${got.join('/')}`,
        );
        // Shard 1 to socket 0 (a stand-in while its worker is replaced).
        a.steer(fds[0]!, 3, [0, 0, 2]);
        expected = (q, i) => i === [0, 0, 2][shardOf(q, 3)];
        got.fill(0);
        for (const n of names) c.send(dnsQuery(n), port, host);
        await sleep(500);
        assert.deepEqual(wrong, [], `${type} after re-steer`);
        assert.equal(got[1], 0);
        assert.throws(() => a.steer(fds[0]!, 3, [0, 3, 2]), /map/);
      } finally {
        c.close();
        for (const sk of socks) a.close(sk);
        for (const fd of fds) a.closeFd(fd);
      }
    }
  },
);

function dnsQuery(name: string): Buffer {
  const labels = name.split('.').filter(Boolean);
  const header = Buffer.from([0x12, 0x34, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0]);
  return Buffer.concat([
    header,
    ...labels.flatMap((l) => [Buffer.from([l.length]), Buffer.from(l)]),
    Buffer.from([0, 0, 1, 0, 1]),
  ]);
}

test(
  'pause() leaves datagrams in the kernel until start() again; 300 open/close cycles leak no descriptor',
  { skip },
  async () => {
    const a = addon();
    const s = a.open({ address: '127.0.0.1', port: 0, ipv6: false });
    echo(a, s);
    a.pause(s);
    const c = await client();
    try {
      c.send(Buffer.from('waiting'), s.port, '127.0.0.1');
      assert.equal((await collect(c, 1, 200)).length, 0);
      echo(a, s);
      const [got] = await collect(c, 1, 2000);
      assert.equal(got?.toString(), 'waiting');
    } finally {
      c.close();
      a.close(s);
    }
    const fds = () => readdirSync('/proc/self/fd').length;
    await sleep(50);
    const before = fds();
    for (let i = 0; i < 300; i++) {
      const x =
        i % 2
          ? a.open({ address: '::1', port: 0, ipv6: true })
          : a.open({ address: '127.0.0.1', port: 0, ipv6: false });
      if (i % 3 === 0) a.start(x, () => 0);
      a.close(x);
    }
    await sleep(50);
    assert.ok(fds() <= before + 2, `${before} descriptors before, ${fds()} after`);
  },
);
