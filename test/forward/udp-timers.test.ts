// Deadlines of queries forwarded over UDP: one timer per upstream socket sweeps them (not a
// timer per query), and each query still fails at its own read timeout, not earlier or later.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { QType, Rcode } from '../../src/dns/constants.js';
import { FakeUpstream, sleep } from './upstreams.js';
import { forwardChain } from './harness.js';

const timers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;

describe('forward over UDP: timers and read timeouts', () => {
  let up: FakeUpstream;
  before(async () => {
    up = await FakeUpstream.start({ behaviour: () => {} }); // never answers
  });
  after(() => up.close());

  it('40 queries waiting on a silent upstream hold at most one timer per socket, and each fails at its read timeout', async () => {
    const h = forwardChain(`forward . 127.0.0.1:${up.port} {\n  max_fails 0\n  read_timeout 600ms\n}`);
    try {
      const idle = timers();
      const t0 = performance.now();
      const asked = Array.from({ length: 40 }, (_, i) =>
        h.ask(`q${i}.example.org.`, QType.A).then((r) => ({ r, ms: performance.now() - t0 })),
      );
      await sleep(100);
      // 4 sockets per upstream; 40 per-query timers before.
      assert.ok(timers() - idle <= 4, `${timers() - idle} timers for 40 queries in flight`);
      const done = await Promise.all(asked);
      for (const { r, ms } of done) {
        assert.equal(r.msg.rcode, Rcode.SERVFAIL);
        assert.ok(ms >= 4400 && ms < 7000, `SERVFAIL after ${ms.toFixed(0)} ms, not at the 5 s deadline`);
      }
      // Each try waits its 600 ms and no more before the next: at most 9 in 5 s, and a timer
      // that fired late (or a sweep that lost a query) would leave fewer.
      const tries = new Map<string, number>();
      for (const q of up.queries) {
        const name = q.msg.questions[0]!.name;
        tries.set(name, (tries.get(name) ?? 0) + 1);
      }
      assert.equal(tries.size, 40);
      for (const [name, n] of tries) assert.ok(n >= 4 && n <= 9, `${name}: ${n} tries`);
    } finally {
      h.stop();
    }
  });
});
