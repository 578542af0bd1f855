// rewrite's parts in-process: rule parsing as CoreDNS's newRule, and the fast path's answer
// (the query built as bytes, the client's question swapped in) giving the same records as the
// Message path.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseQuery, type ParsedQuery } from '../../src/dns/query.js';
import { decodeMessage, emptyMessage, encodeMessage } from '../../src/dns/message.js';
import { QType } from '../../src/dns/constants.js';
import { Request, Response } from '../../src/server/request.js';
import { recordsReply } from '../../src/server/reply.js';
import { newRule } from '../../src/plugins/rewrite/setup.js';
import { RewriteHandler } from '../../src/plugins/rewrite/handler.js';
import { rebuildQuery, swapQuestion } from '../../src/plugins/rewrite/wire.js';
import type { Token } from '../../src/corefile/types.js';

const toks = (line: string): Token[] => line.split(' ').map((text) => ({ text, file: 'Corefile', line: 1, quoted: false }));
const client = { proto: 'udp' as const, remoteAddress: '10.1.2.3', remotePort: 5353, family: 1 as const, localAddress: '127.0.0.1', localPort: 53 };

function request(name: string, type = QType.A, edns = true): Request {
  const m = emptyMessage(0x1234);
  m.rd = true;
  m.questions.push({ name, type, class: 1 });
  if (edns) m.edns = { udpSize: 1232, version: 0, do: true, zflags: 0, options: [{ code: 10, data: Buffer.from('cookie!!') }] };
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
  ]) assert.doesNotThrow(() => newRule(toks(ok)), ok);
  for (const bad of ['answer name a b', 'name a', 'name bogus a b', 'type A', 'type NOPE A', 'ttl exact a.test x', 'rcode exact a.test NOPE NXDOMAIN', 'edns0 local set 0xffee', 'edns0 subnet set 33 56', 'edns0 nsid set x', 'edns0 local frob 1 2']) {
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
  const kube = (r: Request) => Response.wire(recordsReply(r, 0, 0x0400, Buffer.concat([rr, rr]), 2, 0, 0), 'kubernetes');
  const h = new RewriteHandler(rules, () => Response.rcode(2, ''));
  const req = request('Web.Example.org.');
  const res = (await h.serveDNS(req, kube)) as Response;
  assert.ok(res.hasWire, 'answered by the fast path');
  const m = decodeMessage(res.peekWire()!);
  assert.deepEqual(m.questions, [{ name: 'Web.Example.org.', type: QType.A, class: 1 }]);
  assert.deepEqual(m.answers.map((a) => [a.name, a.ttl, a.data]), [
    ['Web.Example.org.', 5, { address: '10.96.0.20' }],
    ['Web.Example.org.', 5, { address: '10.96.0.20' }],
  ]);
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
  const h = new RewriteHandler([newRule(toks('continue class CH IN')), newRule(toks('type TXT A'))], () => Response.rcode(2, ''));
  const m = emptyMessage(7);
  m.questions.push({ name: 'version.test.', type: QType.TXT, class: 3 });
  const raw = encodeMessage(m);
  const req = new Request(raw, parseQuery(raw) as ParsedQuery, client);
  let seen: [number, number] | null = null;
  const res = (await h.serveDNS(req, (r) => {
    seen = [r.qclass, r.qtype];
    return Response.rcode(0, 'whoami');
  })) as Response;
  assert.deepEqual(seen, [1, QType.A]);
  assert.deepEqual(res.toMessage(req).questions, [{ name: 'version.test.', type: QType.TXT, class: 3 }]);
});
