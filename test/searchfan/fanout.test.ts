// searchfan against scripted upstreams over real UDP/TCP sockets: expansion, fan-out counts,
// ordered choice, NODATA, per-candidate upstream choice, cancellation, rewrite.
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import { after, before, describe, it } from 'node:test';
import { QType, Rcode } from '../../src/dns/constants.js';
import type { Message } from '../../src/dns/message.js';
import { expand } from '../../src/plugins/searchfan/candidates.js';
import { FakeUpstream, sleep, waitUntil } from '../forward/upstreams.js';
import { rrText } from '../kubernetes/fixtures.js';
import { searchfan } from './harness.js';
import { udpPortClosed } from './probe.js';
import { askedNames, zone, zoneReply, type ZoneOptions } from './zone.js';

const SEARCH = 'search a.test b.test c.test';

function addresses(m: Message): string[] {
  return m.answers
    .filter((r) => r.type === QType.A || r.type === QType.AAAA)
    .map((r) => (r.data as { address: string }).address);
}

describe('searchfan: search expansion order', () => {
  it('fewer dots than ndots: the search domains first, then the bare name', () => {
    assert.deepEqual(expand('foo.', ['a.test', 'b.test', 'c.test'], 5).names, [
      'foo.a.test.',
      'foo.b.test.',
      'foo.c.test.',
      'foo.',
    ]);
    assert.deepEqual(
      expand('backend.default.', ['default.svc.cluster.local', 'svc.cluster.local', 'cluster.local'], 5),
      {
        names: [
          'backend.default.default.svc.cluster.local.',
          'backend.default.svc.cluster.local.',
          'backend.default.cluster.local.',
          'backend.default.',
        ],
        bare: 3,
      },
    );
  });

  it('ndots dots or more: the bare name first, then the search domains', () => {
    assert.deepEqual(expand('www.example.com.', ['a.test', 'b.test'], 2), {
      names: ['www.example.com.', 'www.example.com.a.test.', 'www.example.com.b.test.'],
      bare: 0,
    });
    assert.deepEqual(expand('foo.bar.', ['a.test'], 1).names, ['foo.bar.', 'foo.bar.a.test.']);
  });

  it('keeps the letter case as asked, drops names over 255 octets, and asks the root once', () => {
    assert.deepEqual(expand('MyHost.', ['a.test'], 1).names, ['MyHost.a.test.', 'MyHost.']);
    const long = `${'x'.repeat(60)}.${'y'.repeat(60)}.${'z'.repeat(60)}.${'w'.repeat(60)}.`;
    assert.deepEqual(expand(long, ['example.org'], 1).names, [long]);
    assert.deepEqual(expand('.', ['a.test'], 5), { names: ['.'], bare: 0 });
    assert.deepEqual(expand('foo.', ['.', 'a.test'], 5).names, ['foo.', 'foo.a.test.']);
  });
});

describe('searchfan: fan-out over real sockets', () => {
  let u1: FakeUpstream;
  let u2: FakeUpstream;
  const to = () => `127.0.0.1:${u1.port} 127.0.0.1:${u2.port}`;

  before(async () => {
    u1 = await FakeUpstream.start();
    u2 = await FakeUpstream.start();
  });
  after(async () => {
    await u1.close();
    await u2.close();
  });
  const reset = () => {
    u1.reset();
    u2.reset();
  };

  it('sends every candidate name to every upstream at once: 4 names × 2 upstreams = 8 queries for one miss, none for a hit', async () => {
    reset();
    const z = zone({ records: { 'foo.a.test.': { a: ['10.0.0.1'] } } });
    u1.behaviour = z;
    u2.behaviour = z;
    const h = searchfan(`searchfan ${to()} {\n ${SEARCH}\n ndots 5\n}`);
    try {
      const r = await h.ask('foo.', QType.A);
      assert.deepEqual(addresses(r.msg), ['10.0.0.1']);
      const all = [...u1.queries, ...u2.queries];
      assert.equal(all.length, 8, 'one query per candidate per upstream');
      assert.deepEqual(askedNames(u1.queries).sort(), ['foo.', 'foo.a.test.', 'foo.b.test.', 'foo.c.test.']);
      assert.deepEqual(askedNames(u2.queries).sort(), ['foo.', 'foo.a.test.', 'foo.b.test.', 'foo.c.test.']);
      const times = all.map((q) => q.at);
      assert.ok(Math.max(...times) - Math.min(...times) < 100, 'all sent together, not one after another');
      await h.ask('foo.', QType.A);
      assert.equal(u1.queries.length + u2.queries.length, 8, 'the second query is a cache hit');
      assert.equal(h.fan.counters.cacheHits, 1);
    } finally {
      h.stop();
    }
  });

  it('a later candidate is used only once every earlier one is NXDOMAIN: the fast bare name loses to the search domain', async () => {
    reset();
    const z = zone({
      records: { 'foo.': { a: ['203.0.113.9'] }, 'foo.b.test.': { a: ['10.0.0.2'] } },
      delayMs: (n) => (n === 'foo.a.test.' ? 80 : n === 'foo.b.test.' ? 160 : 0),
    });
    u1.behaviour = z;
    u2.behaviour = z;
    const h = searchfan(`searchfan ${to()} {\n ${SEARCH}\n ndots 5\n}`);
    try {
      const r = await h.ask('foo.', QType.A);
      assert.deepEqual(
        addresses(r.msg),
        ['10.0.0.2'],
        'foo.a.test is NXDOMAIN, so foo.b.test wins over the quicker foo.',
      );
      assert.ok(r.ms >= 150, `waited for foo.b.test (${r.ms.toFixed(0)} ms)`);
    } finally {
      h.stop();
    }
  });

  it('with ndots dots or more the name as asked comes first and wins when it exists', async () => {
    reset();
    const z = zone({
      records: { 'api.corp.': { a: ['198.51.100.1'] }, 'api.corp.a.test.': { a: ['10.0.0.3'] } },
      delayMs: (n) => (n === 'api.corp.' ? 60 : 0),
    });
    u1.behaviour = z;
    u2.behaviour = z;
    const h = searchfan(`searchfan ${to()} {\n ${SEARCH}\n ndots 1\n}`);
    try {
      assert.deepEqual(addresses((await h.ask('api.corp.', QType.A)).msg), ['198.51.100.1']);
    } finally {
      h.stop();
    }
  });

  it('NODATA on an earlier candidate proves the name exists: AAAA of an IPv4-only name is NODATA, never NXDOMAIN', async () => {
    reset();
    const z = zone({ records: { 'db.a.test.': { a: ['10.0.0.5'] } }, delayMs: (n) => (n === 'db.a.test.' ? 100 : 0) });
    u1.behaviour = z;
    u2.behaviour = z;
    const h = searchfan(`searchfan ${to()} {\n ${SEARCH}\n ndots 5\n}`);
    try {
      const r = await h.ask('db.', QType.AAAA);
      assert.equal(r.msg.rcode, Rcode.NOERROR, 'the NXDOMAINs of the later names, which came first, do not count');
      assert.deepEqual(r.msg.answers, []);
      assert.deepEqual(
        r.msg.authorities.map((x) => x.type),
        [QType.SOA],
      );
      assert.deepEqual(addresses((await h.ask('db.', QType.A)).msg), ['10.0.0.5']);
    } finally {
      h.stop();
    }
  });

  it('every candidate NXDOMAIN gives the NXDOMAIN of the name as asked', async () => {
    reset();
    const z = zone({ records: {} });
    u1.behaviour = z;
    u2.behaviour = z;
    const h = searchfan(`searchfan ${to()} {\n ${SEARCH}\n ndots 5\n}`);
    try {
      const r = await h.ask('nothing.', QType.A);
      assert.equal(r.msg.rcode, Rcode.NXDOMAIN);
      assert.equal(r.msg.questions[0]!.name, 'nothing.');
    } finally {
      h.stop();
    }
  });

  it("the first upstream to answer decides for a candidate, and the other upstream's branch for it is closed", async () => {
    reset();
    // u1 says x.a.test does not exist at once; u2 would say it does, but later.
    u1.behaviour = zone({
      records: { 'x.b.test.': { a: ['10.0.0.7'] } },
      delayMs: (n) => (n === 'x.b.test.' ? 50 : 0),
    });
    u2.behaviour = zone({
      records: { 'x.a.test.': { a: ['10.9.9.9'] }, 'x.b.test.': { a: ['10.0.0.7'] } },
      delayMs: (n) => (n === 'x.a.test.' ? 400 : 50),
    });
    const h = searchfan(`searchfan ${to()} {\n ${SEARCH}\n ndots 5\n}`);
    try {
      const r = await h.ask('x.', QType.A);
      assert.deepEqual(addresses(r.msg), ['10.0.0.7']);
      const late = u2.queries.find((q) => q.msg.questions[0]!.name === 'x.a.test.')!;
      assert.equal(
        await udpPortClosed(late.address, late.port),
        true,
        "u2's branch for x.a.test was closed before it answered",
      );
    } finally {
      h.stop();
    }
  });

  it('once the answer is known every other branch is cancelled: sockets closed, nothing retried', async () => {
    reset();
    const z = zone({
      records: { 'foo.a.test.': { a: ['10.0.0.1'] }, 'foo.': { a: ['203.0.113.9'] } },
      delayMs: (n) => (n === 'foo.a.test.' ? 0 : 500),
    });
    u1.behaviour = z;
    u2.behaviour = z;
    const control = dgram.createSocket('udp4');
    await new Promise<void>((r) => control.bind(0, '127.0.0.1', () => r()));
    const h = searchfan(`searchfan ${to()} {\n ${SEARCH}\n ndots 5\n}`);
    try {
      const r = await h.ask('foo.', QType.A);
      assert.deepEqual(addresses(r.msg), ['10.0.0.1']);
      assert.ok(r.ms < 400, `answered without waiting for the slow branches (${r.ms.toFixed(0)} ms)`);
      assert.equal(
        h.fan.counters.cancelled >= 6,
        true,
        `6 slow branches cancelled (counted ${h.fan.counters.cancelled})`,
      );
      assert.equal(
        await udpPortClosed('127.0.0.1', control.address().port),
        false,
        'the probe sees an open socket as open',
      );
      const slow = [...u1.queries, ...u2.queries].filter((q) => q.msg.questions[0]!.name !== 'foo.a.test.');
      assert.equal(slow.length, 6);
      for (const q of slow)
        assert.equal(await udpPortClosed(q.address, q.port), true, `socket of ${q.msg.questions[0]!.name} closed`);
      await sleep(700);
      assert.equal(u1.queries.length + u2.queries.length, 8, 'no branch was retried after its slow reply');
    } finally {
      control.close();
      h.stop();
    }
  });

  it('a truncated UDP answer is asked again over TCP, and cancelling that branch closes its TCP connection', async () => {
    reset();
    const z: ZoneOptions = {
      records: { 'big.a.test.': { a: ['10.0.0.8'] }, 'big.b.test.': { a: ['10.0.0.9'] } },
      truncate: (n) => n === 'big.b.test.',
      delayMs: (_n, q) => (q.proto === 'tcp' ? 5000 : 0),
    };
    const served = zone(z);
    u1.behaviour = (q, r) => {
      if (q.msg.questions[0]!.name !== 'big.a.test.') return served(q, r);
      // big.a.test answers only once big.b.test is waiting on its TCP connection.
      const t = setInterval(() => {
        if (!u1.queries.some((x) => x.proto === 'tcp')) return;
        clearInterval(t);
        r.send(zoneReply(z, q.raw, true));
      }, 5);
      t.unref();
    };
    const h = searchfan(`searchfan 127.0.0.1:${u1.port} {\n search a.test b.test\n ndots 5\n}`);
    try {
      const r = await h.ask('big.', QType.A);
      assert.deepEqual(addresses(r.msg), ['10.0.0.8']);
      assert.equal(u1.queries.filter((q) => q.proto === 'tcp').length, 1, 'big.b.test went again over TCP');
      await waitUntil(() => u1.accepted === 1 && u1.open.size === 0, 1000, 'the TCP connection to be closed');
    } finally {
      h.stop();
    }
  });

  it('a candidate no upstream answers (timeout) stops the walk: SERVFAIL even though a later name exists', async () => {
    reset();
    const z = zone({ records: { 'slow.b.test.': { a: ['10.0.0.4'] } }, silent: (n) => n === 'slow.a.test.' });
    u1.behaviour = z;
    u2.behaviour = z;
    const h = searchfan(`searchfan ${to()} {\n ${SEARCH}\n ndots 5\n timeout 300ms\n}`);
    try {
      const r = await h.ask('slow.', QType.A);
      assert.equal(r.msg.rcode, Rcode.SERVFAIL);
      assert.ok(r.ms >= 280 && r.ms < 1000, `after the timeout (${r.ms.toFixed(0)} ms)`);
      assert.match(r.res.error ?? '', /slow\.a\.test/);
    } finally {
      h.stop();
    }
  });

  it('a candidate answered SERVFAIL is skipped like NXDOMAIN, but if nothing resolves the answer is SERVFAIL, not NXDOMAIN', async () => {
    reset();
    const z = zone({
      records: { 'sf.b.test.': { a: ['10.0.0.6'] } },
      rcode: (n) => (n.endsWith('.a.test.') ? Rcode.SERVFAIL : undefined),
    });
    u1.behaviour = z;
    u2.behaviour = z;
    const h = searchfan(`searchfan ${to()} {\n ${SEARCH}\n ndots 5\n}`);
    try {
      assert.deepEqual(addresses((await h.ask('sf.', QType.A)).msg), ['10.0.0.6']);
      const r = await h.ask('gone.', QType.A);
      assert.equal(r.msg.rcode, Rcode.SERVFAIL, 'gone.a.test failed, so "gone does not exist" is not known');
    } finally {
      h.stop();
    }
  });

  it('rewrites the question and owner names to the name as asked (letter case kept), and a CNAME chain stays a chain', async () => {
    reset();
    const z = zone({
      records: {
        'web.a.test.': { cname: 'lb.example.net.', ttl: 60 },
        'lb.example.net.': { a: ['192.0.2.50'], ttl: 60 },
        'db.a.test.': { a: ['10.0.0.5'] },
      },
    });
    u1.behaviour = z;
    u2.behaviour = z;
    const h = searchfan(`searchfan ${to()} {\n ${SEARCH}\n ndots 5\n}`);
    try {
      const r = await h.ask('WeB.', QType.A);
      assert.equal(r.msg.questions[0]!.name, 'WeB.');
      assert.deepEqual(r.msg.answers.map(rrText), ['WeB. 60 CNAME lb.example.net.', 'lb.example.net. 60 A 192.0.2.50']);
      const again = await h.ask('web.', QType.A);
      assert.deepEqual(
        again.msg.answers.map((x) => x.name),
        ['web.', 'lb.example.net.'],
        "a cache hit takes the new asker's letter case",
      );
      assert.deepEqual((await h.ask('db.', QType.A)).msg.answers.map(rrText), ['db. 30 A 10.0.0.5']);
    } finally {
      h.stop();
    }
  });

  it('refuses a miss beyond max_concurrent lookups in flight (each holds a socket per branch), but lets it join one', async () => {
    reset();
    const z = zone({ records: { 'one.a.test.': { a: ['10.0.0.21'] } }, delayMs: () => 150 });
    u1.behaviour = z;
    u2.behaviour = z;
    const h = searchfan(`searchfan ${to()} {\n ${SEARCH}\n ndots 5\n max_concurrent 1\n}`);
    try {
      const [a, b, c] = await Promise.all([h.ask('one.', QType.A), h.ask('one.', QType.A), h.ask('two.', QType.A)]);
      assert.deepEqual(addresses(a.msg), ['10.0.0.21']);
      assert.deepEqual(addresses(b.msg), ['10.0.0.21'], 'the same question joins the lookup in flight');
      assert.equal(c.msg.rcode, Rcode.REFUSED);
      assert.equal(h.fan.counters.refused, 1);
    } finally {
      h.stop();
    }
  });

  it('concurrent identical misses are coalesced into one lookup', async () => {
    reset();
    const z = zone({ records: { 'burst.a.test.': { a: ['10.0.0.11'] } }, delayMs: () => 100 });
    u1.behaviour = z;
    u2.behaviour = z;
    const h = searchfan(`searchfan ${to()} {\n ${SEARCH}\n ndots 5\n}`);
    try {
      const rs = await Promise.all(Array.from({ length: 20 }, () => h.ask('burst.', QType.A)));
      for (const r of rs) assert.deepEqual(addresses(r.msg), ['10.0.0.11']);
      assert.equal(u1.queries.length + u2.queries.length, 8, 'one fan-out for 20 askers');
      assert.equal(h.fan.counters.coalesced, 19);
      assert.equal(new Set(rs.map((r) => r.msg.id)).size > 1, true, 'each asker gets its own message ID');
    } finally {
      h.stop();
    }
  });
});
