// Several workers look like one server from outside: one configuration switched in one step,
// one watch with its errors, one set of numbers. Each test drives the real binary with
// `-workers 2` and asks from a fresh client socket per query, so the kernel spreads them.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { startServer, type RunningServer } from '../helpers/server.js';
import { query } from '../helpers/dns.js';
import { freePort } from '../helpers/ports.js';
import { childrenOf } from '../helpers/procs.js';
import { addressOf, allAnswer, scrape, total, until } from '../helpers/workers.js';
import { QType, Rcode } from '../../src/dns/constants.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const hostsConf = (ip: string, reload = 'reload 2s 1s') =>
  `.:PORT {\n    bind 127.0.0.1\n    ${reload}\n    hosts {\n        ${ip} a.example\n    }\n}\n`;

function rewrite(s: RunningServer, text: string): void {
  writeFileSync(s.corefile, text.replaceAll('PORT', String(s.port)));
}

test(
  'a reload switches every worker at once: after the first answer from the new Corefile, no query gets an old one',
  { timeout: 60000 },
  async () => {
    const s = await startServer({ corefile: hostsConf('10.0.0.1'), workers: 2 });
    try {
      assert.ok(await allAnswer(s.port, 'a.example.', '10.0.0.1'));
      const seen: Array<{ sent: number; got: number; ip: string | undefined }> = [];
      let firstNew = Infinity;
      const stopAt = { t: Date.now() + 20000 };
      const loop = async () => {
        while (Date.now() < stopAt.t) {
          const sent = performance.now();
          const r = await query(s.port, 'a.example.', QType.A, { timeoutMs: 1500 }).catch(() => null);
          const got = performance.now();
          const ip = r ? addressOf(r) : undefined;
          seen.push({ sent, got, ip });
          if (ip === '10.0.0.2' && got < firstNew) {
            firstNew = got;
            // Keep asking a while after the switch, then stop.
            stopAt.t = Math.min(stopAt.t, Date.now() + 3000);
          }
        }
      };
      const loops = Array.from({ length: 4 }, loop);
      await sleep(200);
      rewrite(s, hostsConf('10.0.0.2'));
      await Promise.all(loops);
      assert.ok(firstNew < Infinity, 'the new Corefile was loaded');
      const late = seen.filter((q) => q.ip === '10.0.0.1' && q.sent > firstNew);
      assert.equal(
        late.length,
        0,
        `${late.length} of ${seen.filter((q) => q.sent > firstNew).length} queries sent after the first new answer got the old one`,
      );
      assert.ok(
        seen.every((q) => q.ip === '10.0.0.1' || q.ip === '10.0.0.2'),
        'every query was answered',
      );
      assert.equal(
        s.output().match(/Running configuration SHA512/g)?.length,
        2,
        'each load (the start, the reload) is logged once, not once per worker',
      );
    } finally {
      await s.stop();
    }
  },
);

test(
  'a reload one worker cannot prepare is applied by none, and its error is logged once',
  { timeout: 60000 },
  async () => {
    const s = await startServer({
      corefile: hostsConf('10.0.0.1', 'reload 1h'),
      workers: 2,
      // Test-only hook: worker 2 fails to prepare any configuration naming 10.0.0.9.
      env: { CLUSTERDNS_TEST_FAIL_PREPARE: '2:10.0.0.9' },
    });
    try {
      assert.ok(await allAnswer(s.port, 'a.example.', '10.0.0.1'));
      rewrite(s, hostsConf('10.0.0.9', 'reload 1h'));
      s.proc.kill('SIGUSR1');
      await s.waitFor(/reload failed: .*worker 2 refuses this configuration; keeping the running configuration/, 10000);
      await sleep(500);
      assert.ok(await allAnswer(s.port, 'a.example.', '10.0.0.1', 40), 'no worker switched');
      assert.equal(s.output().match(/reload failed/g)?.length, 1, 'logged once');
      rewrite(s, hostsConf('10.0.0.3', 'reload 1h'));
      s.proc.kill('SIGUSR1');
      await until('every worker answers from the next good Corefile', 10000, () =>
        allAnswer(s.port, 'a.example.', '10.0.0.3'),
      );
    } finally {
      await s.stop();
    }
  },
);

test(
  'a replaced worker serves the running configuration, not a Corefile broken since',
  { timeout: 60000 },
  async () => {
    const s = await startServer({ corefile: hostsConf('10.0.0.1', 'reload 1h'), workers: 2 });
    try {
      rewrite(s, hostsConf('10.0.0.2', 'reload 1h'));
      s.proc.kill('SIGUSR1');
      await until('both workers switched', 10000, () => allAnswer(s.port, 'a.example.', '10.0.0.2'));
      writeFileSync(s.corefile, '.:1 {\n    nope\n}\n');
      const [victim] = childrenOf(s.proc.pid!);
      process.kill(victim!, 'SIGKILL');
      await until(
        'a replacement runs',
        10000,
        async () => childrenOf(s.proc.pid!).length === 2 && !childrenOf(s.proc.pid!).includes(victim!),
      );
      await sleep(500);
      assert.ok(await allAnswer(s.port, 'a.example.', '10.0.0.2', 40));
    } finally {
      await s.stop();
    }
  },
);

test(
  'counters (and /status totals) never fall when a worker is killed under load, and the load is still answered',
  { timeout: 60000 },
  async () => {
    const metricsPort = await freePort();
    const healthPort = await freePort();
    const s = await startServer({
      corefile: `.:PORT {\n    bind 127.0.0.1\n    prometheus 127.0.0.1:${metricsPort}\n    health 127.0.0.1:${healthPort} {\n        status\n    }\n    hosts {\n        10.0.0.1 a.example\n    }\n}\n`,
      workers: 2,
    });
    const statusTotal = async () => {
      const r = await fetch(`http://127.0.0.1:${healthPort}/status.json`);
      const text = await r.text();
      if (r.status !== 200) throw new Error(`/status.json: HTTP ${r.status}: ${text.slice(0, 300)}`);
      return (JSON.parse(text) as { queries: { total: number } }).queries.total;
    };
    let running = true;
    let loops: Array<Promise<void>> = [];
    try {
      let answered = 0;
      let lost = 0;
      const loop = async () => {
        while (running) {
          const r = await query(s.port, 'a.example.', QType.A, { timeoutMs: 1000 }).catch(() => null);
          if (r?.rcode === Rcode.NOERROR) answered++;
          else lost++;
        }
      };
      loops = Array.from({ length: 4 }, loop);
      const readings: number[] = [];
      const statusReadings: number[] = [];
      // A connection the killed worker had accepted (or was handed by the primary before it saw the
      // exit) is reset with it: ask again, for up to ~3 s on CI's loaded cores.
      const retry = async <T>(f: () => Promise<T>): Promise<T> => {
        for (let attempt = 1; ; attempt++) {
          try {
            return await f();
          } catch (e) {
            if (attempt >= 10) throw e;
            await sleep(300);
          }
        }
      };
      const read = async () => {
        readings.push(total(await retry(() => scrape(metricsPort)), 'coredns_dns_requests_total'));
        statusReadings.push(await retry(statusTotal));
      };
      for (let i = 0; i < 5; i++) {
        await read();
        await sleep(200);
      }
      const [victim] = childrenOf(s.proc.pid!);
      process.kill(victim!, 'SIGKILL');
      const end = Date.now() + 10000;
      while (
        Date.now() < end &&
        !(childrenOf(s.proc.pid!).length === 2 && !childrenOf(s.proc.pid!).includes(victim!))
      ) {
        // While the replacement starts a scrape may fail outright (on CI's loaded cores for over 3 s):
        // what is read must never fall; the reads after it must all succeed.
        await read().catch(() => undefined);
        await sleep(200);
      }
      // The replacement process exists; it serves once it has read the configuration, which on CI's
      // loaded cores has taken over 3 s: wait for a full reading before the ones that must all succeed.
      let lastFailure = '';
      await until('the replacement serves /metrics and /status.json', 20000, () =>
        read().then(
          () => true,
          (e: Error) => {
            lastFailure = String((e.cause as Error | undefined)?.message ?? e.message);
            return false;
          },
        ),
      ).catch((e: Error) => {
        throw new Error(
          `${e.message}; the last read failed with: ${lastFailure}\nserver output:\n${s.output().slice(-4000)}`,
        );
      });
      for (let i = 0; i < 5; i++) {
        await read();
        await sleep(200);
      }
      running = false;
      await Promise.all(loops);
      for (let i = 1; i < readings.length; i++)
        assert.ok(readings[i]! >= readings[i - 1]!, `coredns_dns_requests_total fell: ${readings.join(' ')}`);
      assert.ok(readings.at(-1)! > readings[0]!, 'it counted on');
      for (let i = 1; i < statusReadings.length; i++)
        assert.ok(
          statusReadings[i]! >= statusReadings[i - 1]!,
          `/status.json's total fell: ${statusReadings.join(' ')}`,
        );
      assert.ok(answered > 200, `only ${answered} answered`);
      assert.ok(lost <= answered * 0.05, `${lost} lost of ${answered + lost}`);
      assert.equal(childrenOf(s.proc.pid!).length, 2, 'the worker was replaced');
      const text = await scrape(metricsPort);
      assert.match(text, /^process_start_time_seconds \d+/m);
    } finally {
      // Also when an assertion failed: the query loops would otherwise keep the test file alive.
      running = false;
      await s.stop();
      await Promise.all(loops);
    }
  },
);

test(
  'a worker killed while the primary is sending to it does not take the server down (six kills under scrapes)',
  { timeout: 90000 },
  async () => {
    const metricsPort = await freePort();
    const s = await startServer({
      corefile: `.:PORT {\n    bind 127.0.0.1\n    prometheus 127.0.0.1:${metricsPort}\n    hosts {\n        10.0.0.1 a.example\n    }\n}\n`,
      workers: 2,
    });
    const primary = s.proc.pid!;
    // Every scrape makes the primary message each worker (its numbers are gathered): with many
    // at once, a worker SIGKILLed is sent to before the primary has seen it go (EPIPE on the Worker).
    let running = true;
    const loops = Array.from({ length: 16 }, async () => {
      while (running) await scrape(metricsPort).catch(() => sleep(20));
    });
    try {
      for (let kill = 0; kill < 6; kill++) {
        await until('two workers serve', 20000, async () => childrenOf(primary).length === 2);
        await sleep(500);
        const [victim] = childrenOf(primary);
        process.kill(victim!, 'SIGKILL');
        await until(`worker ${victim} replaced`, 20000, async () => !childrenOf(primary).includes(victim!));
        assert.equal(s.proc.exitCode, null, `the server ended after a worker was killed:\n${s.output().slice(-3000)}`);
      }
      await until('two workers serve', 20000, async () => childrenOf(primary).length === 2);
      running = false;
      await Promise.all(loops);
      assert.equal(s.proc.exitCode, null, `the server ended:\n${s.output().slice(-3000)}`);
      assert.doesNotMatch(s.output(), /Unhandled 'error' event/);
      await until('the replaced workers serve /metrics', 20000, async () =>
        /^coredns_build_info\{/m.test(await scrape(metricsPort)),
      );
      const m = await query(s.port, 'a.example.', QType.A, { timeoutMs: 2000 });
      assert.equal(addressOf(m), '10.0.0.1');
    } finally {
      running = false;
      await s.stop();
      await Promise.all(loops);
    }
  },
);
