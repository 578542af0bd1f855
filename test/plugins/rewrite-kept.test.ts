// rewrite's kept answers in-process: a repeated query is answered without the rules and the next
// plugin, written for its own asker; the inner answer's keys, names and zone drop it; and what
// cannot be kept (no description, a later answer, an edns0 rule, too big) always goes the long way.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseQuery, type ParsedQuery } from '../../src/dns/query.js';
import { decodeMessage, emptyMessage, encodeMessage } from '../../src/dns/message.js';
import { QType } from '../../src/dns/constants.js';
import { Request, Response, type HandlerResult } from '../../src/server/request.js';
import { recordsReply } from '../../src/server/reply.js';
import { Invalidation } from '../../src/server/invalidation.js';
import { dependenciesOnly } from '../../src/server/prepared-reply.js';
import { newRule } from '../../src/plugins/rewrite/setup.js';
import { RewriteHandler } from '../../src/plugins/rewrite/handler.js';
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

function request(name: string, id: number, opts: { type?: number; edns?: boolean; udpSize?: number } = {}): Request {
  const m = emptyMessage(id);
  m.rd = true;
  m.questions.push({ name, type: opts.type ?? QType.A, class: 1 });
  if (opts.edns ?? true) m.edns = { udpSize: opts.udpSize ?? 1232, version: 0, do: false, zflags: 0, options: [] };
  const raw = encodeMessage(m);
  return new Request(raw, parseQuery(raw) as ParsedQuery, client);
}

const RULE = 'name regex (.*)\\.example\\.org {1}.svc.cluster.local answer auto';

/** A stand-in for kubernetes: `count` A records 10.96.0.N owned by the question, described with its Service's key. */
function innerPlugin(count = 1, described = true) {
  const calls: string[] = [];
  const rr = (i: number) => Buffer.from([0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 30, 0, 4, 10, 96, 0, i + 1]);
  const records = Buffer.concat(Array.from({ length: count }, (_, i) => rr(i)));
  let ip = 0;
  const serve = (r: Request): HandlerResult => {
    calls.push(r.name);
    const body = Buffer.from(records);
    for (let i = 0; i < count; i++) body[i * 16 + 15] = ip + i + 1;
    const res = Response.wire(recordsReply(r, 0, 0x0400, body, count, 0, 0), 'kubernetes');
    const p = dependenciesOnly([`s:${r.name.split('.')[1]}/${r.name.split('.')[0]}`]);
    p.ttlOffsets = Uint16Array.from({ length: count }, (_, i) => i * 16 + 6);
    p.body = body;
    p.an = count;
    p.minTtl = 30;
    p.answerHasQtype = true;
    if (described) res.prepared = p;
    return res;
  };
  return { calls, serve, renumber: (n: number) => (ip = n) };
}

function opened(rules: string[] = [RULE]) {
  const inv = new Invalidation();
  const h = new RewriteHandler(
    rules.map((r) => newRule(toks(r))),
    () => Response.rcode(2, ''),
  );
  h.open(inv, [{ name: 'rewrite', handler: h }, { name: 'kubernetes' }]);
  return { h, inv };
}

const addresses = (res: Response) =>
  decodeMessage(res.peekWire()!).answers.map((a) => (a.data as { address: string }).address);

test('a repeated query is answered from the kept answer, for its own asker, without the next plugin', async () => {
  const { h } = opened();
  const k = innerPlugin(2);
  const first = await h.serveDNS(request('web.shop.example.org.', 1), k.serve);
  assert.deepEqual(k.calls, ['web.shop.svc.cluster.local.']);
  assert.equal(h.keptAnswers, 1);
  assert.ok(first.prepared !== null, 'the swapped answer carries the inner description');

  const req = request('WEB.Shop.Example.Org.', 0xbeef);
  const again = await h.serveDNS(req, k.serve);
  assert.equal(k.calls.length, 1, 'the next plugin was not asked again');
  const m = decodeMessage(again.peekWire()!);
  assert.equal(m.id, 0xbeef);
  assert.ok(m.aa && m.rd && m.qr);
  assert.deepEqual(m.questions, [{ name: 'WEB.Shop.Example.Org.', type: QType.A, class: 1 }]);
  assert.deepEqual(
    m.answers.map((a) => [a.name, a.ttl, (a.data as { address: string }).address]),
    [
      ['WEB.Shop.Example.Org.', 30, '10.96.0.1'],
      ['WEB.Shop.Example.Org.', 30, '10.96.0.2'],
    ],
  );
  assert.equal(m.edns?.udpSize, 1232);
  // The same bytes as the first answer but for the ID and the letters of the question.
  const a = Buffer.from(first.peekWire()!);
  const b = Buffer.from(again.peekWire()!);
  a.writeUInt16BE(0, 0);
  b.writeUInt16BE(0, 0);
  assert.equal(a.toString('latin1').toLowerCase(), b.toString('latin1').toLowerCase());
  assert.equal(again.prepared, first.prepared);
});

test('a query of another shape (no EDNS, another type) is not answered from a kept answer of this one', async () => {
  const { h } = opened();
  const k = innerPlugin();
  await h.serveDNS(request('web.shop.example.org.', 1), k.serve);
  const plain = await h.serveDNS(request('web.shop.example.org.', 2, { edns: false }), k.serve);
  assert.equal(k.calls.length, 2);
  assert.equal(decodeMessage(plain.peekWire()!).edns, null);
  await h.serveDNS(request('web.shop.example.org.', 3, { type: QType.AAAA }), k.serve);
  assert.equal(k.calls.length, 3);
  // Each kept by now.
  await h.serveDNS(request('web.shop.example.org.', 4, { edns: false }), k.serve);
  await h.serveDNS(request('web.shop.example.org.', 5), k.serve);
  assert.equal(k.calls.length, 3);
});

test("the inner answer's dependency key, its name, or a zone above it drops the kept answer", async () => {
  const { h, inv } = opened();
  const k = innerPlugin();
  const ask = (id: number) => h.serveDNS(request('web.shop.example.org.', id), k.serve) as Promise<Response>;
  await ask(1);
  await ask(2);
  assert.equal(k.calls.length, 1);
  k.renumber(8);
  assert.equal(inv.invalidateDependencies(['s:shop/other']), 0);
  assert.deepEqual(addresses(await ask(3)), ['10.96.0.1']);
  assert.equal(inv.invalidateDependencies(['s:shop/web']), 1);
  assert.deepEqual(addresses(await ask(4)), ['10.96.0.9']);
  assert.equal(k.calls.length, 2);
  for (const drop of [
    () => inv.invalidateNames(['web.shop.svc.cluster.local.']),
    () => inv.invalidateNames(['web.shop.example.org.']),
    () => inv.invalidateSuffix('shop.svc.cluster.local.'),
    () => inv.invalidateSuffix('cluster.local.'),
    () => inv.invalidateSuffix('example.org.'),
  ]) {
    await ask(5);
    const asked: number = k.calls.length;
    assert.equal(drop(), 1);
    await ask(6);
    assert.equal(k.calls.length, asked + 1);
  }
  assert.equal(inv.invalidateSuffix('other.svc.cluster.local.'), 0);
});

test('not kept: no description, an answer that came later, an edns0 rule, closed, acl or autopath after rewrite, and one too big for the asker', async () => {
  const bare = innerPlugin(1, false);
  const { h } = opened();
  await h.serveDNS(request('web.shop.example.org.', 1), bare.serve);
  await h.serveDNS(request('web.shop.example.org.', 2), bare.serve);
  assert.equal(bare.calls.length, 2);

  const later = innerPlugin();
  const h2 = opened().h;
  const slow = (r: Request) => Promise.resolve(later.serve(r));
  await h2.serveDNS(request('web.shop.example.org.', 1), slow);
  await h2.serveDNS(request('web.shop.example.org.', 2), slow);
  assert.equal(later.calls.length, 2);
  assert.equal(h2.keptAnswers, 0);

  const withEdns0 = opened(['continue edns0 local set 0xffee abc', RULE]).h;
  const k3 = innerPlugin();
  await withEdns0.serveDNS(request('web.shop.example.org.', 1), k3.serve);
  await withEdns0.serveDNS(request('web.shop.example.org.', 2), k3.serve);
  assert.equal(withEdns0.keptAnswers, 0);

  const closed = opened();
  closed.h.close();
  const k4 = innerPlugin();
  await closed.h.serveDNS(request('web.shop.example.org.', 1), k4.serve);
  assert.equal(closed.h.keptAnswers, 0);

  // A plugin after rewrite that answers by who asks (acl, autopath) turns keeping off.
  for (const name of ['acl', 'autopath']) {
    const inv = new Invalidation();
    const h6 = new RewriteHandler([newRule(toks(RULE))], () => Response.rcode(2, ''));
    h6.open(inv, [{ name: 'rewrite', handler: h6 }, { name }, { name: 'kubernetes' }]);
    const k6 = innerPlugin();
    await h6.serveDNS(request('web.shop.example.org.', 1), k6.serve);
    await h6.serveDNS(request('web.shop.example.org.', 2), k6.serve);
    assert.equal(k6.calls.length, 2, name);
  }

  // 40 records (640 octets) kept for a 1232-octet client; a 512-octet one gets it cut the long way.
  const { h: h5 } = opened();
  const big = innerPlugin(40);
  await h5.serveDNS(request('web.shop.example.org.', 1), big.serve);
  await h5.serveDNS(request('web.shop.example.org.', 2, { udpSize: 512 }), big.serve);
  assert.equal(big.calls.length, 2);
  assert.equal(h5.keptAnswers, 1);
});
