// Hostile queries through the real binary: ANY, oversized EDNS buffers, answers far larger
// than a datagram, and a mixed run where every UDP reply is measured against what the client
// allowed. Replies are decoded with dns-packet (an independent implementation) as well.
// (Random-subdomain floods: test/reliability/flood.test.ts; TCP connection floods:
// test/e2e/server.test.ts "TCP connections over the cap are refused ...".)
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import * as dnsPacket from 'dns-packet';
import { startServer, type RunningServer } from '../helpers/server.js';
import { buildQuery, sendTcp, sendUdp } from '../helpers/dns.js';
import { QType, Rcode } from '../../src/dns/constants.js';
import { decodeMessage } from '../../src/dns/message.js';
import { answer, FakeUpstream, type Behaviour } from '../forward/upstreams.js';

/** A headless Service with `n` ready endpoints, each with a hostname, as a manifest. */
function headless(name: string, n: number): string {
  const endpoints = Array.from(
    { length: n },
    (_, i) => `      - addresses: ["10.${100 + (i >> 16)}.${(i >> 8) & 255}.${i & 255}"]\n        hostname: pod-${i}`,
  );
  return `---
apiVersion: v1
kind: Service
metadata: { name: ${name}, namespace: default }
spec: { clusterIP: None, ports: [{ name: http, port: 80, protocol: TCP }] }
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: { name: ${name}-1, namespace: default, labels: { kubernetes.io/service-name: ${name} } }
addressType: IPv4
ports: [{ name: http, port: 80, protocol: TCP }]
endpoints:
${endpoints.join('\n')}
`;
}

const CLUSTER = `apiVersion: v1
kind: Namespace
metadata: { name: default }
---
apiVersion: v1
kind: Service
metadata: { name: web, namespace: default }
spec: { clusterIP: 10.96.0.80, ports: [{ name: http, port: 80, protocol: TCP }] }
${headless('mid', 40)}${headless('big', 400)}${headless('huge', 5000)}`;

/** An upstream that answers everything (ANY included) with 40 TXT records of 200 octets: 8 KiB, whatever the buffer. */
const bigAnswers: Behaviour = (q, r) =>
  r.send(answer(q, { txt: Array.from({ length: 40 }, (_, i) => `${i}:${'x'.repeat(196)}`) }));

let s: RunningServer;
let upstream: FakeUpstream;

before(async () => {
  upstream = await FakeUpstream.start({ behaviour: bigAnswers });
  s = await startServer({
    corefile: `cluster.local:PORT {
    bind 127.0.0.1
    kubernetes cluster.local {
        manifests cluster.yaml
    }
}
hosts.example:PORT {
    bind 127.0.0.1
    hosts {
        10.0.0.1 a.hosts.example
    }
}
fwd.example:PORT {
    bind 127.0.0.1
    forward . 127.0.0.1:${upstream.port}
}
.:PORT {
    bind 127.0.0.1
    whoami
}
`,
    files: { 'cluster.yaml': CLUSTER },
    probe: 'web.default.svc.cluster.local.',
  });
});

after(async () => {
  await s?.stop();
  await upstream?.close();
});

/** The largest UDP reply a query allows: 512 without EDNS, else its buffer (at least 512). */
const allowed = (edns: number | undefined) => (edns === undefined ? 512 : Math.max(512, edns));

describe('ANY (RFC 8482)', () => {
  test('kubernetes and hosts answer ANY with NODATA and the SOA (or nothing): no record set is listed', async () => {
    for (const name of ['web.default.svc.cluster.local.', 'huge.default.svc.cluster.local.', 'cluster.local.']) {
      const raw = await sendUdp(s.port, buildQuery(name, QType.ANY, { edns: 4096 }));
      const m = decodeMessage(raw);
      assert.equal(m.rcode, Rcode.NOERROR, name);
      assert.equal(m.answers.length, 0, `${name}: ANY lists nothing`);
      assert.ok(raw.length < 200, `${name}: ${raw.length} octets`);
    }
    const hosts = decodeMessage(await sendUdp(s.port, buildQuery('a.hosts.example.', QType.ANY, { edns: 4096 })));
    assert.equal(hosts.rcode, Rcode.NOERROR);
    assert.equal(hosts.answers.length, 0);
  });

  test("forward passes the upstream's ANY answer on, but never more than the client's buffer", async () => {
    for (const edns of [undefined, 1232, 4096]) {
      const raw = await sendUdp(s.port, buildQuery('any.fwd.example.', QType.ANY, { edns }));
      assert.ok(raw.length <= allowed(edns), `EDNS ${edns}: ${raw.length} octets`);
      const m = decodeMessage(raw);
      assert.equal(m.rcode, Rcode.NOERROR);
      assert.ok(m.tc, `EDNS ${edns}: the 8 KiB answer is cut, with TC set`);
    }
  });
});

describe('reply sizes', () => {
  const cases: Array<[string, number]> = [
    ['web.default.svc.cluster.local.', QType.A],
    ['mid.default.svc.cluster.local.', QType.A],
    ['mid.default.svc.cluster.local.', QType.SRV],
    ['big.default.svc.cluster.local.', QType.A],
    ['big.default.svc.cluster.local.', QType.SRV],
    ['_http._tcp.big.default.svc.cluster.local.', QType.SRV],
    ['huge.default.svc.cluster.local.', QType.A],
    ['huge.default.svc.cluster.local.', QType.SRV],
    ['nope.default.svc.cluster.local.', QType.A],
    ['a.hosts.example.', QType.A],
    ['txt.fwd.example.', QType.TXT],
    ['any.fwd.example.', QType.ANY],
    ['me.whoami.test.', QType.A],
    ['me.whoami.test.', QType.ANY],
  ];
  const buffers = [undefined, 0, 511, 512, 1232, 1400, 4096, 16384, 65535];

  test(
    `every UDP reply of a mixed run (${cases.length} questions × ${buffers.length} buffers) fits what the client allowed, decodes, and is complete unless TC is set`,
    { timeout: 60_000 },
    async () => {
      for (const [name, type] of cases) {
        const [full] = await sendTcp(s.port, [buildQuery(name, type)], 5000);
        const complete = decodeMessage(full!);
        for (const edns of buffers) {
          const raw = await sendUdp(s.port, buildQuery(name, type, { edns }), 5000);
          const what = `${name} ${type} EDNS ${edns}`;
          assert.ok(raw.length <= allowed(edns), `${what}: ${raw.length} octets > ${allowed(edns)}`);
          assert.ok(raw.length <= 65507, `${what}: larger than a datagram`);
          const m = decodeMessage(raw);
          const independent = dnsPacket.decode(raw);
          assert.equal(
            independent.answers?.length ?? 0,
            m.answers.length,
            `${what}: dns-packet reads the same records`,
          );
          if (!m.tc && !complete.tc)
            assert.equal(m.answers.length, complete.answers.length, `${what}: no TC, so nothing may be missing`);
          if (edns !== undefined) assert.ok(m.edns, `${what}: the OPT is echoed`);
        }
      }
    },
  );

  test(
    '65,535 advertised for an answer bigger than any datagram: a truncated reply of at most 1232 octets (the default UDP cap) arrives, and TCP carries at most 65,535',
    { timeout: 30_000 },
    async () => {
      for (const type of [QType.A, QType.SRV]) {
        const q = buildQuery('huge.default.svc.cluster.local.', type, { edns: 65535 });
        const raw = await sendUdp(s.port, q, 5000);
        assert.ok(raw.length <= 1232 && raw.length > 1000, `${raw.length} octets`);
        assert.ok(raw.length / q.length <= 25, `amplification ${(raw.length / q.length).toFixed(1)}x`);
        const m = decodeMessage(raw);
        assert.ok(m.tc, 'TC: the client knows there is more');
        assert.ok(m.answers.length > (type === QType.A ? 60 : 10), `as many records as fit: ${m.answers.length}`);
        assert.equal(m.edns?.udpSize, 65535, 'the OPT is kept');
        const [tcp] = await sendTcp(s.port, [buildQuery('huge.default.svc.cluster.local.', type)], 5000);
        assert.ok(tcp!.length <= 65535);
        assert.ok(decodeMessage(tcp!).tc, '5,000 endpoints do not fit a TCP message either');
      }
    },
  );

  test(
    'an SRV answer past 16 KiB keeps every name right: the additional records are owned by their SRV targets',
    { timeout: 30_000 },
    async () => {
      const [raw] = await sendTcp(s.port, [buildQuery('big.default.svc.cluster.local.', QType.SRV)], 5000);
      assert.ok(raw!.length > 16384, `${raw!.length} octets: names beyond the reach of a compression pointer`);
      const p = dnsPacket.decode(raw!);
      const srv = (p.answers ?? []).filter((a): a is dnsPacket.SrvAnswer => a.type === 'SRV');
      assert.equal(srv.length, 400);
      const targets = new Set(srv.map((a) => a.data.target));
      const extra = (p.additionals ?? []).filter((a): a is dnsPacket.StringAnswer => a.type === 'A');
      assert.equal(extra.length, 400);
      for (const a of extra) {
        assert.ok(targets.has(a.name), `an additional record owned by ${a.name}, which is no SRV target`);
        const i = Number(/^pod-(\d+)\./.exec(a.name)?.[1]);
        assert.equal(a.data, `10.100.${(i >> 8) & 255}.${i & 255}`, `${a.name} has its own address`);
      }
    },
  );
});
