// The cache as a client sees it, over real UDP/TCP sockets: the project's listener in
// front, a cache configured from Corefile text, and an upstream DNS server the test
// controls behind a test-only forwarder. Time is a frozen clock moved by hand.
import { after, afterEach, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import { QType, Rcode } from '../../src/dns/constants.js';
import { decodeMessage, type Message } from '../../src/dns/message.js';
import { advanceClock, freezeClock } from '../../src/server/clock.js';
import { buildQuery, query, sendTcp, sendUdp } from '../helpers/dns.js';
import { dependenciesOnly } from '../../src/server/prepared-reply.js';
import type { Request, Response } from '../../src/server/request.js';
import {
  EXPIRY_SPREAD_BURST,
  EXPIRY_SPREAD_MOST_MS,
  SWEEP_GRACE_MS,
  SWEEP_SLICE,
} from '../../src/plugins/cache/handler.js';
import { SWEEP_REMOVAL_COST } from '../../src/plugins/cache/store.js';
import {
  answerTo,
  forwardTo,
  rigServices,
  rr,
  sleep,
  soa,
  startRig,
  startUpstream,
  type CacheRig,
  type Upstream,
} from './harness.js';

freezeClock(1_000_000);

/** The upstream's zone: what it answers, by lowercase name. */
function zone(q: Message): Message | null {
  const question = q.questions[0]!;
  const name = question.name.toLowerCase();
  const t = question.type;
  const a = (ttl: number, address: string) => rr(question.name, QType.A, ttl, { address });
  if (name.startsWith('wrong-question.')) {
    const m = answerTo(q);
    m.questions = [{ name: 'other.example.org.', type: t, class: 1 }];
    m.answers.push(rr('other.example.org.', QType.A, 300, { address: '10.0.0.6' }));
    return m;
  }
  switch (name) {
    case 'www.example.org.': {
      const m = answerTo(q);
      if (t === QType.A) m.answers.push(a(300, '10.0.0.1'));
      else if (t === QType.AAAA) m.answers.push(rr(question.name, QType.AAAA, 300, { address: 'fd00::1' }));
      else m.authorities.push(soa('example.org.', 3600, 60));
      return m;
    }
    case 'mixed.example.org.': {
      // CNAME 3600, A 120, an additional record 200, authority NS 100000.
      const m = answerTo(q);
      m.answers.push(rr(question.name, QType.CNAME, 3600, { target: 'target.example.org.' }));
      m.answers.push(rr('target.example.org.', QType.A, 120, { address: '10.0.0.2' }));
      m.authorities.push(rr('example.org.', QType.NS, 100000, { target: 'ns.example.org.' }));
      m.additionals.push(rr('ns.example.org.', QType.A, 200, { address: '10.0.0.53' }));
      return m;
    }
    case 'short.example.org.': {
      const m = answerTo(q);
      m.answers.push(a(2, '10.0.0.3'));
      return m;
    }
    case 'long.example.org.': {
      const m = answerTo(q);
      m.answers.push(a(86400, '10.0.0.4'));
      return m;
    }
    case 'nx.example.org.': {
      const m = answerTo(q, Rcode.NXDOMAIN);
      m.authorities.push(soa('example.org.', 600, 60));
      return m;
    }
    case 'nx-low-ttl.example.org.': {
      const m = answerTo(q, Rcode.NXDOMAIN);
      m.authorities.push(soa('example.org.', 20, 3600));
      return m;
    }
    case 'nodata.example.org.': {
      const m = answerTo(q);
      m.authorities.push(soa('example.org.', 600, 45));
      return m;
    }
    case 'nx-nosoa.example.org.':
      return answerTo(q, Rcode.NXDOMAIN);
    case 'nodata-nosoa.example.org.':
      return answerTo(q);
    case 'servfail.example.org.':
      return answerTo(q, Rcode.SERVFAIL);
    case 'refused.example.org.':
      return answerTo(q, Rcode.REFUSED);
    case 'formerr.example.org.':
      return answerTo(q, Rcode.FORMERR);
    case 'notimp.example.org.':
      return answerTo(q, Rcode.NOTIMP);
    case 'truncated.example.org.': {
      const m = answerTo(q);
      m.tc = true;
      m.answers.push(a(300, '10.0.0.5'));
      return m;
    }
    case 'dangling.example.org.': {
      // A CNAME whose target has no A record in the reply, and no SOA.
      const m = answerTo(q);
      m.answers.push(rr(question.name, QType.CNAME, 300, { target: 'elsewhere.example.net.' }));
      return m;
    }
    case 'referral.example.org.': {
      const m = answerTo(q);
      m.authorities.push(rr('referral.example.org.', QType.NS, 900, { target: 'ns1.referral.example.org.' }));
      return m;
    }
    default: {
      if (name.endsWith('.cluster.local.') || name.endsWith('.sub.example.org.') || name.startsWith('n')) {
        if (name.startsWith('nx')) {
          const m = answerTo(q, Rcode.NXDOMAIN);
          m.authorities.push(soa('cluster.local.', 30, 30));
          return m;
        }
        const m = answerTo(q);
        if (t === QType.A) m.answers.push(a(300, '10.96.0.10'));
        else m.authorities.push(soa('cluster.local.', 30, 30));
        return m;
      }
      const m = answerTo(q, Rcode.NXDOMAIN);
      m.authorities.push(soa('example.org.', 600, 60));
      return m;
    }
  }
}

/** An upstream that now answers every name with one A record, TTL 300. */
const answerA = (address: string) => (q: Message) => {
  const m = answerTo(q);
  m.answers.push(rr(q.questions[0]!.name, QType.A, 300, { address }));
  return m;
};

const ttls = (m: Message) => [...m.answers, ...m.authorities, ...m.additionals].map((r) => r.ttl);

describe('cache over sockets', () => {
  let up: Upstream;
  const rigs: CacheRig[] = [];
  const rig = async (directive: string, zones = '.') => {
    const r = await startRig(directive, forwardTo(up.port), zones);
    rigs.push(r);
    return r;
  };

  before(async () => {
    up = await startUpstream(zone);
  });
  afterEach(async () => {
    for (const r of rigs.splice(0)) await r.close();
    up.log.length = 0;
    up.respond = zone;
    up.delayMs = 0;
  });
  after(async () => {
    await up.close();
  });

  describe('key and reply shape', () => {
    test("a hit answers with the asker's ID and question letter case, AA set, without asking upstream again", async () => {
      const c = await rig('cache');
      const first = await query(c.port, 'WwW.Example.ORG.', QType.A, { id: 1111 });
      assert.equal(first.answers[0]?.ttl, 300);
      const raw = await sendUdp(c.port, buildQuery('www.EXAMPLE.org.', QType.A, { id: 2222 }));
      const hit = decodeMessage(raw);
      assert.equal(hit.id, 2222);
      assert.equal(hit.questions[0]?.name, 'www.EXAMPLE.org.');
      assert.equal(hit.aa, true);
      assert.equal(hit.ra, true);
      assert.equal(hit.rd, true);
      assert.deepEqual(hit.answers[0]?.data, { address: '10.0.0.1' });
      assert.equal(up.count('www.example.org.'), 1);
    });

    test('qtype, DO and CD are part of the key; each variant is asked for once', async () => {
      const c = await rig('cache');
      const variants = [
        () => query(c.port, 'www.example.org.', QType.A),
        () => query(c.port, 'www.example.org.', QType.AAAA),
        () => query(c.port, 'www.example.org.', QType.A, { edns: 1232, do: true }),
        () => query(c.port, 'www.example.org.', QType.A, { edns: 1232 }), // EDNS without DO: same key as no EDNS
      ];
      for (const v of variants) await v();
      assert.equal(up.count(), 3);
      // CD: build by hand (the helper has no option for it).
      const cdq = buildQuery('www.example.org.', QType.A);
      cdq.writeUInt16BE(cdq.readUInt16BE(2) | 0x0010, 2);
      const cd = decodeMessage(await sendUdp(c.port, cdq));
      assert.equal(cd.cd, true);
      assert.equal(up.count(), 4);
      for (const v of variants) await v();
      await sendUdp(c.port, cdq);
      assert.equal(up.count(), 4);
    });

    test("a hit carries the asker's EDNS: an OPT only if asked, its DO and UDP size, no upstream options", async () => {
      const c = await rig('cache');
      await query(c.port, 'www.example.org.', QType.A, { edns: 4096 });
      const plain = await query(c.port, 'www.example.org.', QType.A);
      assert.equal(plain.edns, null);
      const withOpt = await query(c.port, 'www.example.org.', QType.A, { edns: 1400 });
      assert.equal(withOpt.edns?.udpSize, 1400);
      assert.equal(withOpt.edns?.do, false);
      assert.deepEqual(withOpt.edns?.options, []);
      await query(c.port, 'www.example.org.', QType.A, { edns: 1232, do: true });
      const doHit = await query(c.port, 'www.example.org.', QType.A, { edns: 700, do: true });
      assert.equal(doHit.edns?.do, true);
      assert.equal(doHit.edns?.udpSize, 700);
      assert.equal(up.count(), 2);
    });

    test('a question spelled with a compression pointer is answered, never from an entry built for another spelling', async () => {
      const c = await rig('cache');
      await query(c.port, '.', QType.NS);
      await query(c.port, '.', QType.NS);
      assert.equal(up.count(), 1);
      // "." written as a pointer to offset 4 of the header (a zero byte: the root).
      const q = Buffer.from([0x12, 0x34, 0x01, 0x00, 0x00, 0x01, 0, 0, 0, 0, 0, 0, 0xc0, 0x04, 0x00, 0x02, 0x00, 0x01]);
      const m = decodeMessage(await sendUdp(c.port, q));
      assert.equal(m.id, 0x1234);
      assert.equal(m.questions[0]?.name, '.');
      assert.equal(up.count(), 2);
    });

    test('an expired entry asked with a compression pointer is fetched again, and each spelling gets its own question back', async () => {
      const c = await rig('cache');
      await query(c.port, '.', QType.NS);
      advanceClock(60_500); // the denial's 60 s are over: the entry is dead, not yet swept
      const q = Buffer.from([0x12, 0x35, 0x01, 0x00, 0x00, 0x01, 0, 0, 0, 0, 0, 0, 0xc0, 0x04, 0x00, 0x02, 0x00, 0x01]);
      const m = decodeMessage(await sendUdp(c.port, q));
      assert.equal(m.id, 0x1235);
      assert.equal(m.questions[0]?.name, '.');
      assert.equal(m.rcode, Rcode.NXDOMAIN);
      assert.equal(up.count(), 2);
      // The usual spelling afterwards: its own question and the same answer, whatever the entry holds now.
      const again = await query(c.port, '.', QType.NS);
      assert.equal(again.questions[0]?.name, '.');
      assert.equal(again.rcode, Rcode.NXDOMAIN);
      assert.equal(again.authorities[0]?.name, 'example.org.');
      const later = await query(c.port, '.', QType.NS);
      assert.deepEqual(later.authorities, again.authorities);
    });

    test('hits over TCP are the same reply', async () => {
      const c = await rig('cache');
      await query(c.port, 'www.example.org.', QType.A);
      const [raw] = await sendTcp(c.port, [buildQuery('WWW.example.org.', QType.A, { id: 77 })]);
      const m = decodeMessage(raw!);
      assert.equal(m.id, 77);
      assert.equal(m.questions[0]?.name, 'WWW.example.org.');
      assert.deepEqual(m.answers[0]?.data, { address: '10.0.0.1' });
      assert.equal(up.count(), 1);
    });
  });

  describe('TTLs', () => {
    test('TTLs fall by the whole seconds elapsed, and the entry expires with them', async () => {
      const c = await rig('cache');
      await query(c.port, 'www.example.org.', QType.A);
      advanceClock(2_500);
      assert.equal((await query(c.port, 'www.example.org.', QType.A)).answers[0]?.ttl, 298);
      advanceClock(297_400); // 299.9 s after storing
      assert.equal((await query(c.port, 'www.example.org.', QType.A)).answers[0]?.ttl, 1);
      assert.equal(up.count(), 1);
      advanceClock(100); // 300 s: gone
      assert.equal((await query(c.port, 'www.example.org.', QType.A)).answers[0]?.ttl, 300);
      assert.equal(up.count(), 2);
    });

    test('past 64 entries stored within a second, each ends at random in the last tenth of its TTL, its hits still at CoreDNS TTLs', async () => {
      const c = await rig('cache 30');
      const names = Array.from({ length: 300 }, (_, i) => `n${i}.example.org.`);
      for (const n of names) await query(c.port, n, QType.A);
      assert.equal(up.count(), 300);
      const ask = async () => {
        const ttls: number[] = [];
        for (const n of names) ttls.push((await query(c.port, n, QType.A)).answers[0]!.ttl);
        return ttls;
      };
      // 27 s less a ms: nothing has ended yet (3 s at most early), every TTL is CoreDNS's.
      advanceClock(30_000 - EXPIRY_SPREAD_MOST_MS - 1);
      assert.deepEqual(new Set(await ask()), new Set([4]));
      assert.equal(up.count(), 300);
      // 28.5 s: the first 64 are hits at TTL 2 (their exact 30 s), about half the others were
      // fetched again (a fresh TTL 30), the rest are hits at TTL 2.
      advanceClock(1_501);
      const mid = await ask();
      assert.deepEqual(new Set(mid.slice(0, EXPIRY_SPREAD_BURST)), new Set([2]));
      const refetched = mid.slice(EXPIRY_SPREAD_BURST).filter((t) => t === 30).length;
      assert.equal(refetched + mid.slice(EXPIRY_SPREAD_BURST).filter((t) => t === 2).length, 300 - EXPIRY_SPREAD_BURST);
      assert.equal(up.count(), 300 + refetched);
      const share = refetched / (300 - EXPIRY_SPREAD_BURST);
      assert.ok(share > 0.25 && share < 0.75, `${refetched} of ${300 - EXPIRY_SPREAD_BURST} ended by 28.5 s`);
      // 29.9 s: the first 64 still hits at TTL 1; 30 s: gone, exactly as in CoreDNS.
      advanceClock(1_400);
      assert.equal((await query(c.port, names[0]!, QType.A)).answers[0]?.ttl, 1);
      advanceClock(100);
      const before = up.count();
      assert.equal((await query(c.port, names[0]!, QType.A)).answers[0]?.ttl, 30);
      assert.equal(up.count(), before + 1);
    });

    test('with serve_stale a burst of entries is not spread: all 300 are hits up to their exact TTL', async () => {
      const c = await rig('cache 30 {\n serve_stale 1h\n}');
      const names = Array.from({ length: 300 }, (_, i) => `n${i}.example.org.`);
      for (const n of names) await query(c.port, n, QType.A);
      advanceClock(29_900);
      const ttls: number[] = [];
      for (const n of names) ttls.push((await query(c.port, n, QType.A)).answers[0]!.ttl);
      assert.deepEqual(new Set(ttls), new Set([1]));
      assert.equal(up.count(), 300);
    });

    test('an expired entry refetched with records of the same size is refilled in place; another size gets a new entry', async () => {
      const c = await rig('cache');
      await query(c.port, 'www.example.org.', QType.A);
      const first = c.handler.store.find('www.example.org.', QType.A, 1, 0);
      assert.ok(first !== null);
      const answer = first.answer;
      advanceClock(300_000);
      up.respond = answerA('10.9.9.9');
      const fresh = await query(c.port, 'www.example.org.', QType.A);
      assert.deepEqual(fresh.answers[0]?.data, { address: '10.9.9.9' });
      assert.equal(fresh.answers[0]?.ttl, 300);
      // The same entry and answer objects (nothing new for V8's old generation), holding the new records.
      const again = c.handler.store.find('www.example.org.', QType.A, 1, 0);
      assert.equal(again, first);
      assert.equal(again.answer, answer);
      assert.equal(c.handler.entries('success'), 1);
      // Its lifetime starts again at the refresh: a hit counts down from there, and it lasts 300 s.
      advanceClock(2_000);
      const hit = await query(c.port, 'www.example.org.', QType.A);
      assert.deepEqual(hit.answers[0]?.data, { address: '10.9.9.9' });
      assert.equal(hit.answers[0]?.ttl, 298);
      assert.equal(up.count(), 2);
      advanceClock(298_000);
      // Two records now: a bigger answer, stored as a new entry.
      up.respond = (q) => {
        const m = answerA('10.9.9.9')(q);
        m.answers.push(rr(q.questions[0]!.name, QType.A, 300, { address: '10.9.9.8' }));
        return m;
      };
      const two = await query(c.port, 'www.example.org.', QType.A);
      assert.equal(two.answers.length, 2);
      const third = c.handler.store.find('www.example.org.', QType.A, 1, 0);
      assert.ok(third !== null && third !== first && third.answer !== answer);
      assert.equal((await query(c.port, 'www.example.org.', QType.A)).answers.length, 2);
      assert.equal(up.count(), 3);
      assert.equal(c.handler.entries('success'), 1);
    });

    test('every record gets one TTL, the minimum over all sections, on the miss and on hits', async () => {
      const c = await rig('cache');
      const miss = await query(c.port, 'mixed.example.org.', QType.A, { edns: 1232 });
      assert.deepEqual(ttls(miss), [120, 120, 120, 120]);
      advanceClock(10_000);
      const hit = await query(c.port, 'mixed.example.org.', QType.A, { edns: 1232 });
      assert.deepEqual(ttls(hit), [110, 110, 110, 110]);
      assert.equal(hit.answers[0]?.type, QType.CNAME);
      assert.deepEqual(hit.answers[1]?.data, { address: '10.0.0.2' });
      assert.deepEqual(hit.additionals[0]?.data, { address: '10.0.0.53' });
    });

    test('cache 30 caps TTLs at 30; a TTL under MINTTL is raised to it; MINTTL 0 keeps it', async () => {
      const capped = await rig('cache 30');
      assert.deepEqual(ttls(await query(capped.port, 'long.example.org.', QType.A)), [30]);
      assert.deepEqual(ttls(await query(capped.port, 'short.example.org.', QType.A)), [5]);
      advanceClock(4_000);
      assert.deepEqual(ttls(await query(capped.port, 'short.example.org.', QType.A)), [1]);
      assert.equal(up.count('short.example.org.'), 1);
      const noMin = await rig('cache {\n success 1000 60 0\n}');
      assert.deepEqual(ttls(await query(noMin.port, 'short.example.org.', QType.A)), [2]);
    });

    test('NXDOMAIN and NODATA live min(SOA TTL, SOA MINIMUM), clamped to the denial limits', async () => {
      const c = await rig('cache');
      const nx = await query(c.port, 'nx.example.org.', QType.A);
      assert.equal(nx.rcode, Rcode.NXDOMAIN);
      assert.deepEqual(ttls(nx), [60]);
      assert.deepEqual(ttls(await query(c.port, 'nx-low-ttl.example.org.', QType.A)), [20]);
      const nodata = await query(c.port, 'nodata.example.org.', QType.A);
      assert.equal(nodata.rcode, Rcode.NOERROR);
      assert.deepEqual(ttls(nodata), [45]);
      advanceClock(44_900);
      assert.deepEqual(ttls(await query(c.port, 'nodata.example.org.', QType.A)), [1]);
      assert.equal((await query(c.port, 'nx.example.org.', QType.A)).rcode, Rcode.NXDOMAIN);
      assert.equal(up.count(), 3);
      advanceClock(100);
      await query(c.port, 'nodata.example.org.', QType.A);
      assert.equal(up.count('nodata.example.org.'), 2);

      const capped = await rig('cache {\n denial 1000 10\n}');
      assert.deepEqual(ttls(await query(capped.port, 'nx.example.org.', QType.A)), [10]);
      const cap30 = await rig('cache 30');
      assert.deepEqual(ttls(await query(cap30.port, 'nx.example.org.', QType.A)), [30]);
    });

    test('keepttl serves the original TTL until the entry expires', async () => {
      const c = await rig('cache {\n keepttl\n}');
      await query(c.port, 'www.example.org.', QType.A);
      advanceClock(200_000);
      assert.deepEqual(ttls(await query(c.port, 'www.example.org.', QType.A)), [300]);
      advanceClock(100_000);
      await query(c.port, 'www.example.org.', QType.A);
      assert.equal(up.count(), 2);
    });
  });

  describe('what is not cached', () => {
    test('a negative answer without an SOA is never cached', async () => {
      const c = await rig('cache');
      for (let i = 0; i < 3; i++) {
        assert.equal((await query(c.port, 'nx-nosoa.example.org.', QType.A)).rcode, Rcode.NXDOMAIN);
        assert.equal((await query(c.port, 'nodata-nosoa.example.org.', QType.A)).rcode, Rcode.NOERROR);
      }
      assert.equal(up.count('nx-nosoa.example.org.'), 3);
      assert.equal(up.count('nodata-nosoa.example.org.'), 3);
    });

    test('SERVFAIL is kept 5 s by default, for the servfail duration, and never with servfail 0', async () => {
      const c = await rig('cache');
      assert.equal((await query(c.port, 'servfail.example.org.', QType.A)).rcode, Rcode.SERVFAIL);
      advanceClock(4_900);
      assert.equal((await query(c.port, 'servfail.example.org.', QType.A)).rcode, Rcode.SERVFAIL);
      assert.equal(up.count(), 1);
      advanceClock(100);
      await query(c.port, 'servfail.example.org.', QType.A);
      assert.equal(up.count(), 2);

      const never = await rig('cache {\n servfail 0\n}');
      await query(never.port, 'servfail.example.org.', QType.A);
      await query(never.port, 'servfail.example.org.', QType.A);
      assert.equal(up.count(), 4);

      const longer = await rig('cache {\n servfail 30s\n}');
      await query(longer.port, 'servfail.example.org.', QType.A);
      advanceClock(29_000);
      await query(longer.port, 'servfail.example.org.', QType.A);
      assert.equal(up.count(), 5);
    });

    test('truncated, REFUSED and FORMERR answers are never cached (NOTIMP is, as a server error)', async () => {
      const c = await rig('cache');
      const names = ['truncated', 'refused', 'formerr'].map((n) => `${n}.example.org.`);
      for (let i = 0; i < 2; i++) for (const n of names) await query(c.port, n, QType.A);
      for (const n of names) assert.equal(up.count(n), 2, n);
      const tc = await query(c.port, 'truncated.example.org.', QType.A);
      assert.equal(tc.tc, true);
    });

    test('an answer to another question is passed on, not stored, and counted as a drop', async () => {
      const c = await rig('cache');
      await query(c.port, 'wrong-question.example.org.', QType.A);
      await query(c.port, 'wrong-question.example.org.', QType.A);
      assert.equal(up.count('wrong-question.example.org.'), 2);
      assert.equal(c.handler.counters.drops, 2);
    });

    test('a CNAME that does not lead to the asked type, with no SOA, is not cached; a referral is', async () => {
      const c = await rig('cache');
      await query(c.port, 'dangling.example.org.', QType.A);
      await query(c.port, 'dangling.example.org.', QType.A);
      assert.equal(up.count('dangling.example.org.'), 2);
      await query(c.port, 'dangling.example.org.', QType.CNAME);
      await query(c.port, 'dangling.example.org.', QType.CNAME);
      assert.equal(up.count('dangling.example.org.'), 3);
      await query(c.port, 'referral.example.org.', QType.A);
      const r = await query(c.port, 'referral.example.org.', QType.A);
      assert.equal(r.authorities[0]?.type, QType.NS);
      assert.equal(up.count('referral.example.org.'), 1);
    });

    test('names outside the cache zones are passed through', async () => {
      const c = await rig('cache 30 example.org');
      await query(c.port, 'www.example.org.', QType.A);
      await query(c.port, 'www.example.org.', QType.A);
      await query(c.port, 'web.default.svc.cluster.local.', QType.A);
      await query(c.port, 'web.default.svc.cluster.local.', QType.A);
      assert.equal(up.count('www.example.org.'), 1);
      assert.equal(up.count('web.default.svc.cluster.local.'), 2);
      assert.equal(c.handler.counters.requests, 2);
    });
  });

  describe('disable', () => {
    test("kubeadm's cache 30 { disable success cluster.local; disable denial cluster.local } caches only outside the cluster domain", async () => {
      const c = await rig('cache 30 {\n disable success cluster.local\n disable denial cluster.local\n}');
      for (let i = 0; i < 3; i++) {
        await query(c.port, 'web.default.svc.cluster.local.', QType.A);
        assert.equal((await query(c.port, 'nx.default.svc.cluster.local.', QType.A)).rcode, Rcode.NXDOMAIN);
        await query(c.port, 'www.example.org.', QType.A);
        await query(c.port, 'nx.example.org.', QType.A);
      }
      assert.equal(up.count('web.default.svc.cluster.local.'), 3);
      assert.equal(up.count('nx.default.svc.cluster.local.'), 3);
      assert.equal(up.count('www.example.org.'), 1);
      assert.equal(up.count('nx.example.org.'), 1);
      // The cluster answers pass through untouched: their own TTL, not a cached one.
      assert.deepEqual(ttls(await query(c.port, 'web.default.svc.cluster.local.', QType.A)), [300]);
      assert.deepEqual(ttls(await query(c.port, 'www.example.org.', QType.A)), [30]);
    });

    test('disable denial for one zone still caches its positive answers and other zones denials', async () => {
      const c = await rig('cache {\n disable denial sub.example.org\n}');
      for (let i = 0; i < 2; i++) {
        await query(c.port, 'nx.sub.example.org.', QType.A);
        await query(c.port, 'a.sub.example.org.', QType.A);
        await query(c.port, 'nx.example.org.', QType.A);
      }
      assert.equal(up.count('nx.sub.example.org.'), 2);
      assert.equal(up.count('a.sub.example.org.'), 1);
      assert.equal(up.count('nx.example.org.'), 1);
    });
  });

  describe('single flight', () => {
    test('1,000 concurrent identical queries reach the upstream once; all 1,000 get answers with their own ID and case', async () => {
      const c = await rig('cache');
      up.delayMs = 300;
      const sock = dgram.createSocket('udp4');
      await new Promise<void>((r) => sock.bind(0, '127.0.0.1', () => r()));
      // The default receive buffer holds ~256 datagrams; 1,000 replies arrive in one burst.
      sock.setRecvBufferSize(4 * 1024 * 1024);
      const replies = new Map<number, Message>();
      const done = new Promise<void>((resolve, reject) => {
        const t = setTimeout(() => reject(new Error(`only ${replies.size} replies`)), 10_000);
        sock.on('message', (msg) => {
          const m = decodeMessage(msg);
          replies.set(m.id, m);
          if (replies.size === 1000) {
            clearTimeout(t);
            resolve();
          }
        });
      });
      const caseOf = (i: number) => (i % 2 === 0 ? 'nflight.example.org.' : 'NFLIGHT.Example.org.');
      for (let i = 0; i < 1000; i++) sock.send(buildQuery(caseOf(i), QType.A, { id: i + 1 }), c.port, '127.0.0.1');
      await done;
      sock.close();
      assert.equal(up.count('nflight.example.org.'), 1);
      for (let i = 0; i < 1000; i++) {
        const m = replies.get(i + 1)!;
        assert.ok(m, `no reply with ID ${i + 1}`);
        assert.equal(m.questions[0]?.name, caseOf(i));
        assert.deepEqual(m.answers[0]?.data, { address: '10.96.0.10' });
      }
    });

    test('queries waiting on a trip that yields a bare SERVFAIL all get SERVFAIL', async () => {
      const c = await rig('cache');
      up.respond = () => null; // the forwarder times out
      const c2 = await startRig('cache', forwardTo(up.port, 300));
      rigs.push(c2);
      void c;
      const answers = await Promise.all(
        Array.from({ length: 20 }, () => query(c2.port, 'silent.example.org.', QType.A)),
      );
      for (const a of answers) assert.equal(a.rcode, Rcode.SERVFAIL);
      assert.equal(up.count('silent.example.org.'), 1);
    });
  });

  describe('prefetch', () => {
    test('a popular entry is refreshed in the background once its TTL is low', async () => {
      const c = await rig('cache {\n prefetch 2 1m 50%\n}');
      await query(c.port, 'www.example.org.', QType.A); // stored, TTL 300
      for (let i = 0; i < 3; i++) {
        advanceClock(i === 0 ? 10_000 : 50_000); // hits at 10, 60, 110 s: popular, but 190 s left
        await query(c.port, 'www.example.org.', QType.A);
      }
      await sleep(50);
      assert.equal(up.count(), 1);
      advanceClock(50_000); // 160 s in: 140 s left, the 50% threshold is 150 s
      const hit = await query(c.port, 'www.example.org.', QType.A); // prefetch starts behind this reply
      assert.equal(hit.answers[0]?.ttl, 140);
      for (let i = 0; i < 50 && up.count() < 2; i++) await sleep(10);
      assert.equal(up.count(), 2);
      await sleep(20);
      assert.equal((await query(c.port, 'www.example.org.', QType.A)).answers[0]?.ttl, 300);
      assert.equal(c.handler.counters.prefetches, 1);
    });

    test('an entry asked for with gaps longer than the duration is not prefetched', async () => {
      const c = await rig('cache {\n prefetch 2 10s 90%\n}');
      await query(c.port, 'www.example.org.', QType.A);
      for (let i = 0; i < 5; i++) {
        advanceClock(11_000);
        await query(c.port, 'www.example.org.', QType.A);
      }
      await sleep(50);
      assert.equal(up.count(), 1);
      assert.equal(c.handler.counters.prefetches, 0);
    });
  });

  describe('serve_stale', () => {
    test('an expired entry is served with TTL 0 and refreshed behind the reply', async () => {
      const c = await rig('cache {\n serve_stale 1h\n}');
      await query(c.port, 'www.example.org.', QType.A);
      advanceClock(400_000);
      up.respond = answerA('10.9.9.9');
      const stale = await query(c.port, 'www.example.org.', QType.A);
      assert.deepEqual(stale.answers[0]?.data, { address: '10.0.0.1' });
      assert.equal(stale.answers[0]?.ttl, 0);
      for (let i = 0; i < 50 && up.count() < 2; i++) await sleep(10);
      await sleep(20);
      const fresh = await query(c.port, 'www.example.org.', QType.A);
      assert.deepEqual(fresh.answers[0]?.data, { address: '10.9.9.9' });
      assert.equal(c.handler.counters.servedStale, 1);
    });

    test('verify asks first: a fresh answer wins, a failure gets the stale entry', async () => {
      const c = await startRig('cache {\n serve_stale 1h verify\n}', forwardTo(up.port, 300));
      rigs.push(c);
      await query(c.port, 'www.example.org.', QType.A);
      advanceClock(400_000);
      up.respond = answerA('10.9.9.9');
      const fresh = await query(c.port, 'www.example.org.', QType.A);
      assert.deepEqual(fresh.answers[0]?.data, { address: '10.9.9.9' });
      assert.equal(fresh.answers[0]?.ttl, 300);
      assert.equal(c.handler.counters.servedStale, 0);

      advanceClock(400_000);
      up.respond = (q) => answerTo(q, Rcode.SERVFAIL);
      const stale = await query(c.port, 'www.example.org.', QType.A);
      assert.deepEqual(stale.answers[0]?.data, { address: '10.9.9.9' });
      assert.equal(stale.answers[0]?.ttl, 0);
      up.respond = () => null; // upstream silent: the forwarder gives a bare SERVFAIL
      const stale2 = await query(c.port, 'www.example.org.', QType.A);
      assert.deepEqual(stale2.answers[0]?.data, { address: '10.9.9.9' });
      assert.equal(c.handler.counters.servedStale, 2);
    });

    test('an entry expired for longer than the serve_stale duration is not served', async () => {
      const c = await rig('cache {\n serve_stale 10s\n}');
      await query(c.port, 'www.example.org.', QType.A);
      advanceClock(311_000);
      up.respond = (q) => answerTo(q, Rcode.NXDOMAIN);
      const r = await query(c.port, 'www.example.org.', QType.A);
      assert.equal(r.rcode, Rcode.NXDOMAIN);
      assert.equal(c.handler.counters.servedStale, 0);
    });
  });

  describe('bounds', () => {
    test('the configured capacity holds: 1,500 names into a 1,024-entry cache', async () => {
      const c = await rig('cache {\n success 1024\n}');
      for (let i = 0; i < 1500; i++) await query(c.port, `n${i}.example.org.`, QType.A);
      assert.equal(c.handler.entries('success'), 1024);
      assert.equal(c.handler.counters.evictionsSuccess, 476);
    });

    test('expired entries are swept away, not left to pile up', async () => {
      // No more than a second's burst: these live exactly their TTL.
      const c = await rig('cache 30');
      for (let i = 0; i < EXPIRY_SPREAD_BURST; i++) await query(c.port, `n${i}.example.org.`, QType.A);
      assert.equal(c.handler.entries('success'), EXPIRY_SPREAD_BURST);
      // Within the grace after their TTL they stay (a name asked again refills its entry); then they go.
      advanceClock(30_000 + SWEEP_GRACE_MS - 1);
      c.handler.sweep();
      assert.equal(c.handler.entries('success'), EXPIRY_SPREAD_BURST);
      advanceClock(1);
      c.handler.sweep();
      assert.equal(c.handler.entries('success'), 0);
    });

    test("the second's sweep goes a bounded slice per turn, and still removes every expired entry", async () => {
      const c = await rig('cache 30 sweep.example.org', 'sweep.example.org');
      for (let i = 0; i < 600; i++) await query(c.port, `n${i}.sweep.example.org.`, QType.A);
      assert.equal(c.handler.entries('success'), 600);
      advanceClock(30_000 + SWEEP_GRACE_MS);
      // Turn by turn (an immediate alternates with each of the sweep's), what is left.
      const left: number[] = [];
      const deadline = Date.now() + 3000;
      while (c.handler.entries('success') > 0 && Date.now() < deadline) {
        await new Promise((r) => setImmediate(r));
        left.push(c.handler.entries('success'));
      }
      assert.equal(c.handler.entries('success'), 0, 'every expired entry is gone within the sweep interval');
      const slice = Math.ceil(SWEEP_SLICE / (1 + SWEEP_REMOVAL_COST));
      let most = 0;
      for (let i = 1; i < left.length; i++) most = Math.max(most, left[i - 1]! - left[i]!);
      most = Math.max(most, 600 - left.find((n) => n < 600)!);
      assert.ok(most <= slice, `one turn removed ${most} entries (at most ${slice})`);
      assert.ok(new Set(left).size >= Math.floor(600 / slice), `spread over turns: ${left.join(' ')}`);
      const text = await rigServices.metrics().metrics();
      assert.ok(
        text.includes('coredns_cache_entries{server="dns://:53",type="success",zones="sweep.example.org.",view=""} 0'),
        'the entries metric follows',
      );
    });
  });

  describe('coherence with the cluster', () => {
    test('invalidateNames drops every cached variant of a name at once', async () => {
      const c = await rig('cache');
      await query(c.port, 'web.default.svc.cluster.local.', QType.A);
      await query(c.port, 'web.default.svc.cluster.local.', QType.AAAA);
      await query(c.port, 'web.default.svc.cluster.local.', QType.A, { edns: 1232, do: true });
      await query(c.port, 'db.default.svc.cluster.local.', QType.A);
      assert.equal(c.handler.invalidation.invalidateNames(['Web.Default.svc.cluster.local']), 3);
      await query(c.port, 'web.default.svc.cluster.local.', QType.A);
      await query(c.port, 'db.default.svc.cluster.local.', QType.A);
      assert.equal(up.count('web.default.svc.cluster.local.'), 4);
      assert.equal(up.count('db.default.svc.cluster.local.'), 1);
    });

    test('invalidateSuffix turns cached NXDOMAINs under a new Service into fresh answers', async () => {
      const c = await rig('cache');
      assert.equal((await query(c.port, 'nx.web.default.svc.cluster.local.', QType.SRV)).rcode, Rcode.NXDOMAIN);
      assert.equal((await query(c.port, 'nx.web.default.svc.cluster.local.', QType.SRV)).rcode, Rcode.NXDOMAIN);
      assert.equal(up.count(), 1);
      up.respond = (q) => {
        const m = answerTo(q);
        m.answers.push(
          rr(q.questions[0]!.name, QType.SRV, 5, {
            priority: 0,
            weight: 100,
            port: 80,
            target: 'web.default.svc.cluster.local.',
          }),
        );
        return m;
      };
      assert.equal(c.handler.invalidation.invalidateSuffix('web.default.svc.cluster.local.'), 1);
      const now = await query(c.port, 'nx.web.default.svc.cluster.local.', QType.SRV);
      assert.equal(now.rcode, Rcode.NOERROR);
      assert.equal(now.answers[0]?.type, QType.SRV);
    });

    test('an answer in flight when its name is invalidated is answered but not stored', async () => {
      const c = await rig('cache');
      up.delayMs = 100;
      const pending = query(c.port, 'web.default.svc.cluster.local.', QType.A);
      await sleep(30);
      c.handler.invalidation.invalidateNames(['web.default.svc.cluster.local.']);
      assert.equal((await pending).answers.length, 1);
      up.delayMs = 0;
      await query(c.port, 'web.default.svc.cluster.local.', QType.A);
      assert.equal(up.count(), 2);
    });
  });

  describe('answers that record what they were built from', () => {
    /** forward to the test upstream, describing each answer as built from `deps(name)`. */
    const describing = (deps: (name: string) => string[]) => {
      const fwd = forwardTo(up.port);
      return async (req: Request) => {
        const res = await fwd(req);
        res.prepared = dependenciesOnly(deps(req.name));
        return res;
      };
    };
    const built = async (next: (req: Request) => Promise<Response>) => {
      const r = await startRig('cache', next);
      rigs.push(r);
      return r;
    };

    test('a change to what an answer was built from drops it, whatever its name; other answers stay', async () => {
      const c = await built(describing((n) => (n.startsWith('www.') ? ['s:ns/web', 's:ns/www'] : ['s:ns/other'])));
      await query(c.port, 'www.example.org.', QType.A);
      await query(c.port, 'www.example.org.', QType.AAAA);
      await query(c.port, 'short.example.org.', QType.A);
      assert.equal(up.count(), 3);
      assert.equal(c.handler.invalidation.invalidateDependencies(['s:ns/nothing']), 0);
      assert.equal(c.handler.invalidation.invalidateDependencies(['s:ns/web']), 2);
      await query(c.port, 'www.example.org.', QType.A);
      await query(c.port, 'short.example.org.', QType.A);
      assert.equal(up.count('www.example.org.'), 3, 'asked again after the change');
      assert.equal(up.count('short.example.org.'), 1, 'still served from the cache');
    });

    test('an answer in flight when what it was built from changes is answered but not stored; others are', async () => {
      const c = await built(describing((n) => (n.startsWith('www.') ? ['s:ns/web'] : ['s:ns/other'])));
      up.delayMs = 100;
      const pending = query(c.port, 'www.example.org.', QType.A);
      const unrelated = query(c.port, 'short.example.org.', QType.A);
      await sleep(30);
      c.handler.invalidation.invalidateDependencies(['s:ns/web']);
      assert.equal((await pending).answers.length, 1);
      assert.equal((await unrelated).answers.length, 1);
      up.delayMs = 0;
      await query(c.port, 'www.example.org.', QType.A);
      await query(c.port, 'short.example.org.', QType.A);
      assert.equal(up.count('www.example.org.'), 2, 'the answer that may predate the change was not kept');
      assert.equal(up.count('short.example.org.'), 1, 'an answer built from something else was kept');
    });
  });

  describe('metrics', () => {
    test("CoreDNS's cache metrics with server, type, zones and view labels", async () => {
      const c = await rig('cache 30 metrics.example.org', 'metrics.example.org');
      await query(c.port, 'n1.metrics.example.org.', QType.A); // miss
      await query(c.port, 'n1.metrics.example.org.', QType.A); // success hit
      await query(c.port, 'nx1.metrics.example.org.', QType.A); // miss
      await query(c.port, 'nx1.metrics.example.org.', QType.A); // denial hit
      await query(c.port, 'wrong-question.metrics.example.org.', QType.A); // miss, drop
      const text = await rigServices.metrics().metrics();
      const zl = 'zones="metrics.example.org.",view=""';
      const labels = `server="dns://:53",${zl}`;
      const want = [
        `coredns_cache_requests_total{${labels}} 5`,
        `coredns_cache_misses_total{${labels}} 3`,
        `coredns_cache_hits_total{server="dns://:53",type="success",${zl}} 1`,
        `coredns_cache_hits_total{server="dns://:53",type="denial",${zl}} 1`,
        `coredns_cache_entries{server="dns://:53",type="success",${zl}} 1`,
        `coredns_cache_entries{server="dns://:53",type="denial",${zl}} 1`,
        `coredns_cache_drops_total{${labels}} 1`,
        `coredns_cache_prefetch_total{${labels}} 0`,
        `coredns_cache_served_stale_total{${labels}} 0`,
        `coredns_cache_evictions_total{server="dns://:53",type="success",${zl}} 0`,
      ];
      for (const w of want)
        assert.ok(
          text.includes(w),
          `missing ${w}\n${text
            .split('\n')
            .filter((l) => l.includes('cache'))
            .join('\n')}`,
        );
      // Counters survive the cache being replaced (a reload): they never go backwards.
      await c.close();
      rigs.splice(rigs.indexOf(c), 1);
      const after = await rigServices.metrics().metrics();
      assert.ok(after.includes(`coredns_cache_requests_total{${labels}} 5`));
      assert.ok(!after.includes(`coredns_cache_entries{server="dns://:53",type="success",${zl}}`));
    });
  });
});
