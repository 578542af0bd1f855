// The real binary with a block whose only plugin is forward: its queries are answered through the
// dispatcher directly (no Promise per query) from the client's own query bytes, the upstream IDs
// written into them and the client's put back. Real sockets, an upstream that misbehaves on purpose.
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { QType, Rcode } from '../../src/dns/constants.js';
import { decodeMessage, type Message } from '../../src/dns/message.js';
import { buildQuery } from '../helpers/dns.js';
import { startServer, type RunningServer } from '../helpers/server.js';
import { answer, FakeUpstream, isHealthCheck, sleep, waitUntil, type Behaviour, type Received } from './upstreams.js';

/** The A address the upstream gives name `n<i>.example.org.`: 10.<i>.<i>.<i> spread over octets. */
function addressFor(i: number): string {
  return `10.${(i >> 8) & 255}.${i & 255}.${(i * 7) & 255}`;
}

function indexOf(q: Received): number {
  return Number(/^n(\d+)\./.exec(q.msg.questions[0]!.name)?.[1] ?? 0);
}

/** `b` for the test's queries; health checks (`. NS`, after a failed try) are answered at once. */
function queriesOnly(b: Behaviour): Behaviour {
  return (q, r) => (isHealthCheck(q) ? r.send(answer(q)) : b(q, r));
}

/**
 * One client socket asking `names` with IDs 1..n, at most `window` at a time; resolves with the
 * replies by ID (and how many arrived for IDs already answered) once all came or after `ms`.
 */
async function askMany(
  port: number,
  names: string[],
  window = names.length,
  ms = 15000,
): Promise<{ replies: Map<number, Message>; duplicates: number }> {
  const s = dgram.createSocket({ type: 'udp4', recvBufferSize: 1 << 22 });
  const replies = new Map<number, Message>();
  let duplicates = 0;
  let next = 0;
  const sendNext = (): void => {
    if (next >= names.length) return;
    const i = next++;
    s.send(buildQuery(names[i]!, QType.A, { id: i + 1, edns: 1232 }), port, '127.0.0.1');
  };
  await new Promise<void>((done) => {
    const t = setTimeout(done, ms);
    s.on('message', (b) => {
      const m = decodeMessage(b);
      if (replies.has(m.id)) duplicates++;
      replies.set(m.id, m);
      sendNext();
      if (replies.size === names.length) {
        clearTimeout(t);
        done();
      }
    });
    for (let k = 0; k < window; k++) sendNext();
  });
  s.close();
  return { replies, duplicates };
}

describe('forward as the only plugin of a block (the direct path), real binary', () => {
  let up: FakeUpstream;
  let srv: RunningServer;
  before(async () => {
    up = await FakeUpstream.start();
    srv = await startServer({
      corefile: `.:PORT {\n    bind 127.0.0.1\n    forward . 127.0.0.1:${up.port} {\n        read_timeout 500ms\n    }\n}\n`,
    });
  });
  after(async () => {
    await srv?.stop();
    await up?.close();
  });

  it('60 queries in flight at once, answered by the upstream in reverse order: each client gets its own answer and ID', async () => {
    up.reset();
    const n = 60;
    const held: Array<{ q: Received; send: (b: Buffer) => void }> = [];
    up.behaviour = queriesOnly((q, r) => {
      held.push({ q, send: r.send });
      if (held.length === n) for (const h of held.reverse()) h.send(answer(h.q, { a: [addressFor(indexOf(h.q))] }));
    });
    const names = Array.from({ length: n }, (_, i) => `n${i}.example.org.`);
    const { replies, duplicates } = await askMany(srv.port, names);
    assert.equal(replies.size, n);
    assert.equal(duplicates, 0);
    for (let i = 0; i < n; i++) {
      const m = replies.get(i + 1)!;
      assert.equal(m.rcode, Rcode.NOERROR);
      assert.equal(m.questions[0]!.name, names[i]);
      assert.deepEqual(
        m.answers.map((a) => (a.data as { address: string }).address),
        [addressFor(i)],
      );
    }
    // The upstream saw random IDs, not the clients' 1..60.
    const ids = new Set(up.queries.map((q) => q.msg.id));
    assert.ok(
      [...ids].some((id) => id > n),
      'upstream IDs are the server’s own',
    );
  });

  it('a reply with a wrong ID or another question, or from another port, is ignored; the real answer still comes', async () => {
    up.reset();
    up.behaviour = queriesOnly((q, r) => {
      r.send(answer(q, { id: (q.msg.id + 1) & 0xffff, a: ['6.6.6.1'] }));
      r.send(answer(q, { qname: 'other.example.org.', a: ['6.6.6.2'] }));
      r.spoof(answer(q, { a: ['6.6.6.3'] }));
      setTimeout(() => r.send(answer(q, { a: ['192.0.2.7'] })), 50);
    });
    const { replies, duplicates } = await askMany(srv.port, ['n1.example.org.', 'n2.example.org.']);
    assert.equal(duplicates, 0);
    for (const id of [1, 2]) {
      const m = replies.get(id)!;
      assert.deepEqual(
        m.answers.map((a) => (a.data as { address: string }).address),
        ['192.0.2.7'],
      );
    }
  });

  it('a reply that comes after its try timed out is ignored: the retry answers, once', async () => {
    up.reset();
    up.behaviour = queriesOnly((q, r) => {
      // The first try's answer comes after read_timeout (500 ms); the retry's at once.
      const first = up.queries.filter((x) => x.msg.questions[0]!.name === q.msg.questions[0]!.name).length === 1;
      if (first) setTimeout(() => r.send(answer(q, { a: ['192.0.2.1'] })), 800);
      else r.send(answer(q, { a: ['192.0.2.2'] }));
    });
    const t0 = performance.now();
    const { replies, duplicates } = await askMany(srv.port, ['late.example.org.'], 1, 3000);
    const m = replies.get(1)!;
    assert.ok(performance.now() - t0 >= 450, 'answered after the first try timed out');
    assert.deepEqual(
      m.answers.map((a) => (a.data as { address: string }).address),
      ['192.0.2.2'],
    );
    assert.equal(m.id, 1);
    // The late reply arrives meanwhile and must not become a second answer.
    await sleep(600);
    assert.equal(duplicates, 0);
    assert.equal(up.queries.length, 2);
    // The server still answers (the late datagram broke nothing).
    up.behaviour = queriesOnly((q, r) => r.send(answer(q, { a: ['192.0.2.3'] })));
    const again = await askMany(srv.port, ['after.example.org.'], 1, 3000);
    assert.equal(again.replies.get(1)!.answers.length, 1);
  });

  it('sockets replaced after 100 queries while their queries are still in flight: every query answered', async () => {
    up.reset();
    // Every answer held back 300 ms: sockets reach 100 queries and are replaced with queries waiting on them.
    up.behaviour = queriesOnly((q, r) => setTimeout(() => r.send(answer(q, { a: [addressFor(indexOf(q))] })), 300));
    const n = 700;
    const names = Array.from({ length: n }, (_, i) => `n${i}.example.org.`);
    // 200 at a time (a burst of 700 answers would overflow the client's socket): each socket reaches 100 with ~50 waiting.
    const { replies, duplicates } = await askMany(srv.port, names, 200, 15000);
    assert.equal(replies.size, n);
    assert.equal(duplicates, 0);
    for (let i = 0; i < n; i++)
      assert.deepEqual(
        replies.get(i + 1)!.answers.map((a) => (a.data as { address: string }).address),
        [addressFor(i)],
        `answer ${i}`,
      );
    const ports = new Set(up.queries.map((q) => q.port));
    assert.ok(ports.size >= 7, `${ports.size} source ports for ${n} queries (replaced after 100 each)`);
  });

  it('an upstream answer longer than the receive slot: an empty TC answer echoing the client’s OPT, at once', async () => {
    up.reset();
    up.behaviour = queriesOnly((q, r) =>
      r.send(answer(q, { txt: Array.from({ length: 25 }, (_, i) => `${i}`.padEnd(250, 'x')) })),
    );
    const t0 = performance.now();
    const { replies } = await askMany(srv.port, ['big.example.org.'], 1, 3000);
    const m = replies.get(1)!;
    assert.ok(performance.now() - t0 < 480, 'not after the read timeout (500 ms)');
    assert.equal(m.rcode, Rcode.NOERROR);
    assert.equal(m.tc, true);
    assert.equal(m.answers.length, 0);
    assert.equal(m.questions[0]!.name, 'big.example.org.');
    assert.equal(m.edns?.udpSize, 1232, 'OPT echoed');
  });

  it('an upstream that fails answers SERVFAIL with the client’s ID (the query bytes given back)', async () => {
    up.reset();
    up.behaviour = queriesOnly(() => {});
    const { replies } = await askMany(srv.port, ['silent.example.org.'], 1, 8000);
    const m = replies.get(1)!;
    assert.equal(m.rcode, Rcode.SERVFAIL);
    assert.equal(m.id, 1);
    assert.equal(m.questions[0]!.name, 'silent.example.org.');
    await waitUntil(() => up.queries.length >= 2, 1000, 'the retries');
  });
});

// What the bench measures (bench/alloc.mjs), as a bound that fails well before the old 2 KB.
const ALLOC_PROFILE = resolve('bench/lib/alloc-profile.mjs');
describe('allocation per forwarded query, real binary', { skip: !existsSync(ALLOC_PROFILE) && 'no bench/' }, () => {
  it('stays under 1.6 KB of JS heap per forwarded UDP query (V8 sampling heap profiler over 20,000 queries)', async (t) => {
    const up = await FakeUpstream.start({
      behaviour: (q, r) => r.send(answer(q, { a: ['192.0.2.1'] })),
    });
    const srv = await startServer({
      corefile: `.:PORT {\n    bind 127.0.0.1\n    forward . 127.0.0.1:${up.port}\n}\n`,
      env: {
        NODE_OPTIONS: `--import=${pathToFileURL(ALLOC_PROFILE).href}`,
        CLUSTERDNS_ALLOC_PROFILE: 'alloc.json',
        CLUSTERDNS_ALLOC_INTERVAL: '256',
      },
    });
    try {
      const names = Array.from({ length: 2000 }, (_, i) => `n${i}.example.org.`);
      await askMany(srv.port, names, 32);
      srv.proc.kill('SIGUSR2');
      await sleep(300);
      let answered = 0;
      for (let round = 0; round < 10; round++) answered += (await askMany(srv.port, names, 32)).replies.size;
      assert.equal(answered, 20000);
      await srv.stop();
      const profile = JSON.parse(readFileSync(join(srv.dir, 'alloc.json'), 'utf8')) as { bytes: number };
      const perQuery = profile.bytes / answered;
      t.diagnostic(`${perQuery.toFixed(0)} bytes per forwarded query`);
      assert.ok(perQuery < 1600, `${perQuery.toFixed(0)} bytes per forwarded query`);
      assert.ok(perQuery > 100, `${perQuery.toFixed(0)} bytes per forwarded query: the profile measured something`);
    } finally {
      await srv.stop();
      await up.close();
    }
  });
});
