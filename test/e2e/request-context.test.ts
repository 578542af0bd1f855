// The request context through the real binary: a query's upstream work ends when its client
// leaves (a TCP connection that closes) or its deadline (5 s after it arrived) passes, in
// forward, searchfan and ExternalName resolution. What the fake upstreams receive is counted.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import dgram from 'node:dgram';
import { after, before, describe, test } from 'node:test';
import { QType, Rcode } from '../../src/dns/constants.js';
import { decodeMessage } from '../../src/dns/message.js';
import { answer, FakeUpstream, sleep, waitUntil, type Received } from '../forward/upstreams.js';
import { buildQuery, query } from '../helpers/dns.js';
import { KubeApiServer } from '../helpers/kubeapi.js';
import { freePort } from '../helpers/ports.js';
import { startServer, type RunningServer } from '../helpers/server.js';
import { scrape, total } from '../helpers/workers.js';

/** dig over TCP that gives up after one second and closes its connection; resolves when it has exited. */
function digTcpGivingUp(port: number, name: string): Promise<number> {
  return new Promise((resolve) => {
    execFile('dig', ['@127.0.0.1', '-p', String(port), '+tcp', '+tries=1', '+time=1', name, 'A'], () =>
      resolve(Date.now()),
    );
  });
}

/** Queries the upstream got for `name` (health checks and others left out). */
function asked(up: FakeUpstream, name: string): Received[] {
  return up.queries.filter((r) => r.msg.questions[0]?.name.toLowerCase() === name);
}

describe('forward: a TCP client that leaves ends its upstream tries', () => {
  let up: FakeUpstream;
  let s: RunningServer;

  before(async () => {
    // Never answers: without the client leaving, forward would try again every 2 s until 5 s.
    up = await FakeUpstream.start({ behaviour: () => {} });
    s = await startServer({
      corefile: `.:PORT {\n    bind 127.0.0.1\n    errors\n    forward . 127.0.0.1:${up.port} {\n        max_fails 0\n    }\n}\n`,
    });
  });

  after(async () => {
    await s?.stop();
    await up?.close();
  });

  test('dig +tcp gives up after 1 s: the upstream gets no further try for that query', async () => {
    const start = Date.now();
    const left = await digTcpGivingUp(s.port, 'silent.example.org.');
    assert.ok(left - start < 3000, 'dig gave up after about a second');
    assert.ok(asked(up, 'silent.example.org.').length >= 1, 'the query reached the upstream');
    // Past forward's 2 s and 4 s retries, well before its 5 s deadline.
    await sleep(Math.max(0, start + 4600 - Date.now()));
    const tries = asked(up, 'silent.example.org.');
    assert.deepEqual(
      tries.filter((r) => r.at > left + 200).map((r) => r.at - start),
      [],
      'no try after the client left (ms after the query)',
    );
    assert.equal(tries.length, 1, 'one try in all, not one every read_timeout (2 s)');
    await s.waitFor(/plugin\/errors: 2 silent\.example\.org\. A: context canceled/, 3000);
  });
});

describe('forward: a UDP query past its deadline', () => {
  let slow: FakeUpstream;
  let silent: FakeUpstream;
  let s: RunningServer;

  before(async () => {
    // The first forward's upstream answers SERVFAIL after 3 s, which `next` hands to the second
    // forward, whose upstream never answers: only 2 s of the query's 5 s are left for it.
    slow = await FakeUpstream.start({
      behaviour: (q, r) => setTimeout(() => r.send(answer(q, { rcode: Rcode.SERVFAIL })), 3000),
    });
    silent = await FakeUpstream.start({ behaviour: () => {} });
    s = await startServer({
      corefile: `.:PORT {
    bind 127.0.0.1
    forward . 127.0.0.1:${slow.port} {
        read_timeout 4s
        next SERVFAIL
    }
    forward . 127.0.0.1:${silent.port} {
        max_fails 0
    }
}
`,
    });
  });

  after(async () => {
    await s?.stop();
    await slow?.close();
    await silent?.close();
  });

  test('the second forward gives up at the deadline; no try goes out after it', async () => {
    const sock = dgram.createSocket('udp4');
    const start = Date.now();
    const reply = new Promise<{ at: number; rcode: number }>((resolve) =>
      sock.on('message', (m) => resolve({ at: Date.now(), rcode: decodeMessage(m).rcode })),
    );
    sock.send(buildQuery('late.example.org.', QType.A), s.port, '127.0.0.1');
    try {
      const timeout = sleep(9500).then(() => null);
      const got = await Promise.race([reply, timeout]);
      assert.ok(got !== null, 'an answer came');
      assert.equal(got.rcode, Rcode.SERVFAIL);
      assert.ok(
        got.at - start < 6500,
        `SERVFAIL at the deadline, not 5 s after the second forward began: ${got.at - start} ms`,
      );
      assert.equal(asked(slow, 'late.example.org.').length, 1);
      // Old behaviour would go on to 3 + 5 s: wait past its next retry (at 5 s + 2 s).
      await sleep(Math.max(0, start + 7600 - Date.now()));
      const tries = asked(silent, 'late.example.org.').map((r) => r.at - start);
      assert.ok(tries.length >= 1, 'the second forward tried once');
      assert.deepEqual(
        tries.filter((t) => t > 5300),
        [],
        'no try after the deadline (ms after the query)',
      );
    } finally {
      sock.close();
    }
  });
});

describe('searchfan: the lookup is cancelled when its only client leaves', () => {
  let up: FakeUpstream;
  let s: RunningServer;
  let metricsPort: number;

  before(async () => {
    // Truncated over UDP, silent over TCP: each candidate's branch waits on a TCP connection.
    up = await FakeUpstream.start({
      behaviour: (q, r) => {
        if (q.proto === 'udp') r.send(answer(q, { tc: true }));
      },
    });
    metricsPort = await freePort();
    s = await startServer({
      corefile: `.:PORT {
    bind 127.0.0.1
    searchfan 127.0.0.1:${up.port} {
        search default.svc.cluster.local
        ndots 5
    }
    prometheus 127.0.0.1:${metricsPort}
}
`,
    });
  });

  after(async () => {
    await s?.stop();
    await up?.close();
  });

  test('dig +tcp gives up: every branch is cancelled (its TCP connection closed), a new query asks again', async () => {
    const cancelledBefore = total(await scrape(metricsPort), 'coredns_searchfan_cancelled_total');
    const start = Date.now();
    const gaveUp = digTcpGivingUp(s.port, 'web');
    // Both candidates (web.default.svc.cluster.local., web.) are waiting on a TCP connection.
    await waitUntil(() => up.open.size === 2, 3000, 'two TCP branches');
    const left = await gaveUp;
    await waitUntil(() => up.open.size === 0, 1500, 'the branches closed after the client left');
    assert.ok(Date.now() - start < 4000, 'closed well before the 5 s timeout');
    const cancelled = total(await scrape(metricsPort), 'coredns_searchfan_cancelled_total') - cancelledBefore;
    assert.equal(cancelled, 2);
    // The lookup is gone: the same question starts a new one instead of joining it.
    const udpBefore = up.queries.filter((r) => r.proto === 'udp').length;
    void digTcpGivingUp(s.port, 'web');
    await waitUntil(() => up.queries.filter((r) => r.proto === 'udp').length === udpBefore + 2, 2000, 'a new fan-out');
    assert.ok(Date.now() - left < 2500);
  });
});

describe('kubernetes: an ExternalName target resolved through forward stops when the client leaves', () => {
  let api: KubeApiServer;
  let up: FakeUpstream;
  let s: RunningServer;

  before(async () => {
    api = await KubeApiServer.create();
    api.apply({ kind: 'Namespace', metadata: { name: 'default' } });
    api.apply({
      kind: 'Service',
      metadata: { name: 'outside', namespace: 'default' },
      spec: { type: 'ExternalName', externalName: 'target.example.org' },
    });
    up = await FakeUpstream.start({ behaviour: () => {} });
    s = await startServer({
      corefile: `.:PORT {
    bind 127.0.0.1
    kubernetes cluster.local {
        endpoint ${api.url}
    }
    forward . 127.0.0.1:${up.port} {
        max_fails 0
    }
}
`,
    });
  });

  after(async () => {
    await s?.stop();
    await up?.close();
    await api?.close();
  });

  test('dig +tcp for the Service gives up: the target is not asked again', async () => {
    const start = Date.now();
    const left = await digTcpGivingUp(s.port, 'outside.default.svc.cluster.local.');
    assert.ok(asked(up, 'target.example.org.').length >= 1, 'the target reached the upstream');
    await sleep(Math.max(0, start + 4600 - Date.now()));
    const tries = asked(up, 'target.example.org.');
    assert.deepEqual(
      tries.filter((r) => r.at > left + 200).map((r) => r.at - start),
      [],
      'no try after the client left (ms after the query)',
    );
    assert.equal(tries.length, 1);
  });
});

describe('cache: a lookup shared with another query outlives its first client leaving', () => {
  let up: FakeUpstream;
  let s: RunningServer;

  before(async () => {
    up = await FakeUpstream.start({
      behaviour: (q, r) => setTimeout(() => r.send(answer(q, { a: ['192.0.2.7'] })), 1500),
    });
    s = await startServer({
      corefile: `.:PORT {\n    bind 127.0.0.1\n    cache 30\n    forward . 127.0.0.1:${up.port} {\n        max_fails 0\n    }\n}\n`,
    });
  });

  after(async () => {
    await s?.stop();
    await up?.close();
  });

  test('dig +tcp leaves after 1 s; a UDP query that joined its cache miss still gets the answer', async () => {
    const gaveUp = digTcpGivingUp(s.port, 'shared.example.org.');
    await waitUntil(() => asked(up, 'shared.example.org.').length === 1, 2000, 'the miss reached the upstream');
    const joined = await query(s.port, 'shared.example.org.', QType.A, { timeoutMs: 4000 });
    await gaveUp;
    assert.equal(joined.rcode, Rcode.NOERROR);
    assert.deepEqual(
      joined.answers.map((a) => (a.data as { address: string }).address),
      ['192.0.2.7'],
    );
    assert.equal(asked(up, 'shared.example.org.').length, 1, 'one trip upstream for both');
  });
});

describe('two workers: a TCP client that leaves ends its tries on the worker that owns the name', () => {
  let up: FakeUpstream;
  let s: RunningServer;

  before(async () => {
    up = await FakeUpstream.start({ behaviour: () => {} });
    s = await startServer({
      workers: 2,
      corefile: `.:PORT {\n    bind 127.0.0.1\n    forward . 127.0.0.1:${up.port} {\n        max_fails 0\n    }\n}\n`,
    });
  });

  after(async () => {
    await s?.stop();
    await up?.close();
  });

  test('eight names over TCP, each dig gives up after 1 s: one try each, none after', async () => {
    // About half of them reach the worker that does not own their name and are handed over.
    const names = Array.from({ length: 8 }, (_, i) => `handed-${i}.example.org.`);
    const start = Date.now();
    const left = await Promise.all(names.map((n) => digTcpGivingUp(s.port, n)));
    await sleep(Math.max(0, start + 4600 - Date.now()));
    names.forEach((n, i) => {
      const tries = asked(up, n);
      assert.deepEqual(
        tries.filter((r) => r.at > left[i]! + 200).map((r) => r.at - start),
        [],
        `${n}: no try after the client left (ms after the query)`,
      );
      assert.equal(tries.length, 1, n);
    });
  });
});
