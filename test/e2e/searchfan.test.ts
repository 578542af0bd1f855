// searchfan in the real binary, in front of the demo cluster: one server block is the
// cluster DNS (kubernetes with examples/demo/cluster.yaml, forward to an external upstream
// the test controls), another is the KubeVPN-style forward server a laptop talks to.
import assert from 'node:assert/strict';
import { resolve } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { FakeUpstream } from '../forward/upstreams.js';
import { dig } from '../helpers/dns.js';
import { freePort } from '../helpers/ports.js';
import { startServer, type RunningServer } from '../helpers/server.js';
import { zone } from '../searchfan/zone.js';

const DEMO = resolve('examples/demo/cluster.yaml');

describe('searchfan e2e: the demo cluster behind a KubeVPN-style forward server', () => {
  let s: RunningServer;
  let external: FakeUpstream;
  let kubePort: number;
  let metricsPort: number;

  before(async () => {
    external = await FakeUpstream.start();
    // The world outside the cluster: example.com, github.com, and a `backend.` that also exists.
    external.behaviour = zone({
      records: {
        'example.com.': { a: ['93.184.216.34'] },
        'github.com.': { a: ['140.82.112.3'] },
        'backend.': { a: ['198.51.100.7'] },
      },
    });
    kubePort = await freePort();
    metricsPort = await freePort();
    s = await startServer({
      corefile: `.:${kubePort} {
    bind 127.0.0.1
    kubernetes cluster.local {
        manifests ${DEMO}
    }
    forward . 127.0.0.1:${external.port}
}
.:PORT {
    bind 127.0.0.1
    searchfan 127.0.0.1:${kubePort} {
        search default.svc.cluster.local svc.cluster.local cluster.local
        ndots 5
    }
    prometheus 127.0.0.1:${metricsPort}
}
`,
    });
  });

  after(async () => {
    await s?.stop();
    await external?.close();
  });

  async function upstreamRequests(): Promise<number> {
    const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    const m = new RegExp(
      `coredns_searchfan_upstream_requests_total\\{server="dns://:${s.port}",to="127\\.0\\.0\\.1:${kubePort}"\\} (\\d+)`,
    ).exec(text);
    return m ? Number(m[1]) : 0;
  }

  test('dig backend: the bare name is answered for backend. (question and owner rewritten), and the cluster wins over the outside backend.', async () => {
    const before = await upstreamRequests();
    const r = await dig(s.port, ['backend', 'A']);
    assert.equal(r.status, 'NOERROR');
    assert.match(r.raw, /;; QUESTION SECTION:\n;backend\.\s+IN\s+A\n/);
    assert.deepEqual(r.answer, ['backend. 5 IN A 10.96.120.15']);
    assert.equal((await upstreamRequests()) - before, 4, '4 candidates, 1 upstream: 4 upstream queries for the miss');
    const again = await dig(s.port, ['backend', 'A']);
    assert.deepEqual(
      again.answer.map((l) => l.replace(/ \d+ IN /, ' IN ')),
      ['backend. IN A 10.96.120.15'],
    );
    assert.equal((await upstreamRequests()) - before, 4, 'the second dig is a cache hit');
  });

  test('dig frontend AAAA (an IPv4-only Service) is NODATA, never NXDOMAIN; A has its address', async () => {
    const aaaa = await dig(s.port, ['frontend', 'AAAA']);
    assert.equal(aaaa.status, 'NOERROR');
    assert.deepEqual(aaaa.answer, []);
    assert.match(aaaa.authority[0] ?? '', /^cluster\.local\. \d+ IN SOA /);
    assert.deepEqual((await dig(s.port, ['frontend', 'A'])).answer, ['frontend. 5 IN A 10.96.120.16']);
    const dual = await dig(s.port, ['backend', 'AAAA']);
    assert.deepEqual(dual.answer, ['backend. 5 IN AAAA fd00:10:96::f']);
  });

  test('dig backend.default (namespace-qualified) resolves through the second search domain', async () => {
    const r = await dig(s.port, ['backend.default', 'A', '+tcp']);
    assert.match(r.raw, /;backend\.default\.\s+IN\s+A\n/);
    assert.deepEqual(r.answer, ['backend.default. 5 IN A 10.96.120.15']);
  });

  test('dig external (an ExternalName Service): a CNAME chain from the asked name, then the target', async () => {
    const r = await dig(s.port, ['external', 'A']);
    assert.equal(r.status, 'NOERROR');
    assert.deepEqual(
      r.answer.map((l) => l.replace(/ \d+ IN /, ' IN ')),
      ['external. IN CNAME example.com.', 'example.com. IN A 93.184.216.34'],
    );
  });

  test('dig github.com: the cluster says NXDOMAIN for each search domain, the bare name is resolved outside', async () => {
    external.reset();
    const r = await dig(s.port, ['github.com', 'A']);
    assert.deepEqual(r.answer, ['github.com. 30 IN A 140.82.112.3']);
    assert.deepEqual(
      external.queries.map((q) => q.msg.questions[0]!.name),
      ['github.com.'],
      'names under cluster.local never leave the cluster DNS',
    );
  });

  test('dig of a name that exists nowhere is NXDOMAIN', async () => {
    const r = await dig(s.port, ['nosuchthing', 'A']);
    assert.equal(r.status, 'NXDOMAIN');
    assert.match(r.raw, /;nosuchthing\.\s+IN\s+A\n/);
  });
});
