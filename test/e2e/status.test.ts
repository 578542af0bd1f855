// /status.json on the health listener of the real binary: rate, rcode mix, latency
// percentiles, cache hit ratio, top names and NXDOMAIN names, upstream health and API
// state, and with several workers the numbers of the whole process.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { startServer, type RunningServer } from '../helpers/server.js';
import { buildQuery, query, sendUdp } from '../helpers/dns.js';
import { freePort } from '../helpers/ports.js';
import { QType, Rcode } from '../../src/dns/constants.js';
import type { StatusReport } from '../../src/status/report.js';
import { FakeUpstream } from '../forward/upstreams.js';

const CLUSTER = readFileSync('examples/demo/cluster.yaml', 'utf8');

async function report(port: number): Promise<StatusReport> {
  const res = await fetch(`http://127.0.0.1:${port}/status.json`);
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
  return (await res.json()) as StatusReport;
}

/** Polls the report until `ok` holds (the numbers move on a one-second tick). */
async function reportWhen(
  port: number,
  ok: (r: StatusReport) => boolean,
  what: string,
  ms = 5000,
): Promise<StatusReport> {
  const deadline = Date.now() + ms;
  let last = await report(port);
  while (!ok(last)) {
    if (Date.now() > deadline) assert.fail(`not within ${ms} ms: ${what}; last report ${JSON.stringify(last)}`);
    await new Promise((r) => setTimeout(r, 100));
    last = await report(port);
  }
  return last;
}

describe('status: /status.json of one process', () => {
  let s: RunningServer;
  let healthPort: number;
  let upstream: FakeUpstream;
  let deadPort: number;

  before(async () => {
    healthPort = await freePort();
    deadPort = await freePort();
    upstream = await FakeUpstream.start();
    s = await startServer({
      corefile: `.:PORT {
  bind 127.0.0.1
  health 127.0.0.1:${healthPort} {
    status
  }
  cache 30
  kubernetes cluster.local {
    manifests cluster.yaml
  }
  hosts {
    10.0.0.1 a.test
    fallthrough
  }
  forward up.test 127.0.0.1:${upstream.port}
  forward . 127.0.0.1:${deadPort} {
    max_fails 1
    health_check 100ms
  }
}
`,
      files: { 'cluster.yaml': CLUSTER },
    });
  });

  after(async () => {
    await s?.stop();
    await upstream?.close();
  });

  test('the page and the report are served next to /health, and the page is only the status page', async () => {
    const health = await fetch(`http://127.0.0.1:${healthPort}/health`);
    assert.equal(await health.text(), 'OK');
    const page = await fetch(`http://127.0.0.1:${healthPort}/status`);
    assert.equal(page.status, 200);
    assert.match(page.headers.get('content-type') ?? '', /^text\/html/);
    assert.match(page.headers.get('content-security-policy') ?? '', /default-src 'none'/);
    assert.match(await page.text(), /<title>clusterdns status<\/title>/);
  });

  test('counts every query, the rcode mix, latency percentiles, cache hits, top names, upstreams and the API', async () => {
    for (let i = 0; i < 40; i++)
      assert.equal((await query(s.port, i % 2 ? 'A.TeSt.' : 'a.test.', QType.A)).rcode, Rcode.NOERROR);
    for (let i = 0; i < 6; i++)
      assert.equal((await query(s.port, 'missing.default.svc.cluster.local.', QType.A)).rcode, Rcode.NXDOMAIN);
    for (let i = 0; i < 3; i++) assert.equal((await query(s.port, `w${i}.up.test.`, QType.A)).rcode, Rcode.NOERROR);
    assert.equal((await query(s.port, 'kubernetes.default.svc.cluster.local.', QType.A)).answers.length, 1);
    // The dead upstream's query ends in SERVFAIL once the tries run out; it is counted then.
    assert.equal((await query(s.port, 'elsewhere.example.', QType.A, { timeoutMs: 8000 })).rcode, Rcode.SERVFAIL);
    const sent = 40 + 6 + 3 + 1 + 1;

    const r = await reportWhen(
      healthPort,
      (x) => x.queries.total === sent && x.upstreams.some((u) => u.state === 'down'),
      `${sent} queries and the dead upstream down`,
    );
    assert.equal(r.workers, 1);
    assert.deepEqual(r.rcodes.total, { NOERROR: 44, NXDOMAIN: 6, SERVFAIL: 1 });
    assert.equal(r.latency.total.count, sent);
    const { p50, p90, p99 } = r.latency.total;
    assert.ok(
      p50 !== null && p90 !== null && p99 !== null && p50 > 0 && p50 <= p90 && p90 <= p99,
      JSON.stringify(r.latency.total),
    );
    assert.ok(p50 < 0.05, `p50 of mostly cache hits: ${p50}`);
    // Every query passed the cache: a.test and the NXDOMAIN name after their first answer hit.
    assert.equal(r.cache.total.requests, sent);
    assert.ok(r.cache.total.hits >= 39 + 5, `hits ${r.cache.total.hits}`);
    assert.equal(r.cache.total.hitRatio, r.cache.total.hits / r.cache.total.requests);

    assert.equal(r.topNames[0]!.name, 'a.test.', 'names are counted lowercased');
    assert.ok(r.topNames[0]!.count > 38 && r.topNames[0]!.count <= 40, `decayed count ${r.topNames[0]!.count}`);
    assert.ok(r.topNames[0]!.share > 0.7 && r.topNames[0]!.share < 0.85, `share ${r.topNames[0]!.share}`);
    assert.deepEqual(
      r.topNxdomain.map((n) => n.name),
      ['missing.default.svc.cluster.local.'],
    );
    assert.equal(r.topNxdomain[0]!.share, 1);

    const up = r.upstreams.find((u) => u.to === `127.0.0.1:${upstream.port}`)!;
    const dead = r.upstreams.find((u) => u.to === `127.0.0.1:${deadPort}`)!;
    assert.equal(up.state, 'up');
    assert.equal(up.requests, 3);
    assert.deepEqual(up.rcodes, { NOERROR: 3 });
    assert.ok(up.meanLatency !== null && up.meanLatency < 1);
    assert.equal(dead.state, 'down');
    assert.ok(dead.healthcheckFailures >= 2 && dead.noReply >= 1, JSON.stringify(dead));

    assert.equal(r.kubernetes.length, 1);
    const k = r.kubernetes[0]!;
    assert.deepEqual(k.zones, ['cluster.local.']);
    assert.match(k.source, /^manifests .*cluster\.yaml$/);
    assert.equal(k.state, 'up');
    assert.equal(k.services, 6);
    assert.equal(k.namespaces, 2);
    assert.ok(k.lastChange !== null && Date.parse(k.lastChange) <= Date.now());
  });

  test('a reload keeps the page, its routes and its counting', async () => {
    const before = (await report(healthPort)).queries.total;
    s.proc.kill('SIGUSR1');
    await s.waitFor(/Reloading complete/, 8000);
    assert.equal((await fetch(`http://127.0.0.1:${healthPort}/status`)).status, 200);
    for (let i = 0; i < 5; i++) await query(s.port, 'a.test.', QType.A);
    const r = await reportWhen(healthPort, (x) => x.queries.total === before + 5, 'the 5 queries after the reload');
    assert.equal(r.topNames[0]!.name, 'a.test.', 'the names counted before the reload are kept');
    assert.equal(r.upstreams.length, 2, 'upstreams of the new configuration only');
  });

  test('the rate follows the load: above zero while queries flow, back to zero after', async () => {
    const stopAt = Date.now() + 2500;
    const load = (async () => {
      while (Date.now() < stopAt)
        await Promise.all(Array.from({ length: 10 }, () => sendUdp(s.port, buildQuery('a.test.', QType.A))));
    })();
    const busy = await reportWhen(healthPort, (x) => x.queries.perSecond > 50, 'a rate above 50/s under load');
    assert.ok(
      busy.queries.recent > 0 && busy.latency.recent.count > 0 && busy.cache.recent.hitRatio! > 0.9,
      JSON.stringify(busy.queries),
    );
    await load;
    await reportWhen(healthPort, (x) => x.queries.perSecond === 0, 'the rate back at zero', 4000);
  });
});

test('status: with two workers the report sums both processes', { timeout: 30000 }, async () => {
  const healthPort = await freePort();
  const s = await startServer({
    corefile: `.:PORT {\n bind 127.0.0.1\n health 127.0.0.1:${healthPort} {\n  status\n }\n kubernetes cluster.local {\n  manifests cluster.yaml\n }\n hosts {\n  10.0.0.1 a.test\n  fallthrough\n }\n}\n`,
    files: { 'cluster.yaml': CLUSTER },
    workers: 2,
  });
  try {
    // Over TCP, one connection per query: the kernel spreads connections over both workers.
    for (let i = 0; i < 40; i++) await query(s.port, 'a.test.', QType.A, { tcp: i % 2 === 0 });
    for (let i = 0; i < 8; i++) await query(s.port, 'nope.default.svc.cluster.local.', QType.A, { tcp: i % 2 === 0 });
    const r = await reportWhen(healthPort, (x) => x.queries.total === 48, 'all 48 queries of both workers');
    assert.equal(r.workers, 2);
    assert.deepEqual(r.rcodes.total, { NOERROR: 40, NXDOMAIN: 8 });
    assert.equal(r.latency.total.count, 48);
    assert.equal(r.topNames[0]!.name, 'a.test.');
    assert.ok(Math.abs(r.topNames[0]!.count - 40) < 2, `merged count ${r.topNames[0]!.count}`);
    assert.deepEqual(
      r.topNxdomain.map((n) => n.name),
      ['nope.default.svc.cluster.local.'],
    );
    assert.ok(Math.abs(r.topNxdomain[0]!.count - 8) < 1);
    // Each worker's view of the shared watcher, counted once per worker.
    assert.equal(r.kubernetes.length, 1);
    assert.equal(r.kubernetes[0]!.state, 'up');
    assert.deepEqual(r.kubernetes[0]!.instances, { up: 2, stale: 0, syncing: 0 });
    assert.equal(r.kubernetes[0]!.services, 6, 'object counts are not multiplied by the workers');
  } finally {
    await s.stop();
  }
});
