// Health checking and the per-query loop, timed with short intervals: checks only after a
// failure, down after max_fails, all-down fallback, failfast, max_concurrent, SERVFAIL.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { QType, Rcode } from '../../src/dns/constants.js';
import { forwardChain } from './harness.js';
import { freePort } from '../helpers/ports.js';
import { answer, answerAll, FakeUpstream, sleep, waitUntil, type Behaviour } from './upstreams.js';

const silent: Behaviour = () => {};
/** Answers health checks and queries only while `alive` says so. */
function switchable(alive: () => boolean): Behaviour {
  return (q, r) => {
    if (alive()) answerAll(q, r);
  };
}

describe('forward health checks', () => {
  let a: FakeUpstream;
  let b: FakeUpstream;
  before(async () => {
    a = await FakeUpstream.start();
    b = await FakeUpstream.start();
  });
  after(async () => {
    await a.close();
    await b.close();
  });

  it('sends no health checks while the upstream answers', async () => {
    a.behaviour = answerAll;
    a.reset();
    const h = forwardChain(`forward . 127.0.0.1:${a.port} {\n health_check 20ms\n}`);
    try {
      for (let i = 0; i < 20; i++) await h.ask(`ok${i}.example.org.`, QType.A);
      await sleep(100);
      assert.equal(a.healthChecks.length, 0);
    } finally {
      h.stop();
    }
  });

  it('starts `. IN NS` checks (RD set) after a failure, repeats them every interval, and stops once one is answered', async () => {
    let alive = false;
    a.behaviour = switchable(() => alive);
    a.reset();
    const h = forwardChain(
      `forward . 127.0.0.1:${a.port} {\n health_check 50ms\n read_timeout 100ms\n max_connect_attempts 1\n}`,
    );
    try {
      const r = await h.ask('fail.example.org.', QType.A);
      assert.equal(r.msg.rcode, Rcode.SERVFAIL);
      await waitUntil(() => a.healthChecks.length >= 3, 3000, 'three health checks');
      const checks = a.healthChecks;
      assert.equal(checks[0]!.msg.rd, true);
      assert.equal(checks[0]!.proto, 'udp');
      const gaps = checks.slice(1).map((c, i) => c.at - checks[i]!.at);
      for (const g of gaps) assert.ok(g >= 130 && g < 600, `checks ${g} ms apart (timeout 100 ms + interval 50 ms)`);
      alive = true;
      await waitUntil(() => h.forwards[0]!.opts.upstreams[0]!.fails === 0, 2000, 'a passing check');
      const n = a.healthChecks.length;
      await sleep(300);
      assert.equal(a.healthChecks.length, n, 'no more checks once healthy');
    } finally {
      h.stop();
    }
  });

  it('asks the configured `domain` without RD (`no_rec`), over TCP with force_tcp', async () => {
    let alive = false;
    a.behaviour = (q, r) => {
      if (alive) r.send(answer(q));
    };
    a.reset();
    const h = forwardChain(
      `forward . 127.0.0.1:${a.port} {\n force_tcp\n health_check 30ms no_rec domain example.net\n read_timeout 100ms\n max_connect_attempts 1\n}`,
    );
    try {
      await h.ask('x.example.org.', QType.A);
      await waitUntil(() => a.received.some((q) => q.msg.questions[0]!.name === 'example.net.'), 2000, 'a check');
      const check = a.received.find((q) => q.msg.questions[0]!.name === 'example.net.')!;
      assert.equal(check.msg.questions[0]!.type, QType.NS);
      assert.equal(check.msg.rd, false);
      assert.equal(check.proto, 'tcp');
      alive = true;
    } finally {
      h.stop();
    }
  });

  it('marks an upstream down after more than max_fails failed checks, skips it, and uses it again once it answers', async () => {
    let aAlive = false;
    a.behaviour = switchable(() => aAlive);
    b.behaviour = answerAll;
    a.reset();
    b.reset();
    const h = forwardChain(
      `forward . 127.0.0.1:${a.port} 127.0.0.1:${b.port} {\n policy sequential\n max_fails 2\n health_check 30ms\n read_timeout 150ms\n}`,
    );
    const upA = h.forwards[0]!.opts.upstreams[0]!;
    try {
      const first = await h.ask('d1.example.org.', QType.A);
      assert.equal(first.msg.rcode, Rcode.NOERROR, 'the second upstream answered');
      assert.ok(first.ms >= 140, 'after the first upstream timed out');
      await waitUntil(() => upA.down(2), 3000, 'the first upstream to be down');
      assert.equal(upA.fails, 3, 'down means more than max_fails (2) failed checks');
      const queriesToA = a.queries.length;
      const second = await h.ask('d2.example.org.', QType.A);
      assert.equal(second.msg.rcode, Rcode.NOERROR);
      assert.ok(second.ms < 150, `a down upstream is skipped (took ${second.ms} ms)`);
      assert.equal(a.queries.length, queriesToA);
      aAlive = true;
      await waitUntil(() => !upA.down(2), 2000, 'the first upstream to be up again');
      await h.ask('d3.example.org.', QType.A);
      assert.equal(a.queries.at(-1)!.msg.questions[0]!.name, 'd3.example.org.');
    } finally {
      h.stop();
    }
  });

  it('when every upstream is down, tries one at random once and counts healthcheck_broken', async () => {
    a.behaviour = silent;
    b.behaviour = silent;
    const h = forwardChain(
      `forward . 127.0.0.1:${a.port} 127.0.0.1:${b.port} {\n max_fails 1\n health_check 20ms\n read_timeout 100ms\n max_connect_attempts 2\n}`,
    );
    const [ua, ub] = h.forwards[0]!.opts.upstreams;
    try {
      await h.ask('down1.example.org.', QType.A);
      await waitUntil(() => ua!.down(1) && ub!.down(1), 3000, 'both upstreams down');
      a.reset();
      b.reset();
      const broken = h.forwards[0]!.opts.metrics.healthcheckBroken;
      const r = await h.ask('down2.example.org.', QType.A);
      assert.equal(r.msg.rcode, Rcode.SERVFAIL);
      assert.equal(a.queries.length + b.queries.length, 1, 'exactly one try');
      assert.equal(h.forwards[0]!.opts.metrics.healthcheckBroken, broken + 1);
      assert.match(r.res.error ?? '', /i\/o timeout/);
    } finally {
      h.stop();
    }
  });

  it('with failfast_all_unhealthy_upstreams answers SERVFAIL at once when every upstream is down', async () => {
    a.behaviour = silent;
    const h = forwardChain(
      `forward . 127.0.0.1:${a.port} {\n max_fails 1\n health_check 20ms\n read_timeout 100ms\n max_connect_attempts 1\n failfast_all_unhealthy_upstreams\n}`,
    );
    const ua = h.forwards[0]!.opts.upstreams[0]!;
    try {
      await h.ask('ff1.example.org.', QType.A);
      await waitUntil(() => ua.down(1), 3000, 'the upstream to be down');
      a.reset();
      const r = await h.ask('ff2.example.org.', QType.A);
      assert.equal(r.msg.rcode, Rcode.SERVFAIL);
      assert.ok(r.ms < 100, `took ${r.ms} ms`);
      assert.equal(a.queries.length, 0);
      assert.equal(r.res.error, 'no healthy proxies');
    } finally {
      h.stop();
    }
  });

  it('does not retry a refusing upstream in a tight loop: passes start at most once a second until it is down', async () => {
    const port = await freePort();
    const h = forwardChain(`forward . 127.0.0.1:${port} {\n health_check 100ms\n}`);
    const u = h.forwards[0]!.opts.upstreams[0]!;
    try {
      const before = u.stats.requests;
      const r = await h.ask('refused.example.org.', QType.A);
      assert.equal(r.msg.rcode, Rcode.SERVFAIL);
      assert.ok(r.ms >= 900 && r.ms < 2500, `took ${r.ms} ms`);
      assert.ok(u.stats.requests - before <= 3, `${u.stats.requests - before} tries`);
      assert.match(r.res.error ?? '', /connection refused/);
    } finally {
      h.stop();
    }
  });

  it('with max_fails 0 never checks and never marks an upstream down', async () => {
    a.behaviour = silent;
    a.reset();
    const h = forwardChain(
      `forward . 127.0.0.1:${a.port} {\n max_fails 0\n health_check 10ms\n read_timeout 50ms\n max_connect_attempts 1\n}`,
    );
    try {
      await h.ask('mf0.example.org.', QType.A);
      await sleep(150);
      assert.equal(a.healthChecks.length, 0);
      assert.equal(h.forwards[0]!.opts.upstreams[0]!.down(0), false);
    } finally {
      h.stop();
    }
  });

  it('refuses queries beyond max_concurrent with REFUSED, counting them, without marking anyone unhealthy', async () => {
    a.behaviour = (q, r) => setTimeout(() => answerAll(q, r), 200);
    a.reset();
    const h = forwardChain(`forward . 127.0.0.1:${a.port} {\n max_concurrent 2\n}`);
    try {
      const before = h.forwards[0]!.opts.metrics.maxConcurrentRejects;
      const [r1, r2, r3] = await Promise.all([
        h.ask('c1.example.org.', QType.A),
        h.ask('c2.example.org.', QType.A),
        h.ask('c3.example.org.', QType.A),
      ]);
      assert.equal(r1.msg.rcode, Rcode.NOERROR);
      assert.equal(r2.msg.rcode, Rcode.NOERROR);
      assert.equal(r3.msg.rcode, Rcode.REFUSED);
      assert.ok(r3.ms < 100);
      assert.equal(r3.res.error, 'concurrent queries exceeded maximum 2');
      assert.equal(h.forwards[0]!.opts.metrics.maxConcurrentRejects, before + 1);
      assert.equal(h.forwards[0]!.inflight, 0);
      assert.equal(a.healthChecks.length, 0);
      assert.equal((await h.ask('c4.example.org.', QType.A)).msg.rcode, Rcode.NOERROR, 'room again once answered');
    } finally {
      h.stop();
    }
  });
});
