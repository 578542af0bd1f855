// The rewrite plugin through the real binary and dig: CoreDNS's README vectors, the two common
// Kubernetes uses (a custom domain onto svc.cluster.local, a stub domain onto one Service),
// and every field: name (five match types, answer auto/name/value), type, ttl, rcode, edns0, cname.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import { startServer, type RunningServer } from '../helpers/server.js';
import { dig, query } from '../helpers/dns.js';
import { decodeMessage, emptyMessage, encodeMessage, type Message } from '../../src/dns/message.js';
import { QType, Rcode } from '../../src/dns/constants.js';

const CLUSTER = `
apiVersion: v1
kind: List
items:
  - { apiVersion: v1, kind: Namespace, metadata: { name: default } }
  - { apiVersion: v1, kind: Namespace, metadata: { name: data } }
  - apiVersion: v1
    kind: Service
    metadata: { name: web, namespace: default }
    spec: { clusterIP: 10.96.0.20, ports: [{ name: http, port: 8080, protocol: TCP }] }
  - apiVersion: v1
    kind: Service
    metadata: { name: postgres, namespace: data }
    spec: { clusterIP: 10.96.0.30, ports: [{ name: pg, port: 5432, protocol: TCP }] }
  - apiVersion: v1
    kind: Service
    metadata: { name: external, namespace: default }
    spec: { type: ExternalName, externalName: example.com }
`;

/** A UDP upstream that answers A 192.0.2.1 and keeps the last query it got. */
async function recordingUpstream(): Promise<{ port: number; last: () => Message | null; close: () => void }> {
  const s = dgram.createSocket('udp4');
  let last: Message | null = null;
  s.on('message', (msg, r) => {
    const q = decodeMessage(msg);
    last = q;
    const a = emptyMessage(q.id);
    a.qr = true;
    a.rd = q.rd;
    a.ra = true;
    a.questions = q.questions;
    if (q.questions[0]!.type === QType.A)
      a.answers.push({ name: q.questions[0]!.name, type: QType.A, class: 1, ttl: 300, data: { address: '192.0.2.1' } });
    // Echo the options back, so `revert` has something to take out.
    if (q.edns) a.edns = { ...q.edns, options: q.edns.options };
    s.send(encodeMessage(a), r.port, r.address);
  });
  await new Promise<void>((r) => s.bind(0, '127.0.0.1', () => r()));
  return { port: s.address().port, last: () => last, close: () => s.close() };
}

describe('rewrite', () => {
  let s: RunningServer;
  let up: Awaited<ReturnType<typeof recordingUpstream>>;

  before(async () => {
    up = await recordingUpstream();
    s = await startServer({
      corefile: `
.:PORT {
    bind 127.0.0.1
    rewrite name regex (.*)\\.example\\.org {1}.default.svc.cluster.local answer auto
    rewrite stop {
        name regex (.*)\\.contoso\\.com {1}.default.svc.cluster.local
        answer name (.*)\\.default\\.svc\\.cluster\\.local {1}.contoso.com
    }
    rewrite name exact db.legacy.corp postgres.data.svc.cluster.local
    rewrite name suffix .corp.internal .svc.cluster.local answer auto
    rewrite name prefix legacy- "" answer auto
    rewrite name substring .staging. .default. answer auto
    rewrite stop {
        name regex (.*)\\.srv\\.test {1}.default.svc.cluster.local
        answer name (.*)\\.default\\.svc\\.cluster\\.local {1}.srv.test
        answer value (.*)\\.default\\.svc\\.cluster\\.local {1}.srv.test
    }
    rewrite name regex (.*)-(us-west-1)\\.coredns\\.rocks {1}.service.{2}.consul
    rewrite stop {
        name regex (.*)-(us-west-1)\\.fixed\\.rocks {1}.service.{2}.consul
        answer name (.*)\\.service\\.(us-west-1)\\.consul {1}-{2}.fixed.rocks
    }
    rewrite continue name exact a.chain.test b.chain.test
    rewrite name exact b.chain.test c.chain.test
    rewrite name exact x.stop.test y.stop.test
    rewrite name exact y.stop.test z.stop.test
    rewrite type AAAA A
    rewrite continue ttl exact fixed.ttl.test 15
    rewrite continue ttl regex .*\\.range\\.ttl\\.test 100-200
    rewrite rcode suffix .rc.test NXDOMAIN NOERROR
    rewrite name regex (.*)\\.toolong\\.test {1}{1}{1}{1}{1}.x
    rewrite continue edns0 local set 0xffee abcd
    rewrite continue edns0 subnet set 24 56
    rewrite continue edns0 nsid append revert
    rewrite cname exact example.com. web.default.svc.cluster.local.
    kubernetes cluster.local {
        manifests cluster.yaml
    }
    hosts {
        10.0.0.3 c.chain.test y.stop.test z.stop.test
        10.0.0.4 fixed.ttl.test a.range.ttl.test
        10.0.0.5 ftp.service.us-west-1.consul
        ttl 3600
        fallthrough
    }
    template IN A rc.test {
        rcode NXDOMAIN
    }
    forward . 127.0.0.1:${up.port}
}
`,
      files: { 'cluster.yaml': CLUSTER },
    });
  });

  after(async () => {
    await s?.stop();
    up?.close();
  });

  test('a custom domain onto svc.cluster.local with `answer auto`: the client sees the name it asked', async () => {
    const r = await dig(s.port, ['web.example.org', 'A']);
    assert.equal(r.status, 'NOERROR');
    assert.deepEqual(r.answer, ['web.example.org. 5 IN A 10.96.0.20']);
    assert.match(r.raw, /;web\.example\.org\.\s+IN\s+A/);
  });

  test("AKS's documented rewrite: name regex plus answer name", async () => {
    const r = await dig(s.port, ['Web.Contoso.com', 'A']);
    // The owner name is compressed against the question, so it shows the question's letter case.
    assert.deepEqual(
      r.answer.map((l) => l.toLowerCase()),
      ['web.contoso.com. 5 in a 10.96.0.20'],
    );
    assert.match(r.raw, /;Web\.Contoso\.com\.\s+IN\s+A/, 'the question exactly as asked');
  });

  test('a stub domain onto one Service: an exact rule maps the answer back by itself', async () => {
    const r = await dig(s.port, ['db.legacy.corp', 'A']);
    assert.deepEqual(r.answer, ['db.legacy.corp. 5 IN A 10.96.0.30']);
  });

  test('suffix, prefix and substring rules with answer auto', async () => {
    assert.deepEqual((await dig(s.port, ['web.default.corp.internal'])).answer, [
      'web.default.corp.internal. 5 IN A 10.96.0.20',
    ]);
    assert.deepEqual((await dig(s.port, ['legacy-web.default.svc.cluster.local'])).answer, [
      'legacy-web.default.svc.cluster.local. 5 IN A 10.96.0.20',
    ]);
    assert.deepEqual((await dig(s.port, ['web.staging.svc.cluster.local'])).answer, [
      'web.staging.svc.cluster.local. 5 IN A 10.96.0.20',
    ]);
  });

  test('answer value rewrites the SRV target as well as the owner name', async () => {
    const r = await dig(s.port, ['_http._tcp.web.srv.test', 'SRV']);
    assert.deepEqual(r.answer, ['_http._tcp.web.srv.test. 5 IN SRV 0 100 8080 web.srv.test.']);
  });

  test('CoreDNS README: without an answer rule the records keep the rewritten name; with one they match the question', async () => {
    const plain = await dig(s.port, ['ftp-us-west-1.coredns.rocks']);
    assert.deepEqual(plain.answer, ['ftp.service.us-west-1.consul. 3600 IN A 10.0.0.5']);
    const fixed = await dig(s.port, ['ftp-us-west-1.fixed.rocks']);
    assert.deepEqual(fixed.answer, ['ftp-us-west-1.fixed.rocks. 3600 IN A 10.0.0.5']);
  });

  test('continue applies the next rule too; stop (the default) ends the list', async () => {
    assert.deepEqual((await dig(s.port, ['a.chain.test'])).answer, ['a.chain.test. 3600 IN A 10.0.0.3']);
    const stop = await dig(s.port, ['x.stop.test']);
    assert.deepEqual(stop.answer, ['x.stop.test. 3600 IN A 10.0.0.3']);
  });

  test('type: an AAAA question is served as A, the question kept', async () => {
    const r = await dig(s.port, ['fixed.ttl.test', 'AAAA']);
    assert.match(r.raw, /;fixed\.ttl\.test\.\s+IN\s+AAAA/);
    assert.deepEqual(r.answer, ['fixed.ttl.test. 3600 IN A 10.0.0.4']);
  });

  test('ttl: an exact value, and a range that clamps', async () => {
    assert.deepEqual((await dig(s.port, ['fixed.ttl.test'])).answer, ['fixed.ttl.test. 15 IN A 10.0.0.4']);
    assert.deepEqual((await dig(s.port, ['a.range.ttl.test'])).answer, ['a.range.ttl.test. 200 IN A 10.0.0.4']);
  });

  test('rcode: NXDOMAIN from the template becomes NOERROR', async () => {
    const r = await query(s.port, 'x.rc.test.', QType.A);
    assert.equal(r.rcode, Rcode.NOERROR);
  });

  test('a rewrite to a name the wire cannot carry is SERVFAIL', async () => {
    const label = 'a'.repeat(20);
    const r = await query(s.port, `${label}.toolong.test.`, QType.A);
    assert.equal(r.rcode, Rcode.SERVFAIL);
  });

  test('edns0: local, subnet and nsid options reach the upstream; revert keeps nsid from the client', async () => {
    const r = await dig(s.port, ['outside.test', 'A']);
    assert.deepEqual(r.answer, ['outside.test. 300 IN A 192.0.2.1']);
    const q = up.last()!;
    const opts = new Map(q.edns!.options.map((o) => [o.code, o.data]));
    assert.equal(opts.get(0xffee)?.toString(), 'abcd');
    // 127.0.0.1 cut to /24: family 1, source 24, scope 0, 127.0.0.
    assert.deepEqual([...opts.get(8)!], [0, 1, 24, 0, 127, 0, 0]);
    assert.ok(opts.has(3), 'an NSID option');
    assert.doesNotMatch(r.raw, /NSID/, 'reverted: the client does not see the upstream NSID option');
  });

  test('edns0 on a query without OPT: the option is added for the upstream, the client still gets no OPT', async () => {
    const r = await dig(s.port, ['+noedns', 'plain.test', 'A']);
    assert.deepEqual(r.answer, ['plain.test. 300 IN A 192.0.2.1']);
    assert.equal(
      up
        .last()!
        .edns!.options.find((o) => o.code === 0xffee)
        ?.data.toString(),
      'abcd',
    );
    assert.doesNotMatch(r.raw, /OPT PSEUDOSECTION/);
  });

  test('cname: an ExternalName target rewritten onto a Service and looked up', async () => {
    const r = await dig(s.port, ['external.default.svc.cluster.local', 'A']);
    assert.deepEqual(r.answer, [
      'external.default.svc.cluster.local. 5 IN CNAME web.default.svc.cluster.local.',
      'web.default.svc.cluster.local. 5 IN A 10.96.0.20',
    ]);
  });
});

describe('rewrite: configuration errors name the file and line', () => {
  const cases: Array<[string, RegExp]> = [
    ['rewrite name regex ([a-z] foo', /Corefile:3 - Error during parsing: rewrite: invalid regex pattern/],
    ['rewrite name regex (.*)\\.a {1}.{2}.b', /more subexpressions/],
    ['rewrite bogus a b', /invalid rule type "bogus"/],
    ['rewrite ttl exact a.test 20-10', /invalid TTL '20-10'/],
    ['rewrite edns0 local set 0xffee {nope}', /unsupported variable name/],
    ['rewrite name regex a b answer sideways a b', /invalid answer rule/],
  ];
  for (const [line, re] of cases) {
    test(line, async () => {
      const s = await startServer({
        corefile: `.:PORT {\n    bind 127.0.0.1\n    ${line}\n    whoami\n}\n`,
        noWait: true,
      });
      const code = await new Promise<number | null>((r) => s.proc.on('exit', r));
      assert.equal(code, 1);
      assert.match(s.output(), re);
    });
  }
});
