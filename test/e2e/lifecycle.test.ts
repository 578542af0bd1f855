// Reload, shutdown with lameduck, and worker processes, driven through the real binary.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startServer } from '../helpers/server.js';
import { query } from '../helpers/dns.js';
import { freePort } from '../helpers/ports.js';
import { QType, Rcode } from '../../src/dns/constants.js';
import { childrenOf } from '../helpers/procs.js';
import { slowUpstream } from '../helpers/slow-upstream.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until<T>(fn: () => Promise<T | undefined>, ms: number): Promise<T | undefined> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    const v = await fn().catch(() => undefined);
    if (v !== undefined) return v;
    await sleep(100);
  }
  return undefined;
}

const conf = (entry: string) =>
  `.:PORT {\n    bind 127.0.0.1\n    reload 2s 1s\n    hosts {\n        ${entry}\n    }\n}\n`;

test(
  'reload picks up a changed Corefile, keeps the old one when the new is broken, and SIGUSR1 reloads at once',
  { timeout: 40000 },
  async () => {
    const s = await startServer({ corefile: conf('10.0.0.1 a.example') });
    try {
      assert.deepEqual((await query(s.port, 'a.example.', QType.A)).answers[0]?.data, { address: '10.0.0.1' });
      writeFileSync(s.corefile, conf('10.0.0.2 a.example').replaceAll('PORT', String(s.port)));
      const changed = await until(async () => {
        const r = await query(s.port, 'a.example.', QType.A);
        return (r.answers[0]?.data as { address: string }).address === '10.0.0.2' ? true : undefined;
      }, 8000);
      assert.ok(changed, 'the new Corefile was not loaded');

      writeFileSync(
        s.corefile,
        `.:${s.port} {\n    bind 127.0.0.1\n    reload 2s 1s\n    hosts {\n        ttl nope\n    }\n}\n`,
      );
      await s.waitFor(/reload failed.*Error during parsing: ttl: "nope"|Corefile changed but reload failed/, 8000);
      assert.deepEqual((await query(s.port, 'a.example.', QType.A)).answers[0]?.data, { address: '10.0.0.2' });

      writeFileSync(
        s.corefile,
        conf('10.0.0.3 a.example').replaceAll('PORT', String(s.port)).replace('reload 2s 1s', 'reload 1h'),
      );
      s.proc.kill('SIGUSR1');
      const viaSignal = await until(async () => {
        const r = await query(s.port, 'a.example.', QType.A);
        return (r.answers[0]?.data as { address: string }).address === '10.0.0.3' ? true : undefined;
      }, 1500);
      assert.ok(viaSignal, 'SIGUSR1 did not reload');
    } finally {
      await s.stop();
    }
  },
);

test('queries keep being answered while reloads happen', { timeout: 30000 }, async () => {
  const s = await startServer({ corefile: conf('10.0.0.1 a.example') });
  try {
    let answered = 0;
    let failed = 0;
    const stop = Date.now() + 3000;
    const load = (async () => {
      while (Date.now() < stop) {
        const r = await query(s.port, 'a.example.', QType.A, { timeoutMs: 1000 }).catch(() => null);
        if (r && r.rcode === Rcode.NOERROR && r.answers.length === 1) answered++;
        else failed++;
      }
    })();
    for (let i = 0; i < 6; i++) {
      s.proc.kill('SIGUSR1');
      await sleep(400);
    }
    await load;
    assert.ok(answered > 100, `only ${answered} answered`);
    assert.equal(failed, 0);
  } finally {
    await s.stop();
  }
});

test(
  'SIGTERM with lameduck keeps answering for the lameduck period, /ready says Shutting down, then exits 0',
  { timeout: 30000 },
  async () => {
    const healthPort = await freePort();
    const readyPort = await freePort();
    const s = await startServer({
      corefile: `.:PORT {\n bind 127.0.0.1\n health 127.0.0.1:${healthPort} {\n lameduck 2s\n }\n ready 127.0.0.1:${readyPort}\n whoami\n}\n`,
    });
    const health = await fetch(`http://127.0.0.1:${healthPort}/health`);
    assert.equal(health.status, 200);
    assert.equal(await health.text(), 'OK');
    const ready = await fetch(`http://127.0.0.1:${readyPort}/ready`);
    assert.equal(ready.status, 200);
    const t0 = Date.now();
    s.proc.kill('SIGTERM');
    await sleep(500);
    const during = await query(s.port, 'x.', QType.A);
    assert.equal(during.rcode, Rcode.NOERROR);
    const r2 = await fetch(`http://127.0.0.1:${readyPort}/ready`);
    assert.equal(r2.status, 503);
    assert.equal(await r2.text(), 'Shutting down');
    assert.equal((await fetch(`http://127.0.0.1:${healthPort}/health`)).status, 200);
    const code = await s.stop();
    assert.equal(code, 0);
    assert.ok(Date.now() - t0 >= 1900, 'exited before the lameduck period ended');
  },
);

test(
  'with two workers both serve, a killed worker is replaced, and SIGTERM stops them all',
  { timeout: 30000 },
  async () => {
    const s = await startServer({ corefile: `.:PORT {\n bind 127.0.0.1\n whoami\n}\n`, workers: 2 });
    try {
      const pid = s.proc.pid!;
      const workers = await until(async () => (childrenOf(pid).length === 2 ? childrenOf(pid) : undefined), 5000);
      assert.equal(workers?.length, 2);
      process.kill(workers[0]!, 'SIGKILL');
      for (let i = 0; i < 20; i++) assert.equal((await query(s.port, 'x.', QType.A)).rcode, Rcode.NOERROR);
      const replaced = await until(async () => {
        const now = childrenOf(pid);
        return now.length === 2 && !now.includes(workers[0]!) ? now : undefined;
      }, 5000);
      assert.ok(replaced, 'the killed worker was not replaced');
      await s.waitFor(/exited \(SIGKILL\); starting another/);
      assert.equal(await s.stop(), 0);
      await sleep(200);
      assert.deepEqual(childrenOf(pid), []);
    } finally {
      await s.stop();
    }
  },
);

test(
  'an answer still in flight when SIGTERM arrives goes out before the socket closes, and the exit is clean',
  { timeout: 20000 },
  async () => {
    // An upstream that answers after 400 ms: the query is inside forward when shutdown starts.
    const upstream = await slowUpstream('192.0.2.7', 400);
    const s = await startServer({ corefile: `.:PORT {\n bind 127.0.0.1\n forward . 127.0.0.1:${upstream.port}\n}\n` });
    try {
      const pending = query(s.port, 'slow.example.', QType.A, { timeoutMs: 3000 });
      await sleep(100);
      s.proc.kill('SIGTERM');
      const r = await pending;
      assert.deepEqual(r.answers[0]?.data, { address: '192.0.2.7' });
      assert.equal(await s.stop(), 0, s.output());
    } finally {
      upstream.close();
    }
  },
);

for (const workers of ['1', '2']) {
  test(
    `-workers ${workers}: an answer still in flight across a reload reaches its client, and the next queries get the new configuration's answer`,
    { timeout: 30000 },
    async () => {
      // The old configuration's upstream answers after 800 ms, so the query is inside `forward`
      // (and its cache's flight) while SIGUSR1 switches to a Corefile with another upstream.
      const old = await slowUpstream('192.0.2.7', 800);
      const fresh = await slowUpstream('192.0.2.8', 0);
      const corefile = (port: number | string, up: number) =>
        `.:${port} {\n    bind 127.0.0.1\n    cache 300\n    forward . 127.0.0.1:${up}\n}\n`;
      const s = await startServer({ corefile: corefile('PORT', old.port), args: ['-workers', workers] });
      try {
        const pending = [0, 1, 2].map(() => query(s.port, 'late.example.', QType.A, { timeoutMs: 4000 }));
        await sleep(200);
        writeFileSync(s.corefile, corefile(s.port, fresh.port));
        s.proc.kill('SIGUSR1');
        await s.waitFor(/Reloading complete/, 5000);
        for (const r of await Promise.all(pending)) {
          assert.equal(r.rcode, Rcode.NOERROR, s.output());
          assert.deepEqual(r.answers[0]?.data, { address: '192.0.2.7' }, 'the late answer goes to its asker');
        }
        // The late answer came after the switch: neither the new cache nor the native answer
        // table (kept across the reload with the socket) may hand it out now.
        await sleep(300);
        for (let i = 0; i < 20; i++) {
          const r = await query(s.port, 'late.example.', QType.A);
          assert.deepEqual(r.answers[0]?.data, { address: '192.0.2.8' }, `query ${i} after the reload`);
        }
      } finally {
        await s.stop();
        old.close();
        fresh.close();
      }
    },
  );
}

test(
  '-workers auto starts as many workers as the cgroup CPU quota and affinity allow',
  { timeout: 40000 },
  async () => {
    const { mkdtempSync, mkdirSync } = await import('node:fs');
    const os = await import('node:os');
    const { autoWorkers } = await import('../../src/server/workercount.js');
    const probe = 'a.example';
    // A fixture cgroup root limiting the process to one CPU (v2 cpu.max and v1 cfs files).
    const root = mkdtempSync(join(os.tmpdir(), 'cgroup-'));
    writeFileSync(join(root, 'cpu.max'), '100000 100000\n');
    mkdirSync(join(root, 'cpu'));
    writeFileSync(join(root, 'cpu', 'cpu.cfs_quota_us'), '100000\n');
    writeFileSync(join(root, 'cpu', 'cpu.cfs_period_us'), '100000\n');
    const limited = await startServer({
      corefile: conf(`10.0.0.1 ${probe}`),
      args: ['-workers', 'auto'],
      env: { CLUSTERDNS_CGROUP_ROOT: root },
    });
    try {
      assert.equal((await query(limited.port, `${probe}.`, QType.A)).rcode, Rcode.NOERROR);
      assert.equal(
        childrenOf(limited.proc.pid!).length,
        0,
        'a 1-CPU quota serves in one process, whatever the host has',
      );
    } finally {
      await limited.stop();
    }
    const expected = autoWorkers();
    const s = await startServer({ corefile: conf(`10.0.0.1 ${probe}`), args: ['-workers', 'auto'] });
    try {
      assert.equal((await query(s.port, `${probe}.`, QType.A)).rcode, Rcode.NOERROR);
      assert.equal(
        childrenOf(s.proc.pid!).length,
        expected > 1 ? expected : 0,
        `auto: ${expected} of ${os.availableParallelism()} CPUs`,
      );
    } finally {
      await s.stop();
    }
  },
);
