// One cache with `-workers 2`: every question name lives in one worker, whichever worker a
// query reaches (fresh client sockets, so the kernel spreads them; TCP connections too).
// Steered by question name on the native UDP path; handed to the owner over a local link on
// node:dgram and TCP.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { QType, Rcode } from '../../src/dns/constants.js';
import { decodeMessage, type Message } from '../../src/dns/message.js';
import { shardOf } from '../../src/server/shards.js';
import { udpBatchAddon } from '../../src/server/udp-native.js';
import { buildQuery, query, sendTcp } from '../helpers/dns.js';
import { freePort } from '../helpers/ports.js';
import { childrenOf } from '../helpers/procs.js';
import { startServer, type RunningServer } from '../helpers/server.js';
import { answerTo, rr, soa, startUpstream, type Upstream } from '../cache/harness.js';

const NAMES = Array.from({ length: 100 }, (_, i) => `host-${i}.example.org.`);
const NX = Array.from({ length: 20 }, (_, i) => `nx-${i}.example.org.`);

function upstreamZone(q: Message): Message {
  const question = q.questions[0]!;
  if (question.name.toLowerCase().startsWith('nx')) {
    const m = answerTo(q, Rcode.NXDOMAIN);
    m.authorities.push(soa('example.org.', 3600, 600));
    return m;
  }
  const m = answerTo(q);
  m.answers.push(rr(question.name, QType.A, 3600, { address: '192.0.2.1' }));
  return m;
}

/** Each name asked `times` times, every query from a fresh socket, `parallel` at a time. */
async function askAll(
  port: number,
  names: string[],
  times: number,
  o: { tcp?: boolean; parallel?: number } = {},
): Promise<Message[]> {
  const jobs: Array<() => Promise<Message>> = [];
  for (let t = 0; t < times; t++)
    for (const n of names) jobs.push(() => query(port, n, QType.A, { tcp: o.tcp, timeoutMs: 4000 }));
  const out: Message[] = [];
  const parallel = o.parallel ?? 40;
  for (let i = 0; i < jobs.length; i += parallel)
    out.push(...(await Promise.all(jobs.slice(i, i + parallel).map((j) => j()))));
  return out;
}

async function cacheEntries(metricsPort: number, type: string): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  let sum = 0;
  for (const line of text.split('\n'))
    if (line.startsWith('coredns_cache_entries{') && line.includes(`type="${type}"`))
      sum += Number(line.split(' ').pop());
  return sum;
}

const counts = (up: Upstream, names: string[]) => names.map((n) => up.count(n));
const ones = (names: string[]) => names.map(() => 1);
const shard = (name: string) => shardOf(buildQuery(name, QType.A), 2);
const native = udpBatchAddon().addon !== null;

for (const [path, env] of [
  ['native UDP steered by question name', {}],
  ['node:dgram, queries handed to their owner', { CLUSTERDNS_NATIVE_UDP: '0' }],
] as const) {
  describe(`-workers 2, one cache (${path})`, { skip: path.startsWith('native') && !native, timeout: 120_000 }, () => {
    let up: Upstream;
    let s: RunningServer;
    let metricsPort: number;
    before(async () => {
      up = await startUpstream(upstreamZone);
      metricsPort = await freePort();
      s = await startServer({
        corefile: `.:PORT {\n    bind 127.0.0.1\n    prometheus 127.0.0.1:${metricsPort}\n    cache 300\n    forward . 127.0.0.1:${up.port} {\n        prefer_udp\n    }\n}\n`,
        workers: 2,
        env,
      });
      assert.equal(childrenOf(s.proc.pid!).length, 2);
    });
    after(async () => {
      await s?.stop();
      await up?.close();
    });

    it('100 names each asked 8 times from fresh sockets reach the upstream once each; the cache counts 100 entries', async () => {
      const replies = await askAll(s.port, NAMES, 8);
      assert.ok(replies.every((m) => m.rcode === Rcode.NOERROR && m.answers.length === 1));
      assert.deepEqual(counts(up, NAMES), ones(NAMES));
      // Both workers hold part of the names (a split of 100 by the hash, neither empty).
      assert.ok(NAMES.some((n) => shard(n) === 0) && NAMES.some((n) => shard(n) === 1));
      assert.equal(await cacheEntries(metricsPort, 'success'), 100);
    });

    it('NXDOMAIN answers are cached once: 20 names × 8 reach the upstream once each', async () => {
      const replies = await askAll(s.port, NX, 8);
      assert.ok(replies.every((m) => m.rcode === Rcode.NXDOMAIN));
      assert.deepEqual(counts(up, NX), ones(NX));
      assert.equal(await cacheEntries(metricsPort, 'denial'), 20);
    });

    it('60 concurrent misses for one name from fresh sockets reach the upstream once', async () => {
      up.delayMs = 300;
      try {
        const replies = await Promise.all(
          Array.from({ length: 60 }, () => query(s.port, 'burst.example.org.', QType.A, { timeoutMs: 4000 })),
        );
        assert.ok(replies.every((m) => m.answers.length === 1));
      } finally {
        up.delayMs = 0;
      }
      assert.equal(up.count('burst.example.org.'), 1);
    });

    it('TCP queries (a fresh connection each) hit the same cache as UDP, both ways', async () => {
      const before = up.count();
      const replies = await askAll(s.port, NAMES.slice(0, 50), 2, { tcp: true });
      assert.ok(replies.every((m) => m.answers.length === 1));
      assert.equal(up.count(), before, 'names cached through UDP were asked upstream again over TCP');
      const fresh = Array.from({ length: 30 }, (_, i) => `tcp-first-${i}.example.org.`);
      await askAll(s.port, fresh, 2, { tcp: true });
      await askAll(s.port, fresh, 4);
      assert.deepEqual(counts(up, fresh), ones(fresh));
    });

    it('100 queries pipelined on one TCP connection, half of them answered by the other worker, each get their own answer', async () => {
      const before = up.count();
      const queries = NAMES.map((n, i) => buildQuery(n, QType.A, { id: 1000 + i }));
      const replies = (await sendTcp(s.port, queries, 8000)).map((r) => decodeMessage(r));
      const byId = new Map(replies.map((m) => [m.id, m]));
      assert.equal(byId.size, 100);
      NAMES.forEach((n, i) => assert.equal(byId.get(1000 + i)?.questions[0]?.name, n));
      assert.equal(up.count(), before);
    });
  });
}

describe('-workers 2: a worker killed under load', { skip: !native, timeout: 60_000 }, () => {
  let s: RunningServer;
  before(async () => {
    s = await startServer({ corefile: `.:PORT {\n    bind 127.0.0.1\n    whoami\n}\n`, workers: 2 });
  });
  after(() => s?.stop());

  it('every query sent after the kill, from fresh sockets, is answered within a second (none waits for the replacement)', async () => {
    const workers = childrenOf(s.proc.pid!);
    let stop = false;
    let killedAt = Infinity;
    let after = 0;
    const failures: string[] = [];
    const loop = async (k: number) => {
      for (let i = 0; !stop; i++) {
        const name = NAMES[(k * 37 + i) % NAMES.length]!;
        const at = performance.now();
        // Queries the killed worker had already read die with it, as on a shared socket: only later ones count.
        const counts = at > killedAt;
        if (counts) after++;
        try {
          const m = await query(s.port, name, QType.A, { timeoutMs: 1000 });
          if (counts && m.rcode !== Rcode.NOERROR)
            failures.push(`${name} at +${(at - killedAt).toFixed(0)} ms: rcode ${m.rcode}`);
        } catch (e) {
          if (counts) failures.push(`${name} at +${(at - killedAt).toFixed(0)} ms: ${(e as Error).message}`);
        }
      }
    };
    const loops = Array.from({ length: 8 }, (_, k) => loop(k));
    await new Promise((r) => setTimeout(r, 200));
    process.kill(workers[0]!, 'SIGKILL');
    killedAt = performance.now();
    await new Promise((r) => setTimeout(r, 1500));
    stop = true;
    await Promise.all(loops);
    assert.ok(after > 50, `only ${after} queries sent after the kill`);
    assert.deepEqual(failures, [], `${failures.length} of ${after} failed`);
  });
});

describe('-workers 2, one cache: a worker killed and replaced', { skip: !native, timeout: 120_000 }, () => {
  let up: Upstream;
  let s: RunningServer;
  before(async () => {
    up = await startUpstream(upstreamZone);
    s = await startServer({
      corefile: `.:PORT {\n    bind 127.0.0.1\n    cache 300\n    forward . 127.0.0.1:${up.port} {\n        prefer_udp\n    }\n}\n`,
      workers: 2,
    });
  });
  after(async () => {
    await s?.stop();
    await up?.close();
  });

  it('keeps answering, keeps the other shard cached, and steers every name to one worker again', async () => {
    await askAll(s.port, NAMES, 4);
    assert.deepEqual(counts(up, NAMES), ones(NAMES));
    const workers = childrenOf(s.proc.pid!);
    process.kill(workers[0]!, 'SIGKILL');
    // Answered while the worker is gone and while its replacement starts.
    const during = await askAll(s.port, NAMES, 2);
    assert.ok(during.every((m) => m.rcode === Rcode.NOERROR && m.answers.length === 1));
    await s.waitFor(/exited \(SIGKILL\); starting another/);
    // The shard whose worker survived was never asked again: its cache is intact.
    const kept = NAMES.filter((n) => up.count(n) === 1);
    const keptShard = shard(kept[0]!);
    assert.deepEqual(
      kept,
      NAMES.filter((n) => shard(n) === keptShard),
    );
    // Once the replacement serves, its names are asked upstream at most once more (its cache is
    // new), then never again: each name has one worker again.
    await s.waitFor(/UDP: shard \d+ is steered to its worker again/, 15_000);
    const replaced = childrenOf(s.proc.pid!);
    assert.ok(replaced.length === 2 && !replaced.includes(workers[0]!));
    const lost = NAMES.filter((n) => shard(n) !== keptShard);
    const was = counts(up, lost);
    await askAll(s.port, NAMES, 4);
    // (A name queued on the dead worker's socket was already answered by the replacement: +0.)
    const after = counts(up, lost);
    assert.ok(
      after.every((c, i) => c - was[i]! <= 1),
      `asked again: ${after.map((c, i) => c - was[i]!).join(' ')}`,
    );
    const before = up.count();
    await askAll(s.port, NAMES, 4);
    assert.equal(up.count(), before);
    for (const n of NAMES) assert.ok(up.count(n) <= 3, `${n} asked ${up.count(n)} times`);
    for (const n of kept) assert.equal(up.count(n), 1, n);
  });
});

describe('-workers 2: searchfan single flight across workers', { timeout: 60_000 }, () => {
  let up: Upstream;
  let s: RunningServer;
  before(async () => {
    // Every candidate of the search list but the bare name is NXDOMAIN; answers take 300 ms.
    up = await startUpstream((q) => {
      const name = q.questions[0]!.name.toLowerCase();
      if (name !== 'backend.') {
        const m = answerTo(q, Rcode.NXDOMAIN);
        m.authorities.push(soa('cluster.local.', 30, 30));
        return m;
      }
      const m = answerTo(q);
      m.answers.push(rr(q.questions[0]!.name, QType.A, 60, { address: '198.51.100.7' }));
      return m;
    }, 300);
    s = await startServer({
      corefile: `.:PORT {\n    bind 127.0.0.1\n    searchfan 127.0.0.1:${up.port} {\n        search default.svc.cluster.local svc.cluster.local cluster.local\n        ndots 5\n    }\n}\n`,
      workers: 2,
    });
  });
  after(async () => {
    await s?.stop();
    await up?.close();
  });

  it('40 concurrent misses for one short name from fresh sockets (UDP and TCP) fan out once: each candidate reaches the upstream once', async () => {
    const replies = await Promise.all(
      Array.from({ length: 40 }, (_, i) => query(s.port, 'backend.', QType.A, { tcp: i % 4 === 0, timeoutMs: 4000 })),
    );
    assert.ok(replies.every((m) => m.rcode === Rcode.NOERROR && m.answers.length === 1));
    for (const c of [
      'backend.default.svc.cluster.local.',
      'backend.svc.cluster.local.',
      'backend.cluster.local.',
      'backend.',
    ])
      assert.equal(up.count(c), 1, c);
  });
});
