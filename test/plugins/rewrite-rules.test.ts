// rewrite's parts in-process: rule parsing as CoreDNS's newRule, and the fast path's answer
// (the query built as bytes, the client's question swapped in) giving the same records as the
// Message path.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseQuery, type ParsedQuery } from '../../src/dns/query.js';
import { decodeMessage, emptyMessage, encodeMessage } from '../../src/dns/message.js';
import { QType } from '../../src/dns/constants.js';
import { type ClientInfo, Request, Response } from '../../src/server/request.js';
import { recordsReply } from '../../src/server/reply.js';
import { newRule } from '../../src/plugins/rewrite/setup.js';
import { RewriteHandler } from '../../src/plugins/rewrite/handler.js';
import { rebuildQuery, swapQuestion } from '../../src/plugins/rewrite/wire.js';
import type { Token } from '../../src/corefile/types.js';

const toks = (line: string): Token[] =>
  line.split(' ').map((text) => ({ text, file: 'Corefile', line: 1, quoted: false }));
const client = {
  proto: 'udp' as const,
  remoteAddress: '10.1.2.3',
  remotePort: 5353,
  family: 1 as const,
  localAddress: '127.0.0.1',
  localPort: 53,
};

function request(name: string, type = QType.A, edns = true): Request {
  const m = emptyMessage(0x1234);
  m.rd = true;
  m.questions.push({ name, type, class: 1 });
  if (edns)
    m.edns = { udpSize: 1232, version: 0, do: true, zflags: 0, options: [{ code: 10, data: Buffer.from('cookie!!') }] };
  const raw = encodeMessage(m);
  return new Request(raw, parseQuery(raw) as ParsedQuery, client);
}

test('rules parse as CoreDNS documents them, and refuse what CoreDNS refuses', () => {
  for (const ok of [
    'name example.net example.org',
    'stop name exact a.test b.test',
    'continue name regex (.*)-(us-west-1)\\.example\\.org {1}.service.{2}.consul answer auto',
    'name regex (.*)\\.a {1}.b answer name (.*)\\.b {1}.a value (.*)\\.b {1}.a',
    'name suffix .schmoogle.com. .google.com. answer auto',
    'type ANY HINFO',
    'class CH IN',
    'ttl regex (.*)\\.coredns\\.rocks 15',
    'ttl exact a.test 30-',
    'ttl exact a.test -300',
    'rcode exact a.test SERVFAIL 3',
    'edns0 local set 0xffee 0x61626364',
    'edns0 local replace 0xffee {client_ip}',
    'edns0 local set 0xffee {kubernetes/client-namespace} revert',
    'edns0 nsid append',
    'edns0 subnet set 24 56',
    'cname exact a.test. b.test.',
  ])
    assert.doesNotThrow(() => newRule(toks(ok)), ok);
  for (const bad of [
    'answer name a b',
    'name a',
    'name bogus a b',
    'type A',
    'type NOPE A',
    'ttl exact a.test x',
    'rcode exact a.test NOPE NXDOMAIN',
    'edns0 local set 0xffee',
    'edns0 subnet set 33 56',
    'edns0 nsid set x',
    'edns0 local frob 1 2',
  ]) {
    assert.throws(() => newRule(toks(bad)), Error, bad);
  }
});

test('the rewritten query built as bytes parses as the same query would', () => {
  const req = request('Web.Example.org.');
  const inner = rebuildQuery(req, 'web.default.svc.cluster.local.', QType.A, 1)!;
  const parsed = parseQuery(inner.raw) as ParsedQuery;
  assert.equal(parsed.qname, 'web.default.svc.cluster.local.');
  assert.equal(parsed.questionEnd, inner.questionEnd);
  assert.equal(parsed.id, 0x1234);
  assert.deepEqual(parsed.edns && { ...parsed.edns }, inner.edns && { ...inner.edns });
  assert.deepEqual(decodeMessage(inner.raw).edns?.options, [{ code: 10, data: Buffer.from('cookie!!') }]);
  assert.equal(rebuildQuery(req, 'a\\.b.test.', QType.A, 1), null, 'escapes take the Message path');
});

test("the fast path's answer equals the Message path's: question as asked, owner names mapped back", async () => {
  const rules = [newRule(toks('name regex (.*)\\.example\\.org {1}.default.svc.cluster.local answer auto'))];
  const rr = Buffer.from([0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 5, 0, 4, 10, 96, 0, 20]);
  const kube = (r: Request) =>
    Response.wire(recordsReply(r, 0, 0x0400, Buffer.concat([rr, rr]), 2, 0, 0), 'kubernetes');
  const h = new RewriteHandler(rules, () => Response.rcode(2, ''));
  const req = request('Web.Example.org.');
  const res = await h.serveDNS(req, kube);
  assert.ok(res.hasWire, 'answered by the fast path');
  const m = decodeMessage(res.peekWire()!);
  assert.deepEqual(m.questions, [{ name: 'Web.Example.org.', type: QType.A, class: 1 }]);
  assert.deepEqual(
    m.answers.map((a) => [a.name, a.ttl, a.data]),
    [
      ['Web.Example.org.', 5, { address: '10.96.0.20' }],
      ['Web.Example.org.', 5, { address: '10.96.0.20' }],
    ],
  );
  assert.equal(m.id, 0x1234);
  assert.equal(m.edns?.udpSize, 1232);
});

test('the fast path steps aside for records it cannot move as they are', () => {
  const req = request('web.example.org.');
  const inner = rebuildQuery(req, 'web.default.svc.cluster.local.', QType.SRV, 1)!;
  // An SRV whose target points into the question: only the Message path can rewrite it.
  const srv = Buffer.from([0xc0, 0x0c, 0, 33, 0, 1, 0, 0, 0, 5, 0, 8, 0, 0, 0, 100, 0x1f, 0x90, 0xc0, 0x0c]);
  const wire = recordsReply(inner, 0, 0x0400, srv, 1, 0, 0);
  assert.equal(swapQuestion(req, inner, wire), null);
});

test('class and type rules: the next plugin gets the new class and type, the client its own question back', async () => {
  const h = new RewriteHandler([newRule(toks('continue class CH IN')), newRule(toks('type TXT A'))], () =>
    Response.rcode(2, ''),
  );
  const m = emptyMessage(7);
  m.questions.push({ name: 'version.test.', type: QType.TXT, class: 3 });
  const raw = encodeMessage(m);
  const req = new Request(raw, parseQuery(raw) as ParsedQuery, client);
  let seen: [number, number] | null = null;
  const res = await h.serveDNS(req, (r) => {
    seen = [r.qclass, r.qtype];
    return Response.rcode(0, 'whoami');
  });
  assert.deepEqual(seen, [1, QType.A]);
  assert.deepEqual(res.toMessage(req).questions, [{ name: 'version.test.', type: QType.TXT, class: 3 }]);
});

/** Runs `rules` on a query from CoreDNS's test.ResponseWriter client (10.240.0.1:40212 → 127.0.0.1:53). */
async function through(rules: string[], name: string, type: number, qclass = 1, remote = '10.240.0.1') {
  const h = new RewriteHandler(
    rules.map((r) => newRule(toks(r))),
    () => Response.rcode(2, ''),
  );
  const m = emptyMessage(1);
  m.questions.push({ name, type, class: qclass });
  const raw = encodeMessage(m);
  const c: ClientInfo = {
    ...client,
    remoteAddress: remote,
    remotePort: 40212,
    family: remote.includes(':') ? 2 : 1,
    localAddress: '127.0.0.1',
    localPort: 53,
  };
  const req = new Request(raw, parseQuery(raw) as ParsedQuery, c);
  let inner: Request | null = null;
  const res = await h.serveDNS(req, (r) => {
    inner = r;
    const a = r.reply();
    if (r.qtype === QType.A)
      a.answers.push({ name: r.qname, type: QType.A, class: r.qclass, ttl: 300, data: { address: '127.0.0.1' } });
    return Response.message(a, 'mock');
  });
  return { inner: inner!, answer: res.toMessage(req) };
}

test("CoreDNS's rewrite_test.go TestRewrite: the query each rule list sends on", async () => {
  const rules = [
    'stop name from.nl. to.nl.',
    'stop name regex (core)\\.(dns)\\.(rocks)\\.(nl) {2}.{1}.{3}.{4} answer name (dns)\\.(core)\\.(rocks)\\.(nl) {2}.{1}.{3}.{4}',
    'stop name exact from.exact.nl. to.nl.',
    'stop name prefix prefix to',
    'stop name suffix .suffix. .nl.',
    'stop name substring from.substring to',
    'stop name regex (f.*m)\\.regex\\.(nl) to.{2}',
    'continue name regex consul\\.(rocks) core.dns.{1}',
    'stop name core.dns.rocks to.nl.',
    'continue class HS CH',
    'stop class CH IN',
    'stop type ANY HINFO',
  ];
  const A = QType.A,
    ANY = QType.ANY,
    HINFO = 13,
    IN = 1,
    CH = 3,
    HS = 4;
  const cases: Array<[string, number, number, string, number, number, string | null]> = [
    ['from.nl.', A, IN, 'to.nl.', A, IN, 'from.nl.'],
    ['a.nl.', A, IN, 'a.nl.', A, IN, 'a.nl.'],
    ['a.nl.', A, CH, 'a.nl.', A, IN, 'a.nl.'],
    ['a.nl.', ANY, IN, 'a.nl.', HINFO, IN, null],
    ['from.nl.', ANY, IN, 'to.nl.', ANY, IN, null],
    ['from.exact.nl.', A, IN, 'to.nl.', A, IN, 'from.exact.nl.'],
    ['prefix.nl.', A, IN, 'to.nl.', A, IN, null],
    ['to.suffix.', A, IN, 'to.nl.', A, IN, null],
    ['from.substring.nl.', A, IN, 'to.nl.', A, IN, null],
    ['from.regex.nl.', A, IN, 'to.nl.', A, IN, null],
    // Only the exact rule maps back: the regex rule before it has no answer option (the current
    // README's rule; the older test this table comes from expected consul.rocks.).
    ['consul.rocks.', A, IN, 'to.nl.', A, IN, 'core.dns.rocks.'],
    ['a.nl.', ANY, CH, 'a.nl.', ANY, IN, null],
    ['a.nl.', ANY, HS, 'a.nl.', ANY, IN, null],
    ['core.dns.rocks.nl.', A, IN, 'dns.core.rocks.nl.', A, IN, 'core.dns.rocks.nl.'],
  ];
  for (const [from, fromT, fromC, to, toT, toC, answer] of cases) {
    const r = await through(rules, from, fromT, fromC);
    assert.deepEqual([r.inner.qname, r.inner.qtype, r.inner.qclass], [to, toT, toC], `${from} ${fromT} ${fromC}`);
    assert.deepEqual(r.answer.questions[0], { name: from, type: fromT, class: fromC }, 'the question as asked');
    if (answer !== null) assert.equal(r.answer.answers[0]?.name, answer, `${from}: answer name`);
  }
});

test("CoreDNS's TestRewriteEDNS0LocalVariable and TestRewriteEDNS0Subnet: the option each rule adds", async () => {
  const local = async (data: string) =>
    (await through([`edns0 local set 0xffee ${data}`], 'example.com.', QType.A)).inner;
  const opt = (r: Request) => decodeMessage(r.raw).edns?.options.find((o) => o.code === 0xffee)?.data;
  assert.deepEqual(opt(await local('{qname}')), Buffer.from('example.com.'));
  assert.deepEqual(opt(await local('{qtype}')), Buffer.from([0, 1]));
  assert.deepEqual(opt(await local('{client_ip}')), Buffer.from([10, 240, 0, 1]));
  assert.deepEqual(opt(await local('{client_port}')), Buffer.from([0x9d, 0x14]));
  assert.deepEqual(opt(await local('{protocol}')), Buffer.from('udp'));
  assert.deepEqual(opt(await local('{server_port}')), Buffer.from([0, 0x35]));
  assert.deepEqual(opt(await local('{server_ip}')), Buffer.from([127, 0, 0, 1]));
  assert.deepEqual(opt(await local('0xabcdef')), Buffer.from([0xab, 0xcd, 0xef]));
  assert.equal(opt(await local('{test/does-not-exist}')), undefined, 'a label nobody set: no option');
  const ecs = async (v4: number, v6: number, remote = '10.240.0.1') =>
    decodeMessage(
      (await through([`edns0 subnet set ${v4} ${v6}`], 'example.com.', QType.A, 1, remote)).inner.raw,
    ).edns?.options.find((o) => o.code === 8)?.data;
  assert.deepEqual(await ecs(24, 56), Buffer.from([0, 1, 24, 0, 10, 240, 0]));
  assert.deepEqual(await ecs(32, 56), Buffer.from([0, 1, 32, 0, 10, 240, 0, 1]));
  assert.deepEqual(await ecs(0, 56), Buffer.from([0, 1, 0, 0]));
  const v6 = 'fe80::42:ff:feca:4c65';
  assert.deepEqual(await ecs(24, 56, v6), Buffer.from([0, 2, 56, 0, 0xfe, 0x80, 0, 0, 0, 0, 0]));
  assert.deepEqual(
    await ecs(24, 128, v6),
    Buffer.from([0, 2, 128, 0, 0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0x42, 0, 0xff, 0xfe, 0xca, 0x4c, 0x65]),
  );
});

test("CoreDNS's TestEdns0LocalMultiRule: replace only when present, set otherwise", async () => {
  const rules = ['edns0 local replace 0xffee abcdef', 'edns0 local set 0xffee fedcba'];
  const r = await through(rules, 'example.com.', QType.A);
  assert.deepEqual(decodeMessage(r.inner.raw).edns?.options, [{ code: 0xffee, data: Buffer.from('fedcba') }]);
});
