// The loop plugin through the real binary: a server forwarding to itself (or to a server that
// forwards back) exits 1 with CoreDNS's FATAL line; with a real upstream it probes once and
// turns itself off.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { QType } from '../../src/dns/constants.js';
import { buildQuery, query, sendUdp } from '../helpers/dns.js';
import { freePort } from '../helpers/ports.js';
import { startServer, type RunningServer } from '../helpers/server.js';
import { answerAll, FakeUpstream, sleep, waitUntil } from '../forward/upstreams.js';

function exitOf(s: RunningServer, ms = 15000): Promise<number | null> {
  if (s.proc.exitCode !== null) return Promise.resolve(s.proc.exitCode);
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`still running after ${ms} ms:\n${s.output()}`)), ms);
    s.proc.on('exit', (c) => {
      clearTimeout(t);
      resolve(c);
    });
  });
}

const FATAL = (port: number, zone: string, zoneRe: string) =>
  new RegExp(
    `\\[FATAL\\] plugin/loop: Loop \\(127\\.0\\.0\\.1:\\d+ -> :${port}\\) detected for zone "${zone.replace(/\./g, '\\.')}", see https://coredns\\.io/plugins/loop#troubleshooting\\. Query: "HINFO \\d+\\.\\d+\\.${zoneRe}"`,
  );

describe('loop detection', () => {
  it('exits 1 with the FATAL line when the server forwards to itself', async () => {
    const s = await startServer({ corefile: '.:PORT {\n    loop\n    forward . 127.0.0.1:PORT\n}\n', noWait: true });
    try {
      assert.equal(await exitOf(s), 1);
      assert.match(s.output(), FATAL(s.port, '.', ''));
    } finally {
      await s.stop();
    }
  });

  it('detects the loop with cache in the block too (the node-local template has both)', async () => {
    const s = await startServer({
      corefile: '.:PORT {\n    cache 30\n    loop\n    forward . 127.0.0.1:PORT\n}\n',
      noWait: true,
    });
    try {
      assert.equal(await exitOf(s), 1);
      assert.match(s.output(), FATAL(s.port, '.', ''));
    } finally {
      await s.stop();
    }
  });

  it('detects a loop through a second server that forwards back, for the zone of the block', async () => {
    const frontPort = await freePort();
    const back = await startServer({ corefile: `example.org:PORT {\n    forward . 127.0.0.1:${frontPort}\n}\n` });
    const s = await startServer({
      corefile: `example.org:PORT {\n    loop\n    forward . 127.0.0.1:${back.port}\n}\n`,
      port: frontPort,
      noWait: true,
    });
    try {
      assert.equal(await exitOf(s), 1);
      assert.match(s.output(), FATAL(frontPort, 'example.org.', 'example\\.org\\.'));
    } finally {
      await s.stop();
      await back.stop('SIGKILL'); // its forwards to the dead front would hold a graceful stop
    }
  });

  it('exits 1 from a worker process too (-workers 2)', async () => {
    const s = await startServer({
      corefile: '.:PORT {\n    loop\n    forward . 127.0.0.1:PORT\n}\n',
      workers: 2,
      noWait: true,
    });
    try {
      assert.equal(await exitOf(s), 1);
      assert.match(s.output(), FATAL(s.port, '.', ''));
    } finally {
      await s.stop();
    }
  });
});

describe('loop with a healthy upstream', () => {
  let up: FakeUpstream;
  let s: RunningServer;
  before(async () => {
    up = await FakeUpstream.start({ behaviour: answerAll });
    s = await startServer({ corefile: `.:PORT {\n    loop\n    forward . 127.0.0.1:${up.port}\n}\n` });
  });
  after(async () => {
    await s?.stop();
    await up?.close();
  });

  it('sends one HINFO probe through forward, then turns itself off and keeps serving', async () => {
    await waitUntil(() => up.received.some((q) => q.msg.questions[0]!.type === QType.HINFO), 5000, 'the probe');
    const probes = up.received.filter((q) => q.msg.questions[0]!.type === QType.HINFO);
    assert.equal(probes.length, 1);
    const name = probes[0]!.msg.questions[0]!.name;
    assert.match(name, /^\d+\.\d+\.$/);
    await sleep(200);
    // Seen again and again now, the probe name no longer counts: the plugin is off.
    for (let i = 0; i < 4; i++) await sendUdp(s.port, buildQuery(name, QType.HINFO));
    const r = await query(s.port, 'www.example.org.', QType.A);
    assert.equal(r.answers.length, 1);
    assert.equal(s.proc.exitCode, null);
  });
});
