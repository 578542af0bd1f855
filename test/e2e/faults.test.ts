// Faults while queries flow, through the real binary: the API server unreachable or failing,
// watches cut every second, upstreams that flap or crawl, Corefiles that vanish, break or
// cannot start. Each test keeps a client asking throughout and counts every query that went
// unanswered or was answered wrongly. Faults already proven elsewhere are listed in
// RELIABILITY.md with their tests.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { rmSync, writeFileSync } from 'node:fs';
import { KubeApiServer } from '../helpers/kubeapi.js';
import { startServer, type RunningServer } from '../helpers/server.js';
import { query } from '../helpers/dns.js';
import { freePort } from '../helpers/ports.js';
import { QType, Rcode } from '../../src/dns/constants.js';
import type { Message } from '../../src/dns/message.js';
import { namespace, service } from '../kubernetes/fixtures.js';
import { answer, FakeUpstream } from '../forward/upstreams.js';
import { childrenOf } from '../helpers/procs.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Child processes of `pid` (the cluster workers of a primary), from /proc. */

const firstAddress = (m: Message): string | null => {
  const a = m.answers.find((r) => r.type === QType.A);
  return a ? (a.data as { address: string }).address : null;
};

/** Polls until `name` has `ip` (null: NXDOMAIN); returns how long it took, or fails after `ms`. */
async function servedWithin(port: number, name: string, ip: string | null, ms: number): Promise<number> {
  const start = Date.now();
  let last = '';
  while (Date.now() - start < ms) {
    const m = await query(port, name, QType.A, { timeoutMs: 1000 }).catch(() => null);
    if (m && (ip === null ? m.rcode === Rcode.NXDOMAIN : firstAddress(m) === ip)) return Date.now() - start;
    last = m ? `rcode ${m.rcode} ${firstAddress(m)}` : 'no answer';
    await sleep(50);
  }
  assert.fail(`${name} did not become ${ip ?? 'NXDOMAIN'} within ${ms} ms (last: ${last})`);
}

interface Tally {
  asked: number;
  failures: string[];
}

/**
 * Asks for names one after another (a client with a 1 s timeout, as a stub resolver) until
 * stopped; each answer must be `expected(name)`. Timeouts, SERVFAIL and wrong data are failures.
 */
function keepAsking(
  port: number,
  names: string[],
  expected: (name: string) => string | null,
): { stop(): Promise<Tally> } {
  const tally: Tally = { asked: 0, failures: [] };
  let running = true;
  const loop = (async () => {
    for (let i = 0; running; i++) {
      const name = names[i % names.length]!;
      tally.asked++;
      const m = await query(port, name, QType.A, { timeoutMs: 1000 }).catch(() => null);
      const want = expected(name);
      if (m === null) tally.failures.push(`${name}: no answer within 1 s`);
      else if (want === null ? m.rcode !== Rcode.NXDOMAIN : firstAddress(m) !== want)
        tally.failures.push(`${name}: rcode ${m.rcode} ${firstAddress(m)}, want ${want ?? 'NXDOMAIN'}`);
      await sleep(10);
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return tally;
    },
  };
}

describe('kubernetes: the API server fails while queries flow', () => {
  let api: KubeApiServer;
  let s: RunningServer;
  const stable = Array.from({ length: 20 }, (_, i) => `stable-${i}.default.svc.cluster.local.`);
  const stableIp = (name: string) => `10.96.10.${Number(/stable-(\d+)/.exec(name)![1])}`;

  before(async () => {
    api = await KubeApiServer.create();
    api.apply(namespace('default'));
    for (let i = 0; i < 20; i++) api.apply(service('default', `stable-${i}`, [`10.96.10.${i}`]));
    s = await startServer({
      corefile: `.:PORT {\n    bind 127.0.0.1\n    cache 30\n    kubernetes cluster.local {\n        endpoint ${api.url}\n    }\n}\n`,
      probe: stable[0],
    });
  });

  after(async () => {
    await s?.stop();
    await api?.close();
  });

  test(
    'unreachable for a minute: every query is answered from the last known state; what changed meanwhile is served once it is back, without a relist',
    { timeout: 120_000 },
    async () => {
      const lists = api.listRequests;
      const load = keepAsking(s.port, stable, stableIp);
      await api.stop();
      await sleep(2000);
      api.apply(service('default', 'made-during-outage', ['10.96.11.1']));
      api.remove('Service', 'default', 'stable-19');
      await sleep(58_000);
      await api.start();
      // The reflector's backoff (0.5 s doubling, capped at 30 s, with jitter) bounds the catch-up.
      const catchUp = await servedWithin(s.port, 'made-during-outage.default.svc.cluster.local.', '10.96.11.1', 35_000);
      await servedWithin(s.port, 'stable-19.default.svc.cluster.local.', null, 1000);
      api.apply(service('default', 'stable-19', ['10.96.10.19']));
      await servedWithin(s.port, 'stable-19.default.svc.cluster.local.', '10.96.10.19', 1000);
      const t = await load.stop();
      // stable-19 was gone for a while: only its answers may differ, and only as NXDOMAIN.
      const failures = t.failures.filter((f) => !/^stable-19\.default\.svc\.cluster\.local\.: rcode 3 null/.test(f));
      assert.deepEqual(failures, [], `${failures.length} of ${t.asked} queries failed during the outage`);
      assert.ok(t.asked > 1000, `only ${t.asked} queries`);
      assert.equal(api.listRequests, lists, 'the watches resumed from their resourceVersion: no relist');
      console.log(
        `# a minute's outage: ${t.asked} queries answered from the last known state; caught up ${catchUp} ms after the API came back`,
      );
    },
  );

  test(
    'answering 500 to every request for 5 s (watches cut): answers go on, and it catches up after',
    { timeout: 60_000 },
    async () => {
      const load = keepAsking(s.port, stable, stableIp);
      api.failNext(1_000_000, 500);
      api.closeAllWatches();
      api.apply(service('default', 'made-during-500', ['10.96.11.2']));
      await sleep(5000);
      const refused = api.requestLog.filter((r) => r.status === 500).length;
      api.clearFailures();
      const catchUp = await servedWithin(s.port, 'made-during-500.default.svc.cluster.local.', '10.96.11.2', 20_000);
      const t = await load.stop();
      assert.deepEqual(t.failures, [], `${t.failures.length} of ${t.asked} queries failed`);
      assert.ok(refused >= 3, `the API refused ${refused} requests: retried, not given up`);
      assert.ok(refused < 60, `${refused} refused requests in 5 s: the retries back off`);
      assert.ok(catchUp < 20_000);
      await s
        .waitFor(/plugin\/kubernetes: .*500/, 1000)
        .catch(() => assert.fail(`the 500s were not logged:\n${s.output().slice(-2000)}`));
    },
  );

  test(
    'watches closed every second for 8 s while Services change: each change is served within 1.5 s, and nothing is relisted',
    { timeout: 60_000 },
    async () => {
      const lists = api.listRequests;
      const watches = api.watchRequests;
      const closer = setInterval(() => api.closeAllWatches(), 1000);
      let slowest = 0;
      try {
        for (let i = 0; i < 16; i++) {
          const ip = `10.96.12.${i}`;
          api.apply(service('default', 'flip', [ip]));
          slowest = Math.max(slowest, await servedWithin(s.port, 'flip.default.svc.cluster.local.', ip, 1500));
          await sleep(500);
        }
      } finally {
        clearInterval(closer);
      }
      assert.ok(
        api.watchRequests >= watches + 8,
        `${api.watchRequests - watches} new watches: closed ones are opened again`,
      );
      assert.equal(api.listRequests, lists, 'resumed from the last resourceVersion, never relisted');
      assert.ok(slowest < 1500, `slowest change took ${slowest} ms`);
    },
  );
});

describe('forward: misbehaving upstreams while queries flow', () => {
  test(
    'an upstream that flaps (silent 1 s, answering 1 s) beside a healthy one: every query is answered NOERROR',
    { timeout: 60_000 },
    async () => {
      let up = true;
      const flappy = await FakeUpstream.start({ behaviour: (q, r) => up && r.send(answer(q, { a: ['192.0.2.1'] })) });
      const healthy = await FakeUpstream.start({ behaviour: (q, r) => r.send(answer(q, { a: ['192.0.2.1'] })) });
      const flap = setInterval(() => (up = !up), 1000);
      const s = await startServer({
        corefile: `.:PORT {\n    bind 127.0.0.1\n    forward . 127.0.0.1:${flappy.port} 127.0.0.1:${healthy.port}\n}\n`,
      });
      try {
        const rcodes = new Map<number | string, number>();
        const latencies: number[] = [];
        const end = Date.now() + 8000;
        let n = 0;
        // Four clients, each name asked once (nothing to cache), each with a stub resolver's patience.
        await Promise.all(
          Array.from({ length: 4 }, async (_, c) => {
            while (Date.now() < end) {
              const t0 = Date.now();
              const m = await query(s.port, `q${c}-${n++}.example.org.`, QType.A, { timeoutMs: 6000 }).catch(
                () => null,
              );
              const key = m === null ? 'timeout' : m.rcode;
              rcodes.set(key, (rcodes.get(key) ?? 0) + 1);
              latencies.push(Date.now() - t0);
            }
          }),
        );
        const total = [...rcodes.values()].reduce((a, b) => a + b, 0);
        assert.deepEqual([...rcodes.keys()], [Rcode.NOERROR], `rcodes ${JSON.stringify([...rcodes])}`);
        // A query that first meets the flapping upstream while it is silent waits out its 2 s try.
        assert.ok(total > 20, `only ${total} queries`);
        assert.ok(flappy.queries.length > 0 && healthy.queries.length > 0, 'both upstreams were used');
        latencies.sort((a, b) => a - b);
        assert.ok(
          latencies[Math.floor(latencies.length / 2)]! < 500,
          `median ${latencies[Math.floor(latencies.length / 2)]} ms: the flapping one is mostly avoided`,
        );
      } finally {
        clearInterval(flap);
        await s.stop();
        await flappy.close();
        await healthy.close();
      }
    },
  );

  test(
    'a slow upstream (1.5 s) holds up only its own queries: local names answer at once meanwhile, and every slow one arrives',
    { timeout: 30_000 },
    async () => {
      const slow = await FakeUpstream.start({
        behaviour: (q, r) => setTimeout(() => r.send(answer(q, { a: ['192.0.2.9'] })), 1500),
      });
      const s = await startServer({
        corefile: `.:PORT {\n    bind 127.0.0.1\n    hosts {\n        10.0.0.1 local.example\n        fallthrough\n    }\n    forward . 127.0.0.1:${slow.port}\n}\n`,
      });
      try {
        const pending = Array.from({ length: 200 }, (_, i) =>
          query(s.port, `slow-${i}.example.org.`, QType.A, { timeoutMs: 5000 }),
        );
        await sleep(100);
        let worst = 0;
        for (let i = 0; i < 50; i++) {
          const t0 = performance.now();
          const m = await query(s.port, 'local.example.', QType.A);
          worst = Math.max(worst, performance.now() - t0);
          assert.equal(firstAddress(m), '10.0.0.1');
        }
        assert.ok(
          worst < 200,
          `a local name took ${worst.toFixed(0)} ms while 200 queries waited on the slow upstream`,
        );
        const slowAnswers = await Promise.all(pending);
        assert.ok(
          slowAnswers.every((m) => firstAddress(m) === '192.0.2.9'),
          'every slow query got its answer',
        );
      } finally {
        await s.stop();
        await slow.close();
      }
    },
  );
});

describe('the Corefile goes wrong under a running server', () => {
  const conf = (port: number, ip: string, extra = '') =>
    `.:${port} {\n    bind 127.0.0.1\n${extra}    hosts {\n        ${ip} a.example\n    }\n}\n`;

  test(
    'two workers, SIGUSR1 with the Corefile deleted, then broken, then a worker killed: the running configuration serves throughout, the replacement included',
    { timeout: 40_000 },
    async () => {
      // No probe: startServer waits for the banner, which comes once both workers are ready.
      const s = await startServer({ corefile: conf(0, '10.0.0.1').replace('.:0', '.:PORT'), workers: 2 });
      try {
        const load = keepAsking(s.port, ['a.example.'], () => '10.0.0.1');
        rmSync(s.corefile);
        s.proc.kill('SIGUSR1');
        await s.waitFor(/reload failed: .*no such file or directory/, 5000);
        await sleep(1000);
        // The primary alone reads the Corefile: the error is logged once, not once per worker.
        assert.equal(s.output().match(/reload failed: .*no such file or directory/g)?.length, 1);
        writeFileSync(s.corefile, `.:${s.port} {\n    bind 127.0.0.1\n    hosts {\n        ttl nope\n    }\n}\n`);
        s.proc.kill('SIGUSR1');
        await s.waitFor(/Error during parsing: ttl/, 5000);
        // A worker dies while the Corefile on disk is broken: its replacement must not need it.
        const workers = childrenOf(s.proc.pid!);
        assert.equal(workers.length, 2);
        process.kill(workers[0]!, 'SIGKILL');
        await s.waitFor(/exited \(SIGKILL\); starting another/, 5000);
        let replaced: number[] = [];
        for (let i = 0; i < 50 && replaced.length < 2; i++) {
          await sleep(100);
          replaced = childrenOf(s.proc.pid!);
        }
        await sleep(1500);
        const t = await load.stop();
        assert.deepEqual(t.failures, [], `${t.failures.length} of ${t.asked} failed`);
        assert.ok(t.asked > 20, `only ${t.asked} queries`);
        assert.equal(childrenOf(s.proc.pid!).length, 2, 'two workers again');
        assert.doesNotMatch(
          s.output(),
          /exited \(1\)/,
          'the replacement started (no crash loop on the broken Corefile)',
        );
        writeFileSync(s.corefile, conf(s.port, '10.0.0.2'));
        s.proc.kill('SIGUSR1');
        await servedWithin(s.port, 'a.example.', '10.0.0.2', 5000);
        // Both workers took it, the replacement too: twenty answers in a row from the new configuration.
        await sleep(500);
        for (let i = 0; i < 20; i++) assert.equal(firstAddress(await query(s.port, 'a.example.', QType.A)), '10.0.0.2');
      } finally {
        await s.stop();
      }
    },
  );

  test(
    'a Corefile whose plugins cannot start (a port in use) is rolled back: nothing of it keeps running, the old one serves on',
    { timeout: 30_000 },
    async () => {
      const taken = net.createServer();
      await new Promise<void>((r) => taken.listen(0, '127.0.0.1', () => r()));
      const takenPort = (taken.address() as net.AddressInfo).port;
      const healthPort = await freePort();
      const readyPort = await freePort();
      const s = await startServer({
        corefile: conf(0, '10.0.0.1', `    health 127.0.0.1:${healthPort}\n`).replace('.:0', '.:PORT'),
        probe: 'a.example.',
      });
      try {
        writeFileSync(
          s.corefile,
          conf(
            s.port,
            '10.0.0.2',
            `    health 127.0.0.1:${healthPort}\n    ready 127.0.0.1:${readyPort}\n    prometheus 127.0.0.1:${takenPort}\n`,
          ),
        );
        s.proc.kill('SIGUSR1');
        await s.waitFor(
          /reload failed: cannot listen on 127\.0\.0\.1:\d+: address already in use; keeping the running configuration/,
          5000,
        );
        assert.equal(firstAddress(await query(s.port, 'a.example.', QType.A)), '10.0.0.1');
        // The failed configuration's listeners are closed again, and the shared health port is the old one's.
        await assert.rejects(
          fetch(`http://127.0.0.1:${readyPort}/ready`),
          'the failed configuration left /ready listening',
        );
        const health = await fetch(`http://127.0.0.1:${healthPort}/health`);
        assert.equal(health.status, 200);
        assert.equal(await health.text(), 'OK');
      } finally {
        await s.stop();
        taken.close();
      }
    },
  );
});
