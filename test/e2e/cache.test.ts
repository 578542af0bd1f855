// cache through the real binary: in front of forward (to an upstream the test controls),
// with kubeadm's default cache block, with whoami, metrics on /metrics, and config errors.
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { QType, Rcode } from '../../src/dns/constants.js';
import { decodeMessage, type Message } from '../../src/dns/message.js';
import { buildQuery, dig, query } from '../helpers/dns.js';
import { freePort } from '../helpers/ports.js';
import { startServer, type RunningServer } from '../helpers/server.js';
import { answerTo, rr, sleep, soa, startUpstream, type Upstream } from '../cache/harness.js';
import { KubeApiServer } from '../helpers/kubeapi.js';
import { namespace, service } from '../kubernetes/fixtures.js';

async function scrape(port: number): Promise<string> {
  return (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
}

function upstreamZone(q: Message): Message {
  const question = q.questions[0]!;
  const name = question.name.toLowerCase();
  if (name.startsWith('nx')) {
    const m = answerTo(q, Rcode.NXDOMAIN);
    m.authorities.push(soa('example.org.', 3600, 600));
    return m;
  }
  const m = answerTo(q);
  if (question.type === QType.A) m.answers.push(rr(question.name, QType.A, 3600, { address: '192.0.2.1' }));
  else m.authorities.push(soa('example.org.', 3600, 600));
  return m;
}

describe('cache in front of forward', () => {
  let up: Upstream;
  let s: RunningServer;
  let metricsPort: number;
  before(async () => {
    up = await startUpstream(upstreamZone);
    metricsPort = await freePort();
    s = await startServer({
      corefile: `.:PORT {
    bind 127.0.0.1
    prometheus 127.0.0.1:${metricsPort}
    cache 30
    forward . 127.0.0.1:${up.port}
}
`,
    });
  });
  after(async () => {
    await s?.stop();
    await up?.close();
  });

  it('dig sees the TTL capped at 30 on the miss and counting down on hits, with the question as asked', async () => {
    const miss = await dig(s.port, ['Capped.Example.ORG', 'A']);
    assert.equal(miss.status, 'NOERROR');
    assert.deepEqual(miss.answer, ['Capped.Example.ORG. 30 IN A 192.0.2.1']);
    await sleep(2100);
    const hit = await dig(s.port, ['capped.example.org', 'A']);
    assert.match(hit.answer[0]!, /^capped\.example\.org\. (27|28) IN A 192\.0\.2\.1$/);
    assert.ok(hit.flags.includes('aa'), 'a hit has AA set, as in CoreDNS');
    assert.equal(up.count('capped.example.org.'), 1);
  });

  it('caches NXDOMAIN for min(SOA TTL, MINIMUM) capped at 30', async () => {
    const a = await dig(s.port, ['nxname.example.org', 'A']);
    assert.equal(a.status, 'NXDOMAIN');
    assert.match(a.authority[0]!, /^example\.org\. 30 IN SOA /);
    await dig(s.port, ['nxname.example.org', 'A']);
    assert.equal(up.count('nxname.example.org.'), 1);
  });

  it('1,000 concurrent identical queries reach the upstream once through forward; each reply has its own ID', async () => {
    up.delayMs = 300;
    const sock = dgram.createSocket('udp4');
    await new Promise<void>((r) => sock.bind(0, '127.0.0.1', () => r()));
    sock.setRecvBufferSize(4 * 1024 * 1024);
    const ids = new Set<number>();
    const done = new Promise<void>((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`only ${ids.size} replies`)), 15_000);
      sock.on('message', (msg) => {
        const m = decodeMessage(msg);
        assert.deepEqual(m.answers[0]?.data, { address: '192.0.2.1' });
        ids.add(m.id);
        if (ids.size === 1000) {
          clearTimeout(t);
          resolve();
        }
      });
    });
    for (let i = 0; i < 1000; i++)
      sock.send(buildQuery('burst.example.org.', QType.A, { id: 10_000 + i }), s.port, '127.0.0.1');
    try {
      await done;
    } finally {
      sock.close();
      up.delayMs = 0;
    }
    assert.equal(up.count('burst.example.org.'), 1);
    for (let i = 0; i < 1000; i++) assert.ok(ids.has(10_000 + i));
  });

  it('exposes the cache metrics with CoreDNS names and labels on /metrics', async () => {
    await query(s.port, 'metrics.example.org.', QType.A);
    await query(s.port, 'metrics.example.org.', QType.A);
    const text = await scrape(metricsPort);
    const server = `server="dns://:${s.port}"`;
    for (const re of [
      new RegExp(`^coredns_cache_requests_total\\{${server},zones="\\.",view=""\\} \\d+$`, 'm'),
      new RegExp(`^coredns_cache_hits_total\\{${server},type="success",zones="\\.",view=""\\} [1-9]\\d*$`, 'm'),
      new RegExp(`^coredns_cache_misses_total\\{${server},zones="\\.",view=""\\} [1-9]\\d*$`, 'm'),
      new RegExp(`^coredns_cache_entries\\{${server},type="success",zones="\\.",view=""\\} [1-9]\\d*$`, 'm'),
      new RegExp(`^coredns_cache_entries\\{${server},type="denial",zones="\\.",view=""\\} [1-9]\\d*$`, 'm'),
      new RegExp(`^coredns_cache_evictions_total\\{${server},type="success",zones="\\.",view=""\\} 0$`, 'm'),
      /^# TYPE coredns_cache_prefetch_total counter$/m,
      /^# TYPE coredns_cache_drops_total counter$/m,
      /^# TYPE coredns_cache_served_stale_total counter$/m,
    ]) {
      assert.match(text, re);
    }
  });
});

describe('names stored in a burst expire spread out, each hit at its CoreDNS TTL', () => {
  /**
   * Stores 200 names with TTL 10 one after another, asks them all again at once 9.45 s after the
   * first: which were fetched again, and which answers came back before that name's own 10 s
   * could have ended (a slow machine answers some later; those prove nothing either way).
   */
  async function burst(env: Record<string, string>) {
    const up = await startUpstream(upstreamZone);
    const s = await startServer({
      corefile: `.:PORT {\n    bind 127.0.0.1\n    cache 10\n    forward . 127.0.0.1:${up.port}\n}\n`,
      env,
    });
    try {
      const names = Array.from({ length: 200 }, (_, i) => `spread${i}.example.org.`);
      const sent: number[] = [];
      for (const n of names) {
        sent.push(Date.now());
        assert.equal((await query(s.port, n, QType.A)).answers[0]?.ttl, 10);
      }
      await sleep(sent[0]! + 9450 - Date.now());
      const again = await Promise.all(
        names.map(async (n) => {
          const ttl = (await query(s.port, n, QType.A, { timeoutMs: 3000 })).answers[0]!.ttl;
          return { ttl, done: Date.now() };
        }),
      );
      const counts = names.map((n) => up.count(n));
      const inTime = again.map((a, i) => a.done < sent[i]! + 10_000 - 20);
      // A name is a hit (TTL 1, or 2 if stored late) asked upstream once, or was fetched again (TTL 10).
      for (const [i, n] of names.entries()) {
        if (counts[i] === 2) assert.equal(again[i]!.ttl, 10, n);
        else
          assert.ok(
            counts[i] === 1 && again[i]!.ttl >= 1 && again[i]!.ttl <= 2,
            `${n}: ${counts[i]}, TTL ${again[i]!.ttl}`,
          );
      }
      return { counts, inTime };
    } finally {
      await s.stop();
      await up.close();
    }
  }

  it(
    'of 200 names stored one after another with TTL 10, at 9.45 s the first 64 are hits and only some of the rest were fetched again',
    { timeout: 30_000 },
    async () => {
      const { counts, inTime } = await burst({});
      // The first 64 stored in that second live exactly their 10 s, as in CoreDNS.
      const first = counts.slice(0, 64).filter((c, i) => inTime[i]);
      assert.ok(first.length >= 60, `only ${first.length} of the first 64 answered within their 10 s`);
      assert.deepEqual(new Set(first), new Set([1]));
      // The others end at random in their last second: by then some have, not all.
      const rest = counts.slice(64).filter((c, i) => inTime[64 + i]);
      const refetched = rest.filter((c) => c === 2).length;
      assert.ok(refetched >= 3 && refetched <= rest.length - 3, `${refetched} of ${rest.length} fetched again`);
    },
  );

  it(
    'with CLUSTERDNS_CACHE_SPREAD=0 all 200 live exactly their TTL: at 9.45 s every one is a hit',
    { timeout: 30_000 },
    async () => {
      const { counts, inTime } = await burst({ CLUSTERDNS_CACHE_SPREAD: '0' });
      const judged = counts.filter((c, i) => inTime[i]);
      assert.ok(judged.length >= 150, `only ${judged.length} of 200 answered within their 10 s`);
      assert.deepEqual(new Set(judged), new Set([1]));
    },
  );
});

describe("kubeadm's default cache block", () => {
  let up: Upstream;
  let s: RunningServer;
  before(async () => {
    up = await startUpstream(upstreamZone);
    s = await startServer({
      corefile: `.:PORT {
    bind 127.0.0.1
    hosts cluster.hosts cluster.local {
        reload 100ms
    }
    forward . 127.0.0.1:${up.port}
    cache 30 {
        disable success cluster.local
        disable denial cluster.local
    }
}
`,
      files: { 'cluster.hosts': '10.96.0.1 web.default.svc.cluster.local\n' },
    });
  });
  after(async () => {
    await s?.stop();
    await up?.close();
  });

  it('a cluster.local change is seen at once, while names outside the cluster stay cached', async () => {
    const before1 = await query(s.port, 'web.default.svc.cluster.local.', QType.A);
    assert.deepEqual(before1.answers[0]?.data, { address: '10.96.0.1' });
    assert.equal(before1.answers[0]?.ttl, 3600, "a name that is not cached keeps its plugin's TTL");
    await query(s.port, 'www.example.org.', QType.A);
    writeFileSync(
      join(s.dir, 'cluster.hosts'),
      '10.96.0.2 web.default.svc.cluster.local\n10.96.0.3 new.default.svc.cluster.local\n',
    );
    await sleep(600);
    const after1 = await query(s.port, 'web.default.svc.cluster.local.', QType.A);
    assert.deepEqual(after1.answers[0]?.data, { address: '10.96.0.2' });
    const created = await query(s.port, 'new.default.svc.cluster.local.', QType.A);
    assert.deepEqual(created.answers[0]?.data, { address: '10.96.0.3' });
    await query(s.port, 'www.example.org.', QType.A);
    assert.equal(up.count('www.example.org.'), 1);
  });
});

describe('cache stays coherent with the cluster: kubernetes invalidates what changed', () => {
  let api: KubeApiServer;
  let s: RunningServer;
  let metricsPort: number;
  before(async () => {
    api = await KubeApiServer.create();
    api.apply(namespace('default'));
    api.apply(service('default', 'web', ['10.96.0.10'], [['http', 'TCP', 80]]));
    metricsPort = await freePort();
    // No `disable` lines: cluster answers are cached for 30 s (negative ones too: ttl 30).
    s = await startServer({
      corefile: `.:PORT {
    bind 127.0.0.1
    prometheus 127.0.0.1:${metricsPort}
    cache 30
    kubernetes cluster.local {
        endpoint ${api.url}
        ttl 30
    }
}
`,
      probe: 'web.default.svc.cluster.local.',
    });
  });
  after(async () => {
    await s?.stop();
    await api?.close();
  });

  const denialHits = async () => {
    const text = await scrape(metricsPort);
    const m = new RegExp(
      `^coredns_cache_hits_total\\{server="dns://:${s.port}",type="denial",zones="\\.",view=""\\} (\\d+)$`,
      'm',
    ).exec(text);
    return m ? Number(m[1]) : 0;
  };

  /** Polls until `ok`; returns the milliseconds it took. */
  const within = async (ms: number, probe: () => Promise<Message>, ok: (m: Message) => boolean): Promise<number> => {
    const start = Date.now();
    while (Date.now() - start < ms) {
      if (ok(await probe())) return Date.now() - start;
      await sleep(20);
    }
    assert.fail(`not within ${ms} ms`);
  };

  it('a cached NXDOMAIN for a Service that is then created turns into its answer at once, SRV included', async () => {
    const A = () => query(s.port, 'new.default.svc.cluster.local.', QType.A);
    const SRV = () => query(s.port, '_http._tcp.new.default.svc.cluster.local.', QType.SRV);
    assert.equal((await A()).rcode, Rcode.NXDOMAIN);
    assert.equal((await SRV()).rcode, Rcode.NXDOMAIN);
    const hitsBefore = await denialHits();
    const cached = await A();
    assert.equal(cached.rcode, Rcode.NXDOMAIN);
    assert.ok((cached.authorities[0]?.ttl ?? 0) > 20, 'the NXDOMAIN is held for up to 30 s');
    assert.equal(await denialHits(), hitsBefore + 1, 'the second NXDOMAIN came from the cache');
    api.apply(service('default', 'new', ['10.96.0.77'], [['http', 'TCP', 80]]));
    const took = await within(3000, A, (m) => m.rcode === Rcode.NOERROR && m.answers.length === 1);
    assert.ok(took < 3000);
    assert.deepEqual((await A()).answers[0]?.data, { address: '10.96.0.77' });
    const srv = await SRV();
    assert.equal(srv.rcode, Rcode.NOERROR);
    assert.equal(srv.answers[0]?.type, QType.SRV);
  });

  it('a cached positive answer follows a changed ClusterIP at once', async () => {
    const A = () => query(s.port, 'web.default.svc.cluster.local.', QType.A);
    assert.deepEqual((await A()).answers[0]?.data, { address: '10.96.0.10' });
    assert.deepEqual((await A()).answers[0]?.data, { address: '10.96.0.10' });
    api.apply(service('default', 'web', ['10.96.0.11'], [['http', 'TCP', 80]]));
    await within(3000, A, (m) => (m.answers[0]?.data as { address?: string } | undefined)?.address === '10.96.0.11');
  });
});

describe('cache in front of whoami', () => {
  let s: RunningServer;
  before(async () => {
    s = await startServer({ corefile: `.:PORT {\n    bind 127.0.0.1\n    cache\n    whoami\n}\n` });
  });
  after(async () => {
    await s?.stop();
  });

  it('each client still sees its own port: a reply with no answer and no SOA is not cached', async () => {
    const ports = new Set<number>();
    for (let i = 0; i < 3; i++) {
      const m = await query(s.port, 'who.example.org.', QType.A);
      const srv = m.additionals.find((r) => r.type === QType.SRV)!;
      ports.add((srv.data as { port: number }).port);
    }
    assert.equal(ports.size, 3);
  });
});

describe('cache configuration errors', () => {
  it('a bad option stops startup with FILE:LINE - Error during parsing', async () => {
    const s = await startServer({
      corefile: `.:PORT {\n    cache 30 {\n        prefetch 10 1m 95%\n    }\n    whoami\n}\n`,
      noWait: true,
    });
    const code = await new Promise<number | null>((r) => s.proc.on('exit', (c) => r(c)));
    assert.equal(code, 1);
    assert.match(s.output(), /Corefile:3 - Error during parsing: percentage should fall in range \[10, 90\]: 95/);
  });
});
