// searchfan's answer cache: what is kept, for how long, and what never is.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { QType, Rcode } from '../../src/dns/constants.js';
import { FakeUpstream, sleep } from '../forward/upstreams.js';
import { searchfan } from './harness.js';
import { zone } from './zone.js';

describe('searchfan: answer cache', () => {
  let up: FakeUpstream;
  before(async () => {
    up = await FakeUpstream.start();
  });
  after(async () => {
    await up.close();
  });
  const line = () => `searchfan 127.0.0.1:${up.port} {\n search a.test\n ndots 5\n timeout 300ms\n}`;

  it('serves a hit with every TTL lowered by the seconds it spent in the cache', async () => {
    up.reset();
    up.behaviour = zone({ records: { 'ttl.a.test.': { a: ['10.0.0.1'], ttl: 30 } } });
    const h = searchfan(line());
    try {
      assert.equal((await h.ask('ttl.', QType.A)).msg.answers[0]!.ttl, 30);
      await sleep(1100);
      const r = await h.ask('ttl.', QType.A);
      assert.equal(r.msg.answers[0]!.ttl, 29);
      assert.equal(up.queries.length, 2, 'only the first query went upstream (two candidates)');
      assert.equal(r.msg.id !== 0, true);
    } finally {
      h.stop();
    }
  });

  it('keeps positive answers for their smallest TTL, at most 30 minutes', async () => {
    up.reset();
    up.behaviour = zone({ records: { 'long.a.test.': { a: ['10.0.0.2'], ttl: 86400 } } });
    const h = searchfan(line());
    try {
      await h.ask('long.', QType.A);
      const e = h.fan.store.get('long.', QType.A, 1, performance.now())!;
      assert.equal(Math.round((e.expiresAt - e.storedAt) / 1000), 1800);
      assert.equal(e.answer.cacheSeconds, 1800);
    } finally {
      h.stop();
    }
  });

  it('keeps NXDOMAIN and NODATA for the SOA minimum, at most 30 s, and asks again once it has passed', async () => {
    up.reset();
    up.behaviour = zone({ records: { 'v4.a.test.': { a: ['10.0.0.3'] } }, soaMinimum: 1 });
    const h = searchfan(line());
    try {
      assert.equal((await h.ask('missing.', QType.A)).msg.rcode, Rcode.NXDOMAIN);
      assert.equal((await h.ask('v4.', QType.AAAA)).msg.rcode, Rcode.NOERROR);
      const sent = up.queries.length;
      assert.equal((await h.ask('missing.', QType.A)).msg.rcode, Rcode.NXDOMAIN);
      assert.equal((await h.ask('v4.', QType.AAAA)).msg.answers.length, 0);
      assert.equal(up.queries.length, sent, 'both negatives came from the cache');
      await sleep(1100);
      await h.ask('missing.', QType.A);
      assert.ok(up.queries.length > sent, 'asked again after the 1 s SOA minimum');
    } finally {
      h.stop();
    }
    up.behaviour = zone({ records: {}, soaMinimum: 600 });
    const h2 = searchfan(line());
    try {
      await h2.ask('missing.', QType.A);
      assert.equal(
        h2.fan.store.get('missing.', QType.A, 1, performance.now())!.answer.cacheSeconds,
        30,
        'an SOA minimum of 600 s is capped at 30 s',
      );
    } finally {
      h2.stop();
    }
  });

  it('never keeps SERVFAIL or timeouts: the next query asks the upstream again', async () => {
    up.reset();
    up.behaviour = zone({ records: {}, rcode: () => Rcode.SERVFAIL });
    const h = searchfan(line());
    try {
      assert.equal((await h.ask('broken.', QType.A)).msg.rcode, Rcode.SERVFAIL);
      assert.equal((await h.ask('broken.', QType.A)).msg.rcode, Rcode.SERVFAIL);
      assert.equal(up.queries.length, 4, 'both queries went upstream');
      up.reset();
      up.behaviour = zone({ records: {}, silent: () => true });
      const t = await h.ask('quiet.', QType.A);
      assert.equal(t.msg.rcode, Rcode.SERVFAIL, 'every branch timed out');
      await h.ask('quiet.', QType.A);
      assert.equal(up.queries.length, 4, 'the timeout was not kept either');
      assert.equal(h.fan.store.size, 0);
    } finally {
      h.stop();
    }
  });

  it('keys on the lowercased name, qtype and qclass', async () => {
    up.reset();
    up.behaviour = zone({ records: { 'mix.a.test.': { a: ['10.0.0.4'], aaaa: ['fd00::4'] } } });
    const h = searchfan(line());
    try {
      await h.ask('mix.', QType.A);
      await h.ask('MIX.', QType.A);
      assert.equal(up.queries.length, 2, 'MIX. is the same entry as mix.');
      const r = await h.ask('mix.', QType.AAAA);
      assert.deepEqual(
        r.msg.answers.map((a) => (a.data as { address: string }).address),
        ['fd00::4'],
      );
      assert.equal(up.queries.length, 4, 'AAAA is an entry of its own');
    } finally {
      h.stop();
    }
  });
});
