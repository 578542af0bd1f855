// The latency bench's recording clients (issue 23 point 3): the C client takes send and answer
// times from the kernel's stamps of its datagrams, so it measures a responder that answers a
// known delay after each query arrived as that delay, even while the client itself is stopped
// and reads the answers late; losses are counted; its --raw file is what tail-causes reads.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { once } from 'node:events';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
const load = (p: string): Promise<any> => import(pathToFileURL(resolve(p)).href);

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

/** Runs `cmd` to its end; → its stdout's last line as JSON. */
async function runJson(child: ChildProcess): Promise<Json> {
  let out = '';
  let err = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  const [code] = await once(child, 'exit');
  assert.equal(code, 0, `exit ${code}: ${err}`);
  return JSON.parse(out.trim().split('\n').pop()!);
}

async function withResponder(
  delayUs: number,
  dropEvery: number,
  body: (port: number, dir: string) => Promise<void>,
): Promise<Json> {
  const { buildDelayResponder } = await load('bench/lib/latency-client-build.mjs');
  const { freePort } = await load('bench/lib/servers.mjs');
  const built = buildDelayResponder();
  assert.ok(built.path, built.error);
  const dir = mkdtempSync(join(tmpdir(), 'clusterdns-latency-client-'));
  const port: number = await freePort(new Set());
  const responder = spawn(
    built.path,
    ['--port', String(port), '--delay-us', String(delayUs), '--drop-every', String(dropEvery)],
    {
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  const report = runJson(responder);
  try {
    await new Promise((r) => setTimeout(r, 200));
    await body(port, dir);
  } finally {
    responder.kill('SIGTERM');
    rmSync(dir, { recursive: true, force: true });
  }
  return report;
}

function queryFile(dir: string): string {
  const f = join(dir, 'queries.txt');
  writeFileSync(f, 'a.example. A\nb.example. AAAA\nc.example. TXT\n');
  return f;
}

const build = await load('bench/lib/latency-client-build.mjs');
const cc = build.buildCClient();
const responderBuilt = build.buildDelayResponder();

test(
  'C latency client: a responder answering 2 ms after each query arrived measures 2 ms at p50 and p99, also while the client is stopped and reads its answers late',
  { skip: !cc.path && `the C client does not build: ${cc.error}`, timeout: 60_000 },
  async () => {
    const { readRaw } = await load('bench/lib/gc-trace.mjs');
    const { attribute } = await load('bench/lib/tail-causes.mjs');
    let c: Json;
    let raw: Json;
    const responder = await withResponder(2000, 50, async (port, dir) => {
      const rawFile = join(dir, 'c.raw');
      const child = spawn(
        cc.path,
        [
          ...['--port', String(port), '--rate', '2000', '--seconds', '3', '--queries', queryFile(dir)],
          ...['--pace', 'timer', '--skip', '0', '--timeout-ms', '500', '--raw', rawFile],
        ],
        { stdio: ['ignore', 'pipe', 'pipe'] },
      );
      const result = runJson(child);
      // Three stops of 40 ms while answers keep arriving: a client timing its own reads
      // would count up to 40 ms more for the ~80 answers each stop holds back.
      for (const at of [900, 1600, 2300]) {
        await new Promise((r) => setTimeout(r, at - (at === 900 ? 0 : 700)));
        child.kill('SIGSTOP');
        await new Promise((r) => setTimeout(r, 40));
        child.kill('SIGCONT');
      }
      c = await result;
      raw = readRaw(rawFile);
    });
    const ctx = `client ${JSON.stringify(c)}; responder ${JSON.stringify(responder)}`;
    assert.equal(c.client, 'c');
    // The times came from the kernel: every answer's, and nearly every send's.
    assert.equal(c.timestamps.rxUser, 0, ctx);
    assert.ok(c.timestamps.txKernel >= 0.95 * 6000, ctx);
    // Every query the responder dropped is lost, every other one answered.
    assert.equal(c.lostTotal, responder.dropped, ctx);
    assert.equal(c.rcodes.NOERROR, responder.answered, ctx);
    assert.equal(c.lost, 120, ctx); // 1 in 50
    // The delay, within what the responder itself was late (its wakeups) and 0.5 ms, over the
    // same queries (--skip 0).
    assert.ok(c.latencyMs.p50 >= 2 && c.latencyMs.p50 <= 2.5, ctx);
    assert.ok(c.latencyMs.p99 >= 2 && c.latencyMs.p99 <= 2.5 + responder.lateUs.p99 / 1000, ctx);
    assert.ok(c.latencyMs.max <= 3 + responder.lateUs.max / 1000, ctx);
    // The client was stopped and read answers late, and none of that was counted.
    assert.ok(c.stalls.count >= 2, ctx);
    assert.ok(c.readLagMs.max >= 20, ctx);
    // The --raw file, as tail-causes reads it: every query, the same percentiles, the stalls.
    assert.equal(raw.send.length, 6000);
    assert.equal(raw.stalls.length, c.stalls.count);
    assert.equal(String(raw.startNs), String(Number(c.startNs)));
    const a = attribute(
      raw,
      { 'client stall': { iv: raw.stalls.map(([s, e]: number[]) => [raw.startNs + s!, raw.startNs + e!]) } },
      {
        timeoutNs: 500e6,
      },
    );
    assert.equal(a.all.queries, 6000);
    assert.ok(Math.abs(a.p50Ms - c.latencyMs.p50) <= 0.01, `${a.p50Ms} vs ${c.latencyMs.p50}`);
    // Send times are on CLOCK_MONOTONIC since startNs, in schedule order, near the schedule.
    for (let i = 1; i < raw.send.length; i++) assert.ok(raw.send[i] >= raw.send[i - 1] - 1e5, `send ${i}`);
    assert.ok(raw.send[0] >= 0 && raw.send[0] < 5e6);
  },
);

test(
  'C latency client: nothing listening, every query is lost',
  { skip: !cc.path && `the C client does not build: ${cc.error}`, timeout: 30_000 },
  async () => {
    const { freePort } = await load('bench/lib/servers.mjs');
    const dir = mkdtempSync(join(tmpdir(), 'clusterdns-latency-client-'));
    try {
      const port: number = await freePort(new Set());
      const c = await runJson(
        spawn(
          cc.path,
          [
            ...['--port', String(port), '--rate', '500', '--seconds', '1', '--queries', queryFile(dir)],
            ...['--pace', 'timer', '--skip', '0', '--timeout-ms', '200'],
          ],
          { stdio: ['ignore', 'pipe', 'pipe'] },
        ),
      );
      assert.equal(c.sent, 500);
      assert.equal(c.lost, 500);
      assert.equal(c.answered, 0);
      assert.equal(c.latencyMs.p50, null);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
);

test(
  'Node latency client: the same command line and output against the same responder',
  { skip: !responderBuilt.path && `the delay responder does not build: ${responderBuilt.error}`, timeout: 60_000 },
  async () => {
    let c: Json;
    const responder = await withResponder(2000, 40, async (port, dir) => {
      c = await runJson(
        spawn(
          process.execPath,
          [
            resolve('bench/lib/latency-client.mjs'),
            ...['--port', String(port), '--rate', '1000', '--seconds', '2', '--queries', queryFile(dir)],
            ...['--pace', 'timer', '--skip', '0.5', '--timeout-ms', '500'],
          ],
          { stdio: ['ignore', 'pipe', 'pipe'] },
        ),
      );
    });
    const ctx = `client ${JSON.stringify(c)}; responder ${JSON.stringify(responder)}`;
    assert.equal(c.client, 'node');
    assert.equal(c.lostTotal, responder.dropped, ctx);
    assert.equal(c.rcodes.NOERROR, responder.answered, ctx);
    // It times its own reads: never less than the delay.
    assert.ok(c.latencyMs.p50 >= 2, ctx);
  },
);
