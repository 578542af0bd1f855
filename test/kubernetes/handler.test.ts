// The handler in-process: prepared answers and their invalidation, the query's spelling of the
// zone in cached answers, the SOA serial, truncation, and the options the vectors do not cover.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { QType, Rcode } from '../../src/dns/constants.js';
import { externalService, namespace, sectionText, service, slice, soaText } from './fixtures.js';
import { eventsFor, makeRequest, rig } from './harness.js';
import {
  FLAG_AA,
  describedResponse,
  prepareResponse,
  replyFlags,
  writeReply,
  type PreparedAnswer,
} from '../../src/server/prepared-reply.js';
import { Response } from '../../src/server/request.js';
import { finalizeReply } from '../../src/server/reply.js';

const Z = 'cluster.local.';

/** What a cache decides on and writes from, whichever way an answer was prepared. */
const facts = (p: PreparedAnswer) => ({
  an: p.an,
  ns: p.ns,
  ar: p.ar,
  rcode: p.flags & 0xf,
  length: p.body.length,
  ttlOffsets: [...(p.ttlOffsets ?? [])],
  questionEnd: p.questionEnd,
  minTtl: p.minTtl,
  hasSoa: p.hasSoa,
  negativeTtl: p.negativeTtl,
  nsInAuthority: p.nsInAuthority,
  answerHasQtype: p.answerHasQtype,
});

describe('kubernetes handler', () => {
  test('a repeated query is served from the prepared answer; a change to the Service replaces it', async () => {
    const r = rig('kubernetes cluster.local', [
      namespace('ns'),
      service('ns', 'web', ['10.0.0.1'], [['http', 'TCP', 80]]),
    ]);
    const first = await r.ask(`web.ns.svc.${Z}`, QType.A);
    assert.deepEqual(sectionText(first.answers), [`web.ns.svc.${Z} 5 A 10.0.0.1`]);
    assert.equal(r.handler.prepared.size, 1);
    await r.ask(`WEB.ns.svc.${Z}`, QType.A);
    assert.equal(r.handler.prepared.size, 1, 'the same prepared answer serves every spelling');
    r.apply([service('ns', 'web', ['10.0.0.2'], [['http', 'TCP', 80]])]);
    assert.equal(r.handler.prepared.size, 0, "the change dropped the Service's answers");
    assert.deepEqual(sectionText((await r.ask(`web.ns.svc.${Z}`, QType.A)).answers), [`web.ns.svc.${Z} 5 A 10.0.0.2`]);
    r.index.apply({ op: 'delete', kind: 'Service', key: 'ns/web' });
    assert.equal((await r.ask(`web.ns.svc.${Z}`, QType.A)).rcode, Rcode.NXDOMAIN);
  });

  test('a prepared SRV answer takes the zone as each query spells it, and only that query', async () => {
    const r = rig('kubernetes cluster.local', [
      namespace('ns'),
      service('ns', 'web', ['10.0.0.1'], [['http', 'TCP', 80]]),
    ]);
    const lower = await r.ask(`_http._tcp.web.ns.svc.${Z}`, QType.SRV);
    assert.deepEqual(sectionText(lower.answers), [`_http._tcp.web.ns.svc.${Z} 5 SRV 0 100 80 web.ns.svc.${Z}`]);
    const mixed = await r.ask('_http._tcp.web.ns.svc.CLUSTER.Local.', QType.SRV);
    assert.deepEqual(sectionText(mixed.answers), [
      '_http._tcp.web.ns.svc.CLUSTER.Local. 5 SRV 0 100 80 web.ns.svc.CLUSTER.Local.',
    ]);
    assert.deepEqual(sectionText(mixed.additionals), ['web.ns.svc.CLUSTER.Local. 5 A 10.0.0.1']);
    const again = await r.ask(`_http._tcp.web.ns.svc.${Z}`, QType.SRV);
    assert.deepEqual(
      sectionText(again.answers),
      sectionText(lower.answers),
      'the prepared bytes themselves were not changed',
    );
  });

  test('the SOA serial of a prepared negative answer follows later changes', async () => {
    const r = rig('kubernetes cluster.local', [namespace('ns'), service('ns', 'web', ['10.0.0.1'])]);
    r.index.serial = 1000;
    const a = await r.ask(`web.ns.svc.${Z}`, QType.AAAA);
    assert.equal((a.authorities[0]!.data as { serial: number }).serial, 1000);
    r.index.serial = 2000;
    const b = await r.ask(`web.ns.svc.${Z}`, QType.AAAA);
    assert.equal((b.authorities[0]!.data as { serial: number }).serial, 2000);
    assert.deepEqual(sectionText(b.authorities), [soaText(Z)]);
  });

  test('a headless answer too big for the client is truncated record by record with TC, whole over TCP', async () => {
    const eps = Array.from({ length: 60 }, (_, i) => ({ ip: `10.1.0.${i + 1}` }));
    const r = rig('kubernetes cluster.local', [
      namespace('ns'),
      service('ns', 'big', 'None', [['http', 'TCP', 80]]),
      slice('ns', 'big-1', 'big', 'IPv4', eps, [['http', 'TCP', 80]]),
    ]);
    const udp = await r.ask(`big.ns.svc.${Z}`, QType.A);
    assert.equal(udp.tc, true);
    assert.ok(udp.answers.length > 10 && udp.answers.length < 60, `${udp.answers.length} records fit in 512 octets`);
    const tcp = await r.ask(`big.ns.svc.${Z}`, QType.A, { tcp: true });
    assert.equal(tcp.tc, false);
    assert.equal(tcp.answers.length, 60);
    const edns = await r.ask(`big.ns.svc.${Z}`, QType.A, { edns: 4096 });
    assert.equal(edns.answers.length, 60);
  });

  test('endpoint_pod_names names endpoints by their pod; noendpoints drops endpoint names and PTRs', async () => {
    const objs = [
      namespace('ns'),
      service('ns', 'h', 'None', [['http', 'TCP', 80]]),
      slice(
        'ns',
        'h-1',
        'h',
        'IPv4',
        [
          { ip: '10.1.0.1', pod: 'test-name' },
          { ip: '10.1.0.2', pod: 'p'.repeat(64) },
        ],
        [['http', 'TCP', 80]],
      ),
    ];
    const named = rig('kubernetes cluster.local {\n endpoint_pod_names\n}', []);
    for (const ev of eventsFor(objs, { endpointPodNames: true, warn: () => {} })) named.index.apply(ev);
    const srv = await named.ask(`h.ns.svc.${Z}`, QType.SRV);
    assert.deepEqual(
      sectionText(srv.answers).map((l) => l.split(' ').pop()),
      [`10-1-0-2.h.ns.svc.${Z}`, `test-name.h.ns.svc.${Z}`],
      'a pod name over 63 characters falls back to the dashed IP',
    );
    const none = rig('kubernetes cluster.local in-addr.arpa {\n noendpoints\n}', []);
    for (const ev of eventsFor(objs).filter((e) => e.op !== 'upsert' || e.kind !== 'EndpointSlice'))
      none.index.apply(ev);
    assert.equal((await none.ask(`h.ns.svc.${Z}`, QType.A)).rcode, Rcode.NXDOMAIN);
    assert.equal((await none.ask('1.0.1.10.in-addr.arpa.', QType.PTR)).rcode, Rcode.NXDOMAIN);
  });

  test('NS at the apex names our own Service when one of our addresses is its endpoint (in-cluster kube-dns)', async () => {
    const r = rig(
      'kubernetes cluster.local',
      [
        namespace('kube-system'),
        service('kube-system', 'kube-dns', ['10.96.0.10'], [['dns', 'UDP', 53]]),
        slice('kube-system', 'kube-dns-1', 'kube-dns', 'IPv4', [{ ip: '10.244.0.7' }], [['dns', 'UDP', 53]]),
      ],
      ['10.244.0.7'],
    );
    const ns = await r.ask(Z, QType.NS);
    assert.deepEqual(sectionText(ns.answers), [`${Z} 5 NS kube-dns.kube-system.svc.${Z}`]);
    assert.deepEqual(sectionText(ns.additionals), [`kube-dns.kube-system.svc.${Z} 5 A 10.96.0.10`]);
  });

  test('PTR for an endpoint of a ClusterIP service, and CIDR reverse zones', async () => {
    const r = rig('kubernetes cluster.local 10.96.0.0/24 172.17.0.0/24 {\n namespaces test-1\n}', [
      namespace('test-1'),
      namespace('test-2'),
      service(
        'test-1',
        'svc-1-a',
        ['10.96.0.100'],
        [
          ['http', 'TCP', 80],
          ['https', 'TCP', 443],
        ],
      ),
      slice(
        'test-1',
        'svc-1-a-1',
        'svc-1-a',
        'IPv4',
        [{ ip: '172.17.0.253', hostname: 'svc-1-a' }],
        [['http', 'TCP', 80]],
      ),
      service('test-2', 'svc-c', ['10.96.0.120']),
    ]);
    assert.deepEqual(sectionText((await r.ask('100.0.96.10.in-addr.arpa.', QType.PTR)).answers), [
      `100.0.96.10.in-addr.arpa. 5 PTR svc-1-a.test-1.svc.${Z}`,
    ]);
    assert.deepEqual(sectionText((await r.ask('253.0.17.172.in-addr.arpa.', QType.PTR)).answers), [
      `253.0.17.172.in-addr.arpa. 5 PTR svc-1-a.svc-1-a.test-1.svc.${Z}`,
    ]);
    const hidden = await r.ask('120.0.96.10.in-addr.arpa.', QType.PTR);
    assert.equal(hidden.rcode, Rcode.NXDOMAIN, 'namespaces filters PTR too');
    assert.deepEqual(sectionText(hidden.authorities), [soaText('0.96.10.in-addr.arpa.')]);
    const i1 = await r.ask(`svc-1-a.test-1.svc.${Z}`, QType.SRV);
    assert.deepEqual(sectionText(i1.answers), [
      `svc-1-a.test-1.svc.${Z} 5 SRV 0 50 443 svc-1-a.test-1.svc.${Z}`,
      `svc-1-a.test-1.svc.${Z} 5 SRV 0 50 80 svc-1-a.test-1.svc.${Z}`,
    ]);
    assert.deepEqual(sectionText(i1.additionals), [`svc-1-a.test-1.svc.${Z} 5 A 10.96.0.100`]);
  });

  test('an ExternalName whose target lookup fails keeps its CNAME, as CoreDNS; ttl applies everywhere', async () => {
    const r = rig('kubernetes cluster.local {\n ttl 30\n}', [
      namespace('ns'),
      externalService('ns', 'ext', 'unreachable.example'),
    ]);
    const a = await r.ask(`ext.ns.svc.${Z}`, QType.A);
    assert.equal(a.rcode, Rcode.NOERROR);
    assert.deepEqual(sectionText(a.answers), [`ext.ns.svc.${Z} 30 CNAME unreachable.example.`]);
    assert.deepEqual(a.authorities, []);
    assert.deepEqual(sectionText((await r.ask(`ext.ns.svc.${Z}`, QType.CNAME)).answers), [
      `ext.ns.svc.${Z} 30 CNAME unreachable.example.`,
    ]);
  });

  test('a name resolves only while its namespace exists (the Namespace watch decides)', async () => {
    const r = rig('kubernetes cluster.local', [service('gone', 'web', ['10.0.0.1'])]);
    assert.equal((await r.ask(`web.gone.svc.${Z}`, QType.A)).rcode, Rcode.NXDOMAIN);
    r.apply([namespace('gone')]);
    assert.equal(
      (await r.ask(`web.gone.svc.${Z}`, QType.A)).rcode,
      Rcode.NOERROR,
      'the namespace appearing makes its names resolve',
    );
  });

  test('what an answer tells a cache about its records is what walking them finds, and names what it was built from', async () => {
    const r = rig('kubernetes cluster.local 10.0.0.0/24 {\n ttl 30\n pods insecure\n}', [
      namespace('ns'),
      service('ns', 'web', ['10.0.0.1'], [['http', 'TCP', 80]]),
      service('ns', 'dual', ['10.0.0.2', 'fd00::2']),
      service('ns', 'hl', 'None', [['http', 'TCP', 80]]),
      slice(
        'ns',
        'hl-1',
        'hl',
        'IPv4',
        [{ ip: '10.0.0.7', hostname: 'h1' }, { ip: '10.0.0.8' }],
        [['http', 'TCP', 80]],
      ),
      externalService('ns', 'ext', 'web.ns.svc.cluster.local'),
    ]);
    const cases: Array<[string, number, string[]]> = [
      [`web.ns.svc.${Z}`, QType.A, ['s:ns/web']],
      [`web.ns.svc.${Z}`, QType.AAAA, ['s:ns/web']], // NODATA: SOA in authority
      [`Dual.NS.svc.${Z}`, QType.AAAA, ['s:ns/dual']],
      [`_http._tcp.web.ns.svc.${Z}`, QType.SRV, ['s:ns/web']],
      [`hl.ns.svc.${Z}`, QType.SRV, ['s:ns/hl']],
      [`h1.hl.ns.svc.${Z}`, QType.A, ['s:ns/hl']],
      [`ext.ns.svc.${Z}`, QType.CNAME, ['s:ns/ext']],
      [`web.ns.svc.${Z}`, QType.MX, ['s:ns/web']],
      [`dns-version.${Z}`, QType.TXT, ['g']],
      [Z, QType.SOA, ['g']],
      [Z, QType.NS, ['g']],
      ['1.0.0.10.in-addr.arpa.', QType.PTR, ['p:10.0.0.1']],
      [`10-0-0-9.ns.pod.${Z}`, QType.A, []],
    ];
    const next = () => Response.rcode(Rcode.SERVFAIL, 'next');
    for (const [name, qtype, deps] of cases) {
      for (const edns of [undefined, 1232]) {
        const req = makeRequest(name, qtype, { edns });
        const res = await r.handler.serveDNS(req, next);
        const wire = finalizeReply(req, res);
        assert.ok(res.prepared !== null, `${name} ${qtype}: described`);
        assert.deepEqual(res.prepared.dependencies, deps, `${name} ${qtype}: dependencies`);
        const described = describedResponse(req, wire, res.prepared);
        const walked = prepareResponse(req, wire);
        assert.ok(described !== null && typeof walked !== 'number', `${name} ${qtype}: both ways work`);
        assert.equal(described, res.prepared, `${name} ${qtype}: the plugin's own answer, not a copy`);
        assert.deepEqual(facts(described), facts(walked), `${name} ${qtype} (edns ${edns}): described as walked`);
        const serial = described.serialAt >= 0 ? wire.readUInt32BE(req.questionEnd + described.serialAt) : -1;
        assert.deepEqual(
          writeReply(req, described, -1, replyFlags(req, described, FLAG_AA), serial),
          wire,
          `${name} ${qtype}: a reply a cache writes from it is the one sent`,
        );
      }
    }
  });

  test("an ExternalName's answer depends on its Service and every in-cluster Service its targets pass", async () => {
    const objects = [
      namespace('ns'),
      service('ns', 'web', ['10.0.0.1']),
      externalService('ns', 'alias', 'web.ns.svc.cluster.local'),
      externalService('ns', 'hop', 'alias.ns.svc.cluster.local'),
      externalService('ns', 'out', 'example.org'),
    ];
    const r = rig('kubernetes cluster.local', objects);
    const next = () => Response.rcode(Rcode.SERVFAIL, 'next');
    const deps = async (name: string) =>
      (await r.handler.serveDNS(makeRequest(name, QType.A), next)).prepared?.dependencies;
    assert.deepEqual(await deps(`alias.ns.svc.${Z}`), ['s:ns/alias', 's:ns/web']);
    assert.deepEqual(await deps(`hop.ns.svc.${Z}`), ['s:ns/hop', 's:ns/alias', 's:ns/web']);
    assert.deepEqual(await deps(`out.ns.svc.${Z}`), ['s:ns/out']);
  });
});
