// `log` with a stdout nobody reads: the server keeps answering, memory stays flat, and the
// lines it cannot write are dropped and counted (clusterdns_log_dropped_lines_total), with one
// warning when dropping starts and one with the count when stdout drains.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BIN } from '../helpers/server.js';
import { buildQuery, sendUdp } from '../helpers/dns.js';
import { freePort } from '../helpers/ports.js';
import { childrenOf } from '../helpers/procs.js';
import { goodClientAtRest, goodP99Bound, IDLE_NAME, startGoodClient, startIdleServer } from '../helpers/good-client.js';
import { QType } from '../../src/dns/constants.js';

/** RSS of the process and its children, in MB. */
function rssMB(pid: number): number {
  let kb = 0;
  for (const p of [pid, ...childrenOf(pid)]) {
    try {
      kb += Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${p}/status`, 'utf8'))?.[1] ?? 0);
    } catch {
      /* gone */
    }
  }
  return kb / 1024;
}

async function dropped(metricsPort: number): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  const m = /^clusterdns_log_dropped_lines_total (\d+)/m.exec(text);
  assert.ok(m, 'clusterdns_log_dropped_lines_total is exported');
  return Number(m[1]);
}

/** Sends `perTick` queries every millisecond-ish tick for `ms`, never waiting for answers. */
async function flood(port: number, ms: number, perTick: number): Promise<number> {
  const dgram = await import('node:dgram');
  const sock = dgram.createSocket('udp4');
  sock.on('message', () => {});
  await new Promise<void>((r) => sock.bind(0, '127.0.0.1', () => r()));
  const packets = Array.from({ length: 64 }, (_, i) => buildQuery(`n${i}.a.test.`, QType.A));
  let sent = 0;
  const end = Date.now() + ms;
  while (Date.now() < end) {
    for (let i = 0; i < perTick; i++) sock.send(packets[sent++ % packets.length]!, port, '127.0.0.1');
    await new Promise((r) => setTimeout(r, 1));
  }
  sock.close();
  return sent;
}

test(
  'a stalled stdout reader: log lines are dropped and counted, memory stays flat, good clients stay fast',
  { timeout: 90_000 },
  async () => {
    const port = await freePort();
    const mp = await freePort();
    const dir = mkdtempSync(join(tmpdir(), 'clusterdns-logstall-'));
    const conf = join(dir, 'Corefile');
    writeFileSync(
      conf,
      `.:${port} {\n    bind 127.0.0.1\n    log\n    prometheus 127.0.0.1:${mp}\n    hosts {\n        10.0.0.1 good.test\n        fallthrough\n    }\n    whoami\n}\n`,
    );
    const idle = await startIdleServer();
    const proc = spawn(process.execPath, [BIN, '-conf', conf, '-workers', '1'], {
      cwd: dir,
      env: { ...process.env, CLUSTERDNS_EXIT_WITH_PARENT: '1' },
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    // The reader that stalls: nothing reads this pipe until the end of the test.
    proc.stdout.pause();
    try {
      const deadline = Date.now() + 15000;
      for (;;) {
        try {
          await sendUdp(port, buildQuery('good.test.', QType.A), 300);
          break;
        } catch (e) {
          if (Date.now() > deadline) throw e;
        }
      }
      // Fill the pipe and the 1 MB backlog, then measure from there.
      let droppedBefore = 0;
      for (let i = 0; i < 15 && droppedBefore === 0; i++) {
        await flood(port, 1000, 20);
        droppedBefore = await dropped(mp);
      }
      assert.ok(droppedBefore > 0, 'lines are dropped once the pipe and the backlog are full');
      const before = rssMB(proc.pid!);

      // About 20k queries a second for 8 s: unbounded, ~130 bytes a line would pile up (~20 MB).
      let peak = before;
      const sampler = setInterval(() => (peak = Math.max(peak, rssMB(proc.pid!))), 250);
      const sent = await flood(port, 8000, 20);
      clearInterval(sampler);
      const droppedAfter = await dropped(mp);
      const grew = peak - before;
      assert.ok(
        droppedAfter - droppedBefore > sent / 2,
        `most of the ${sent} lines were dropped (${droppedAfter - droppedBefore})`,
      );
      assert.ok(grew < 12, `RSS grew ${grew.toFixed(1)} MB while stdout stalled`);

      // Still stalled, at a rate the log plugin itself sustains: a well-behaved client stays fast.
      const rest = await goodClientAtRest(port, 'good.test.');
      const good = startGoodClient(port, 'good.test.');
      const control = startGoodClient(idle.port, IDLE_NAME);
      await Promise.all([good.ready, control.ready]);
      await flood(port, 5000, 2);
      const g = await good.stop();
      const c = await control.stop();
      process.stderr.write(
        `# sent ${sent} in 8 s; RSS ${before.toFixed(1)} -> peak ${peak.toFixed(1)} MB; dropped ${droppedBefore} -> ${droppedAfter}; good client p99 ${g.p99.toFixed(2)} ms over ${g.count}, at rest ${rest.p99.toFixed(2)} ms, an idle server's at the same time ${c.p99.toFixed(2)} ms\n`,
      );
      assert.ok(
        g.p99 < goodP99Bound(rest, c),
        `good client p99 ${g.p99.toFixed(2)} ms (at rest ${rest.p99.toFixed(2)} ms, an idle server's at the same time ${c.p99.toFixed(2)} ms)`,
      );

      // Once the reader reads again, the server says what it dropped, and logs again.
      let out = '';
      proc.stdout.on('data', (d: Buffer) => (out += d.toString('latin1')));
      proc.stdout.resume();
      const until = Date.now() + 10000;
      while (!/log output caught up: \d+ lines dropped/.test(out) && Date.now() < until)
        await new Promise((r) => setTimeout(r, 50));
      assert.match(out, /^\[WARNING\] log output cannot keep up: dropping lines until stdout drains$/m);
      assert.match(out, /^\[WARNING\] log output caught up: \d+ lines dropped while stdout could not keep up$/m);
      assert.equal(
        out.match(/cannot keep up: dropping/g)?.length,
        out.match(/caught up: /g)?.length,
        'one warning as dropping starts, one as it stops',
      );
      await sendUdp(port, buildQuery('logged-again.test.', QType.A), 2000);
      const until2 = Date.now() + 5000;
      while (!out.includes('"A IN logged-again.test. udp') && Date.now() < until2)
        await new Promise((r) => setTimeout(r, 50));
      assert.ok(out.includes('"A IN logged-again.test. udp'), 'lines are written again once stdout keeps up');
    } finally {
      proc.kill('SIGTERM');
      await new Promise((r) => proc.once('exit', r));
      await idle.stop();
    }
  },
);

test('names in log lines are escaped as CoreDNS (miekg/dns) writes them', { timeout: 30_000 }, async () => {
  const { startServer } = await import('../helpers/server.js');
  const s = await startServer({ corefile: `.:PORT {\n    bind 127.0.0.1\n    log\n    whoami\n}\n` });
  try {
    // One label holding every character miekg escapes with a backslash, and two it writes as \DDD.
    const label = Buffer.from('a"b\'c(d)e;f@g h.i\\j\x01\x7f', 'latin1');
    const q = Buffer.concat([
      Buffer.from([0xab, 0xcd, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, label.length]),
      label,
      Buffer.from([4]),
      Buffer.from('test'),
      Buffer.from([0, 0, 1, 0, 1]),
    ]);
    await sendUdp(s.port, q, 2000);
    await s.waitFor('"A IN ');
    assert.match(
      s.output(),
      /^\[INFO\] 127\.0\.0\.1:\d+ - 43981 "A IN a\\"b\\'c\\\(d\\\)e\\;f\\@g\\ h\\\.i\\\\j\\001\\127\.test\. udp \d+ false 512" NOERROR /m,
    );
  } finally {
    await s.stop();
  }
});
