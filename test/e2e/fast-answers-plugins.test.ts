// What plugins do per query stays per query with the native answer table on: a cached forwarded
// answer's TTL counts down as with the table off, loadbalance keeps shuffling, log writes one line
// a query, acl keeps refusing the address it blocks however often another address was answered.
// The real binary twice (CLUSTERDNS_FAST_ANSWERS=0 and the default), each scenario run in parallel.
// And how long the table repeats a cache hit: to its expiry while the cache has room, 5 s at most
// once it is half full (two servers with the table on, one filled past half). And a miss's stored
// answer: its next repeat is already the table's, the hit JS gives and counted as one, except
// behind loadbalance, which still shuffles every reply.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { QType } from '../../src/dns/constants.js';
import { decodeMessage } from '../../src/dns/message.js';
import { answerTo, rr, startUpstream, type Upstream } from '../cache/harness.js';
import {
  assertTableUsed,
  Client,
  describeReply,
  fastHits,
  q,
  scrape,
  sleep,
  startMode,
  startPair,
  sumOf,
  type Mode,
  type Pair,
} from './fast-answers-harness.js';

const HOSTS =
  '192.0.2.1 multi.example.org\n192.0.2.2 multi.example.org\n192.0.2.3 multi.example.org\n192.0.2.4 multi.example.org\n192.0.2.9 web.example.org\n';

/** How far behind real time the cache's coarse clock may run on busy shared cores. */
const CLOCK_SLACK_MS = 400;

interface Sample {
  sent: number;
  recv: number;
  ttl: number;
}

describe('fast answers: a cached forwarded answer ages as with the table off', { timeout: 60_000 }, () => {
  let up: Upstream;
  let pair: Pair;
  let client: Client;

  before(async () => {
    up = await startUpstream((query) => {
      const m = answerTo(query);
      m.answers.push(rr(query.questions[0]!.name, QType.A, 30, { address: '198.51.100.7' }));
      return m;
    });
    pair = await startPair(
      `.:PORT {\n    bind 127.0.0.1\n    prometheus 127.0.0.1:METRICS\n    cache 60\n    forward . 127.0.0.1:${up.port}\n}\n`,
    );
    client = await Client.open();
  });

  after(async () => {
    client?.close();
    await pair?.stop();
    await up?.close();
  });

  test('over 3.4 s of repeats the TTL counts down as with the table off, on every tick', async () => {
    // Both modes ask the same fresh name at the same moments: [ms since the first query, TTL].
    const run = async (m: Mode, query: Buffer) => {
      const out: Sample[] = [];
      const start = Date.now();
      while (Date.now() - start < 3400) {
        const sent = Date.now() - start;
        const raw = await client.ask(m.port, query);
        const a = decodeMessage(raw).answers[0];
        assert.ok(a, `${m.name}: ${describeReply(raw)}`);
        out.push({ sent, recv: Date.now() - start, ttl: a.ttl });
        // Out of step with the cache's ticks: a reply kept for a second from the first hit (~1.7 s)
        // would outlive the tick at 2 s by ~0.7 s.
        await sleep(out.length === 1 ? 1700 : 20);
      }
      return out;
    };
    const [off, on] = await Promise.all([
      run(pair.off, q('aging.example.net', QType.A)),
      run(pair.on, q('aging.example.net', QType.A)),
    ]);
    const bySecond = (samples: Sample[]) => {
      const s = new Map<number, number[]>();
      for (const { sent, ttl } of samples) {
        const sec = Math.floor(sent / 1000);
        (s.get(sec) ?? s.set(sec, []).get(sec)!).push(ttl);
      }
      return s;
    };
    const offS = bySecond(off);
    const onS = bySecond(on);
    for (const [mode, samples] of [
      ['off', off],
      ['on', on],
    ] as const) {
      const text = JSON.stringify(samples.map((x) => [x.sent, x.ttl]));
      for (let i = 1; i < samples.length; i++)
        assert.ok(samples[i]!.ttl <= samples[i - 1]!.ttl, `${mode}: TTL rose: ${text}`);
      // The answer was kept between the first query's send (0) and its reply (first.recv): a later
      // query sent at `sent` and answered at `recv` must show 30 minus the whole seconds elapsed,
      // so never more than 30 - floor((sent - first.recv) / 1 s), less the cache's own clock lag
      // (it ticks every 100 ms, later under load): a kept reply whose TTL did not tick on time
      // breaks that upper bound. The lower bound has a second's slack.
      const kept = samples[0]!.recv + CLOCK_SLACK_MS;
      for (const { sent, recv, ttl } of samples)
        assert.ok(
          ttl <= 30 - Math.floor(Math.max(0, sent - kept) / 1000) && ttl >= 30 - Math.floor(recv / 1000) - 1,
          `${mode}: TTL ${ttl} for a query sent ${sent} ms after the first (answered at ${samples[0]!.recv} ms): ${text}`,
        );
    }
    for (const [sec, offTtls] of offS) {
      const onTtls = onS.get(sec) ?? [];
      assert.ok(onTtls.length > 0, `on: no answers in second ${sec}`);
      assert.ok(
        Math.abs(Math.min(...onTtls) - Math.min(...offTtls)) <= 1 &&
          Math.abs(Math.max(...onTtls) - Math.max(...offTtls)) <= 1,
        `second ${sec}: TTLs off ${offTtls.join(',')} on ${onTtls.join(',')}`,
      );
    }
    // It did age: three distinct TTLs over 2.6 s with the table off (else the comparison proves nothing).
    assert.ok(new Set(off.map((x) => x.ttl)).size >= 3, `off: ${JSON.stringify(off)}`);
    assert.equal(up.count('aging.example.net.'), 2, 'one upstream query per mode');
    await assertTableUsed(pair, 10);
    // JS answered the miss alone (its stored answer's hit went to the table at once); the table went
    // on past the ticks at 1 s, 2 s and 3 s itself, its TTLs one lower each second. Answers that
    // left the table at each tick would make that 3 or more JS answers (one more is slack for a
    // slow scrape or clock).
    const jsAnswered = on.length - ((await fastHits(pair.on)) ?? on.length - 1);
    assert.ok(jsAnswered <= 2, `JS answered ${jsAnswered} of ${on.length} queries with the table on`);
  });
});

describe('fast answers: loadbalance, log and acl still act on every query', { timeout: 60_000 }, () => {
  let lb: Pair;
  let log: Pair;
  let acl: Pair;
  let c1: Client;
  let c2: Client;

  before(async () => {
    const files = { 'hosts.txt': HOSTS };
    const block = (extra: string) =>
      `.:PORT {\n    bind 127.0.0.1\n    prometheus 127.0.0.1:METRICS\n${extra}    hosts hosts.txt example.org\n}\n`;
    [lb, log, acl] = await Promise.all([
      startPair(block('    loadbalance\n'), { files, probe: 'web.example.org' }),
      startPair(block('    log\n'), { files, probe: 'web.example.org' }),
      // The acl's block shares the port with a pure one: the pure block's answers may be kept, the acl's must not.
      startPair(
        `secure.example.org:PORT {\n    bind 127.0.0.1\n    prometheus 127.0.0.1:METRICS\n    acl {\n        block net 127.0.0.2/32\n    }\n` +
          `    hosts {\n        192.0.2.50 secure.example.org\n    }\n}\n` +
          `example.org:PORT {\n    bind 127.0.0.1\n    prometheus 127.0.0.1:METRICS\n    hosts hosts.txt example.org\n}\n`,
        { files, probe: 'web.example.org' },
      ),
    ]);
    c1 = await Client.open('127.0.0.1');
    c2 = await Client.open('127.0.0.2');
  });

  after(async () => {
    c1?.close();
    c2?.close();
    await Promise.all([lb?.stop(), log?.stop(), acl?.stop()]);
  });

  test('loadbalance: 30 repeats of a 4-address name come back in more than one order', async () => {
    const orders = async (m: Mode) => {
      const seen = new Set<string>();
      for (let i = 0; i < 30; i++) {
        const reply = decodeMessage(await c1.ask(m.port, q('multi.example.org', QType.A)));
        assert.equal(reply.answers.length, 4);
        seen.add(reply.answers.map((a) => (a.data as { address: string }).address).join(','));
      }
      return seen.size;
    };
    const [off, on] = await Promise.all([orders(lb.off), orders(lb.on)]);
    assert.ok(off > 1, `off: one order in 30`);
    assert.ok(on > 1, `on: one order in 30 (the table kept one shuffle)`);
  });

  test('log: 30 queries, 30 lines', async () => {
    const lines = (m: Mode) =>
      m.s
        .output()
        .split('\n')
        .filter((l) => l.includes('"A IN logged.example.org.')).length;
    await Promise.all(
      log.both.map(async (m) => {
        for (let i = 0; i < 30; i++) await c1.ask(m.port, q('logged.example.org', QType.A));
      }),
    );
    // Answers are all there; lines may reach stdout a moment later.
    const end = Date.now() + 5000;
    while (log.both.some((m) => lines(m) < 30) && Date.now() < end) await sleep(20);
    await sleep(100);
    for (const m of log.both)
      assert.equal(lines(m), 30, `${m.name}: log lines for 30 queries:\n${m.s.output().slice(-2000)}`);
  });

  test('acl: 127.0.0.2 stays REFUSED after 127.0.0.1 was answered the same question again and again', async () => {
    await Promise.all(
      acl.both.map(async (m) => {
        for (let round = 0; round < 3; round++) {
          for (let i = 0; i < 8; i++) {
            for (const name of ['secure.example.org', 'web.example.org']) {
              const raw = await c1.ask(m.port, q(name, QType.A));
              assert.equal(decodeMessage(raw).rcode, 0, `${m.name}: 127.0.0.1 ${name}: ${describeReply(raw)}`);
            }
          }
          const refused = await c2.ask(m.port, q('secure.example.org', QType.A));
          assert.equal(
            decodeMessage(refused).rcode,
            5,
            `${m.name}: 127.0.0.2 secure.example.org: ${describeReply(refused)}`,
          );
          assert.equal(decodeMessage(refused).answers.length, 0);
          // The pure block next to it answers 127.0.0.2 as anyone.
          const other = await c2.ask(m.port, q('web.example.org', QType.A));
          assert.equal(decodeMessage(other).rcode, 0, `${m.name}: 127.0.0.2 web.example.org: ${describeReply(other)}`);
        }
      }),
    );
    // The pure block's repeats are the table's to answer.
    await assertTableUsed(acl, 10);
  });
});

describe('fast answers: a hot cached answer stays in the table while the cache has room', { timeout: 60_000 }, () => {
  let up: Upstream;
  let roomy: Mode;
  let half: Mode;
  let client: Client;

  before(async () => {
    delete process.env.CLUSTERDNS_FAST_ANSWERS;
    up = await startUpstream((query) => {
      const m = answerTo(query);
      m.answers.push(rr(query.questions[0]!.name, QType.A, 30, { address: '198.51.100.8' }));
      return m;
    });
    const block = (cache: string) =>
      `.:PORT {\n    bind 127.0.0.1\n    prometheus 127.0.0.1:METRICS\n${cache}    forward . 127.0.0.1:${up.port}\n}\n`;
    // `success 1` holds 1,024 entries (CoreDNS's 256 shards of at least 4): 600 names fill it past half.
    [roomy, half] = await Promise.all([
      startMode('on', block('    cache 60\n')),
      startMode('on', block('    cache 60 {\n        success 1\n    }\n')),
    ]);
    client = await Client.open();
  });

  after(async () => {
    client?.close();
    await Promise.all([roomy?.s.stop(), half?.s.stop()]);
    await up?.close();
  });

  test('to the end of its TTL; once the cache is half full, back to JS every 5 s', async () => {
    if ((await fastHits(roomy)) === null) return; // no native table in this build: nothing to keep
    for (let i = 0; i < 600; i += 50)
      await Promise.all(
        Array.from({ length: 50 }, (_, j) => client.ask(half.port, q(`fill-${i + j}.example.net`, QType.A))),
      );
    const entries = sumOf(await scrape(half.metricsPort), 'coredns_cache_entries', 'type="success"');
    assert.ok(entries > 512 && entries <= 1024, `the half-full cache holds ${entries} success entries`);
    const run = async (m: Mode) => {
      const before = (await fastHits(m))!;
      const ttls: number[] = [];
      const t0 = Date.now();
      while (Date.now() - t0 < 10_500) {
        const a = decodeMessage(await client.ask(m.port, q('hot.example.net', QType.A))).answers[0];
        assert.ok(a, `${m.port}: no answer`);
        ttls.push(a.ttl);
        await sleep(50);
      }
      await sleep(300); // hits are folded into the counter every 250 ms
      return { ttls, js: ttls.length - ((await fastHits(m))! - before) };
    };
    const [r, h] = await Promise.all([run(roomy), run(half)]);
    for (const [name, x] of [
      ['room', r],
      ['half full', h],
    ] as const) {
      for (let i = 1; i < x.ttls.length; i++)
        assert.ok(x.ttls[i]! <= x.ttls[i - 1]!, `${name}: TTL rose: ${x.ttls.join(',')}`);
      // 10.5 s of asking: the TTL went from 30 to 20 or 19, in the table as in JS.
      assert.ok(x.ttls[0]! >= 29 && x.ttls.at(-1)! <= 20 && x.ttls.at(-1)! >= 18, `${name}: TTLs ${x.ttls.join(',')}`);
    }
    // Room: the miss, then the table alone (its stored answer's hit is kept at once; one more is
    // slack: a kept hit cut by a TTL tick a few ms later). Back every 5 s it would be 3 or more.
    assert.ok(r.js <= 2, `with room JS answered ${r.js} of ${r.ttls.length} queries`);
    // Half full: the miss, then back to JS at most every 5 s: at ~5 s and ~10 s.
    assert.ok(h.js >= 3, `half full, JS answered only ${h.js} of ${h.ttls.length} queries`);
    assert.equal(up.count('hot.example.net.'), 2, 'one upstream query per server');
  });
});

describe("fast answers: a cache miss's answer is kept for its repeats", { timeout: 60_000 }, () => {
  let up: Upstream;
  let plain: Pair;
  let shuffled: Pair;
  let client: Client;

  before(async () => {
    up = await startUpstream((query) => {
      const m = answerTo(query);
      const name = query.questions[0]!.name;
      const n = name.startsWith('four') ? 4 : 1;
      for (let i = 1; i <= n; i++) m.answers.push(rr(name, QType.A, 30, { address: `198.51.100.${i}` }));
      return m;
    });
    const block = (extra: string) =>
      `.:PORT {\n    bind 127.0.0.1\n    prometheus 127.0.0.1:METRICS\n    cache 60\n${extra}    forward . 127.0.0.1:${up.port}\n}\n`;
    [plain, shuffled] = await Promise.all([startPair(block('')), startPair(block('    loadbalance\n'))]);
    client = await Client.open();
  });

  after(async () => {
    client?.close();
    await Promise.all([plain?.stop(), shuffled?.stop()]);
    await up?.close();
  });

  test('the miss alone comes to JS; the repeats are the hits JS gives, counted as JS counts them', async () => {
    if ((await fastHits(plain.on)) === null) return; // no native table in this build
    const metrics = [
      ['coredns_cache_misses_total', ''],
      ['coredns_cache_hits_total', 'type="success"'],
      ['coredns_dns_requests_total', ''],
      ['coredns_dns_responses_total', 'plugin="cache"'],
      ['coredns_dns_responses_total', 'plugin="forward"'],
    ] as const;
    const run = async (m: Mode) => {
      const before = await fastHits(m);
      const replies: Buffer[] = [];
      for (let i = 0; i < 21; i++) {
        replies.push(await client.ask(m.port, q('repeat.example.net', QType.A)));
        await sleep(20);
      }
      await sleep(300); // hits are folded into the counters every 250 ms
      const text = await scrape(m.metricsPort);
      return {
        replies,
        js: before === null ? replies.length : replies.length - ((await fastHits(m))! - before),
        counts: metrics.map(([name, label]) => sumOf(text, name, label)),
      };
    };
    const [off, on] = await Promise.all([run(plain.off), run(plain.on)]);
    // The hits JS gives (AA set, the cache's TTL): the table's repeats are those, byte for byte but
    // for the ID and a TTL a tick apart.
    for (let i = 1; i < 21; i++) {
      const a = decodeMessage(off.replies[i]!);
      const b = decodeMessage(on.replies[i]!);
      assert.ok(a.aa && b.aa, `repeat ${i}: AA off ${a.aa} on ${b.aa}`);
      assert.equal(b.answers.length, 1, describeReply(on.replies[i]!));
      assert.equal((b.answers[0]!.data as { address: string }).address, '198.51.100.1');
      assert.ok(
        Math.abs(a.answers[0]!.ttl - b.answers[0]!.ttl) <= 1,
        `repeat ${i}: TTL off ${a.answers[0]!.ttl} on ${b.answers[0]!.ttl}`,
      );
      assert.equal(off.replies[i]!.length, on.replies[i]!.length, `repeat ${i}: sizes differ`);
    }
    // Without the kept repeat JS answers the miss and the first hit (2).
    assert.equal(on.js, 1, `JS answered ${on.js} of 21 queries with the table on`);
    assert.ok(off.js === 21, `off: the table answered ${21 - off.js}`);
    // One miss, 20 hits, 21 requests, 20 responses by cache and 1 by forward, in both modes.
    assert.deepEqual(on.counts, off.counts, `metrics ${metrics.map((x) => x.join(' ')).join(', ')}`);
    assert.deepEqual(on.counts, [1, 20, 21, 20, 1]);
    assert.equal(up.count('repeat.example.net.'), 2, 'one upstream query per mode');
  });

  test('behind loadbalance the repeats of a miss still come to JS and are shuffled', async () => {
    if ((await fastHits(shuffled.on)) === null) return;
    const before = (await fastHits(shuffled.on))!;
    const seen = new Set<string>();
    for (let i = 0; i < 30; i++) {
      const reply = decodeMessage(await client.ask(shuffled.on.port, q('four.example.net', QType.A)));
      assert.equal(reply.answers.length, 4);
      seen.add(reply.answers.map((a) => (a.data as { address: string }).address).join(','));
    }
    await sleep(300);
    assert.ok(seen.size > 1, 'one order in 30: the table kept one shuffle');
    assert.equal((await fastHits(shuffled.on))! - before, 0, 'the table answered some of them');
  });
});
