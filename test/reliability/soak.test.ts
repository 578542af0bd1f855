// The soak of RELIABILITY.md, one minute of it (`npm run soak -- --minutes 10` is the long
// run): dnsperf at 70% of the measured maximum against clusterdns (kubernetes + cache 30) while
// 1,000 Services a minute change and the Corefile is reloaded, next to unbound at the same rate.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

/** The part of bench/soak.mjs's --json report this test judges. */
interface SoakReport {
  rate: number;
  reloads: unknown[];
  reloadsApplied: number;
  config: { workers: number };
  cluster: { changes: number };
  soak: { sent: number; lost: number };
  peer: { sent: number; lost: number } | null;
  checker: {
    sent: number;
    right: number;
    wrong: number;
    servfail: number;
    otherRcode: number;
    lost: number;
    wrongSamples: unknown[];
  };
  latency: { p99Ms: number; windowP99MaxMs: number };
  rss: { firstMiB: number; lastMiB: number; growthMiB: number };
  serverLog: { panics: number; errors: number; sample: string[] };
}

const missing = ['dnsperf', 'unbound'].filter((t) => spawnSync('sh', ['-c', `command -v ${t}`]).status !== 0);

// Bounds for a loaded 2-core CI machine; the figures of a quiet run are in RELIABILITY.md.
const LOSS_MARGIN = 0.01; // lost share may exceed unbound's by at most 1 point
const RSS_GROWTH_MIB = 100; // primary + 2 workers over one minute, 3 reloads included
// A reload keeps the running watch (no relist), so no window stands out: on a quiet machine
// p99 is ~13 ms and the worst 10-s window ~27 ms (RELIABILITY.md). CI runs this beside other
// test files on 2 cores, so the bounds leave room for that; a reload that rebuilt the cluster
// under load (~0.9 s windows before) or any stall of that order fails them.
const P99_MS = 600;
const WINDOW_P99_MS = 1000;

test(
  'soak, 60 s: no wrong answer, losses like unbound at the same rate, RSS bounded, p99 bounded',
  { skip: missing.length > 0 && `needs ${missing.join(', ')}`, timeout: 170_000 },
  async () => {
    const dir = mkdtempSync(join(tmpdir(), 'clusterdns-soak-test-'));
    const json = join(dir, 'soak.json');
    try {
      const args = [
        resolve('bench/soak.mjs'),
        '--minutes',
        '1',
        '--probe-seconds',
        '5',
        '--peer-seconds',
        '15',
        '--reload-seconds',
        '20',
        '--workers',
        '2',
        '--json',
        json,
      ];
      const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      child.stdout.on('data', (d: Buffer) => (out += d.toString()));
      child.stderr.on('data', (d: Buffer) => (out += d.toString()));
      // The soak stops everything it started on SIGTERM; this test stops the soak if it is cancelled.
      const kill = () => child.kill('SIGTERM');
      process.once('exit', kill);
      const code = await new Promise<number | null>((r) => child.on('exit', (c) => r(c)));
      process.off('exit', kill);
      assert.equal(code, 0, out);
      const r = JSON.parse(readFileSync(json, 'utf8')) as SoakReport;
      const report = `\n${out}`;

      assert.equal(r.checker.wrong, 0, `wrong answers: ${JSON.stringify(r.checker.wrongSamples)}${report}`);
      assert.equal(r.checker.servfail + r.checker.otherRcode, 0, `error rcodes${report}`);
      assert.ok(r.checker.right > 5000, `the checker checked ${r.checker.right} answers${report}`);
      assert.ok(r.cluster.changes >= 900, `only ${r.cluster.changes} Service changes${report}`);
      assert.ok(
        r.reloads.length >= 3 && r.reloadsApplied >= r.reloads.length,
        `reloads: ${r.reloads.length} sent, ${r.reloadsApplied} applied${report}`,
      );

      assert.ok(r.peer, 'unbound was measured');
      const lostShare = r.soak.lost / r.soak.sent;
      const peerShare = r.peer.lost / r.peer.sent;
      assert.ok(
        lostShare <= peerShare + LOSS_MARGIN,
        `clusterdns lost ${(100 * lostShare).toFixed(3)}%, unbound ${(100 * peerShare).toFixed(3)}%${report}`,
      );
      assert.ok(
        r.checker.lost / r.checker.sent <= peerShare + LOSS_MARGIN,
        `the checker lost ${r.checker.lost} of ${r.checker.sent}${report}`,
      );

      assert.ok(
        r.rss.growthMiB < RSS_GROWTH_MIB,
        `RSS grew ${r.rss.growthMiB} MiB (${r.rss.firstMiB} → ${r.rss.lastMiB})${report}`,
      );
      assert.ok(r.latency.p99Ms < P99_MS, `p99 ${r.latency.p99Ms} ms${report}`);
      assert.ok(
        r.latency.windowP99MaxMs < WINDOW_P99_MS,
        `the worst 10-s window's p99 ${r.latency.windowP99MaxMs} ms${report}`,
      );
      assert.equal(r.serverLog.panics, 0, `plugin panics: ${r.serverLog.sample.join('\n')}`);
      assert.equal(r.serverLog.errors, 0, `errors logged: ${r.serverLog.sample.join('\n')}`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
);
