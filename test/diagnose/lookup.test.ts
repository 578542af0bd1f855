// res_send and res_search as diagnose models them, against scripted servers on loopback:
// failover between nameservers, glibc's per-server timeouts, rotate, A/AAAA together or one
// after the other, TCP on truncation, and which outcome the application finally sees.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { QType } from '../../src/dns/constants.js';
import { planCandidates } from '../../src/dns/search.js';
import { lookupCandidate, tryTimeoutMs, type LookupSettings } from '../../src/diagnose/lookup.js';
import { serverAddress, type ServerAddress } from '../../src/diagnose/transport.js';
import { walkCandidates } from '../../src/diagnose/walk.js';
import { freePort } from '../helpers/ports.js';
import { startFakeDns, type FakeDns } from './fakedns.js';

const BOTH = [QType.A, QType.AAAA];
const POD = ['default.svc.cluster.local', 'svc.cluster.local', 'cluster.local'];

function settings(servers: ServerAddress[], over: Partial<LookupSettings> = {}): LookupSettings {
  return {
    servers,
    timeoutMs: 150,
    attempts: 1,
    rotate: false,
    udpMode: 'parallel',
    useVc: false,
    edns0: false,
    trustAd: false,
    ...over,
  };
}

const at = (s: FakeDns) => serverAddress(s.host, s.port);

describe("glibc's per-server timeout", () => {
  test('the first server gets `timeout`, server i gets (timeout << i) / nservers, never under a second', () => {
    assert.equal(tryTimeoutMs(5000, 0, 3), 5000);
    assert.equal(tryTimeoutMs(5000, 1, 3), 3333);
    assert.equal(tryTimeoutMs(5000, 2, 3), 6666);
    assert.equal(tryTimeoutMs(5000, 1, 2), 5000);
    assert.equal(tryTimeoutMs(1000, 1, 3), 1000);
    assert.equal(tryTimeoutMs(100, 1, 3, 1), 66);
  });
});

describe('one name against scripted servers', () => {
  let good: FakeDns;
  let failing: FakeDns;
  let silent: FakeDns;
  before(async () => {
    good = await startFakeDns([
      { match: '^web\\.', reply: { A: '10.0.0.1', AAAA: 'fd00::1' } },
      { match: '^v4only\\.', type: 'A', reply: { A: '10.0.0.4' } },
      { match: '^v4only\\.', type: 'AAAA', reply: 'NODATA' },
      { match: '^lossy\\.', type: 'A', reply: { A: '10.0.0.5' } },
      { match: '^lossy\\.', type: 'AAAA', reply: 'drop' },
      { match: '^big\\.', reply: 'truncate', transport: 'udp' },
      { match: '^big\\.', reply: { A: '10.0.0.9', AAAA: 'fd00::9' } },
    ]);
    failing = await startFakeDns([{ match: '.', reply: 'SERVFAIL' }]);
    silent = await startFakeDns([{ match: '.', reply: 'drop' }]);
  });
  after(async () => {
    await Promise.all([good.close(), failing.close(), silent.close()]);
  });

  test('A and AAAA answered: the candidate is answered, with server, transport and latency per type', async () => {
    const r = await lookupCandidate('web.example.', BOTH, settings([at(good)]));
    assert.equal(r.outcome, 'answered');
    assert.deepEqual(
      r.types.map((t) => t.reply?.answers.length),
      [1, 1],
    );
    assert.ok(
      r.types.every((t) => t.server === at(good).label && t.transport === 'udp' && typeof t.latencyMs === 'number'),
    );
  });

  test('an A answer with an empty AAAA (NODATA) still counts as answered, as glibc reads the pair', async () => {
    assert.equal((await lookupCandidate('v4only.example.', BOTH, settings([at(good)]))).outcome, 'answered');
  });

  test('SERVFAIL from the first nameserver: glibc asks the next one, which answers', async () => {
    const r = await lookupCandidate('web.example.', [QType.A], settings([at(failing), at(good)]));
    assert.equal(r.outcome, 'answered');
    assert.deepEqual(
      r.types[0]!.tries.map((t) => [t.server, t.rcode]),
      [
        [at(failing).label, 2],
        [at(good).label, 0],
      ],
    );
  });

  test('SERVFAIL from every nameserver in every round: SERVFAIL', async () => {
    const r = await lookupCandidate('web.example.', [QType.A], settings([at(failing)], { attempts: 3 }));
    assert.equal(r.outcome, 'servfail');
    assert.equal(r.types[0]!.tries.length, 3);
  });

  test('a silent first nameserver costs one timeout, then the second answers', async () => {
    const r = await lookupCandidate('web.example.', [QType.A], settings([at(silent), at(good)]), 1);
    assert.equal(r.outcome, 'answered');
    const [first, second] = r.types[0]!.tries;
    assert.equal(first!.result, 'timeout');
    assert.ok(first!.latencyMs >= 140, `waited ${first!.latencyMs} ms`);
    assert.equal(second!.result, 'reply');
  });

  test('attempts rounds over all nameservers: 2 servers x 2 attempts = 4 tries when all are silent', async () => {
    const t0 = Date.now();
    const r = await lookupCandidate(
      'web.example.',
      [QType.A],
      settings([at(silent), at(silent)], { attempts: 2, timeoutMs: 60 }),
      1,
    );
    assert.equal(r.outcome, 'timeout');
    assert.equal(r.types[0]!.tries.length, 4);
    assert.ok(Date.now() - t0 >= 4 * 55);
  });

  test('rotate starts at a random nameserver; without it, always at the first', async () => {
    const other = await startFakeDns([{ match: '.', reply: { A: '10.9.9.9' } }]);
    try {
      const firsts = new Set<string>();
      for (let i = 0; i < 30; i++) {
        const r = await lookupCandidate('web.example.', [QType.A], settings([at(good), at(other)], { rotate: true }));
        firsts.add(r.types[0]!.tries[0]!.server);
      }
      assert.equal(firsts.size, 2);
      const fixed = new Set<string>();
      for (let i = 0; i < 10; i++)
        fixed.add(
          (await lookupCandidate('web.example.', [QType.A], settings([at(good), at(other)]))).types[0]!.tries[0]!
            .server,
        );
      assert.deepEqual([...fixed], [at(good).label]);
    } finally {
      await other.close();
    }
  });

  test('AAAA lost while A is answered: both asked again one after the other, then on new sockets, then A alone is used', async () => {
    const s = settings([at(good)], { attempts: 2, timeoutMs: 50 });
    const r = await lookupCandidate('lossy.example.', BOTH, s, 1);
    assert.equal(r.outcome, 'answered');
    assert.equal(r.partialLoss, true);
    assert.deepEqual(
      r.types.map((t) => t.tries.map((x) => x.result)),
      [
        ['reply', 'reply', 'reply'],
        ['timeout', 'timeout', 'timeout'],
      ],
    );
    assert.equal(s.udpMode, 'reopen', 'glibc keeps the single-request-reopen mode for the next lookups');
  });

  test('single-request waits for A before sending AAAA: a lost A means AAAA is never sent in that try', async () => {
    const s = await startFakeDns([
      { match: '.', type: 'A', reply: 'drop' },
      { match: '.', reply: 'NODATA' },
    ]);
    try {
      await lookupCandidate('x.example.', BOTH, settings([at(s)], { udpMode: 'sequential', timeoutMs: 80 }), 1);
      assert.deepEqual(
        s.log.map((q) => q.type),
        ['A'],
      );
      s.log.length = 0;
      await lookupCandidate('x.example.', BOTH, settings([at(s)], { udpMode: 'parallel', timeoutMs: 80 }), 1);
      // Both at once; AAAA's answer without A's makes glibc retry one after the other, where A is lost again.
      const types = s.log.map((q) => q.type);
      assert.deepEqual([...types.slice(0, 2).sort(), ...types.slice(2)], ['A', 'AAAA', 'A']);
      s.log.length = 0;
      await lookupCandidate('x.example.', BOTH, settings([at(s)], { udpMode: 'reopen', timeoutMs: 80 }), 1);
      assert.deepEqual(
        s.log.map((q) => q.type),
        ['A'],
      );
    } finally {
      await s.close();
    }
  });

  test('a truncated UDP answer is fetched again over TCP from the same server', async () => {
    const r = await lookupCandidate('big.example.', BOTH, settings([at(good)]));
    assert.equal(r.outcome, 'answered');
    for (const t of r.types) {
      assert.deepEqual(
        t.tries.map((x) => `${x.transport} ${x.result}`),
        ['udp truncated', 'tcp reply'],
      );
      assert.equal(t.transport, 'tcp');
    }
  });

  test('use-vc: TCP from the start', async () => {
    const r = await lookupCandidate('web.example.', BOTH, settings([at(good)], { useVc: true }));
    assert.equal(r.outcome, 'answered');
    assert.ok(r.types.every((t) => t.tries.length === 1 && t.transport === 'tcp'));
  });

  test('nothing listening: connection refused, reported as unreachable at once (no timeout)', async () => {
    const closed = serverAddress('127.0.0.1', await freePort());
    const t0 = Date.now();
    const r = await lookupCandidate('web.example.', BOTH, settings([closed], { timeoutMs: 5000 }));
    assert.equal(r.outcome, 'unreachable');
    assert.ok(Date.now() - t0 < 3000, 'no 5 s timeout');
    const tcp = await lookupCandidate('web.example.', BOTH, settings([closed], { useVc: true }));
    assert.equal(tcp.outcome, 'unreachable');
  });
});

describe('the walk over the candidates', () => {
  let s: FakeDns;
  before(async () => {
    s = await startFakeDns([
      { match: '^backend\\.default\\.svc\\.cluster\\.local\\.$', reply: { A: '10.96.120.15' } },
      { match: '^headless\\.svc\\.cluster\\.local\\.$', reply: 'NODATA' },
      { match: '^flaky\\.cluster\\.local\\.$', reply: 'SERVFAIL' },
      { match: '^api\\.example\\.com\\.$', reply: 'SERVFAIL' },
      { match: '^stuck\\.default\\.', reply: 'drop' },
      { match: '^refusing\\.svc\\.', reply: 'REFUSED' },
    ]);
  });
  after(() => s.close());

  const walk = (name: string, ndots = 5, search = POD) =>
    walkCandidates(
      planCandidates(name, { search, ndots, noTldQuery: false }),
      BOTH,
      settings([at(s)], { timeoutMs: 100 }),
      1,
    );

  test('the first answer ends the walk; later candidates are listed as not asked', async () => {
    const w = await walk('backend');
    assert.equal(w.final, 'answered');
    assert.equal(w.answeredBy!.candidate.name, 'backend.default.svc.cluster.local.');
    assert.deepEqual(
      w.steps.map((x) => x.result !== null),
      [true, false, false, false],
    );
    assert.ok(w.steps.slice(1).every((x) => x.skipped?.includes('earlier name was answered')));
  });

  test('NXDOMAIN everywhere: four names asked, NXDOMAIN is what the application sees', async () => {
    const w = await walk('nosuch');
    assert.equal(w.final, 'nxdomain');
    assert.equal(w.steps.filter((x) => x.result).length, 4);
  });

  test('NODATA on one search domain wins over the NXDOMAINs around it (glibc: got_nodata)', async () => {
    const w = await walk('headless');
    assert.equal(w.final, 'nodata');
    assert.equal(w.decidedBy!.candidate.name, 'headless.svc.cluster.local.');
  });

  test('SERVFAIL on one search domain: the walk goes on, and TRY_AGAIN (servfail) is reported', async () => {
    const w = await walk('flaky');
    assert.equal(w.steps.filter((x) => x.result).length, 4);
    assert.equal(w.final, 'servfail');
  });

  test('the as-is query went first: its outcome is the one reported, whatever the search list gave', async () => {
    const w = await walk('api.example.com', 2);
    assert.equal(w.steps[0]!.candidate.phase, 'as-is-first');
    assert.equal(w.steps.filter((x) => x.result).length, 4);
    assert.equal(w.final, 'servfail');
  });

  test('a timeout abandons the search list; the bare name is still asked', async () => {
    const w = await walk('stuck');
    assert.deepEqual(
      w.steps.map((x) => (x.result ? x.result.outcome : 'skipped')),
      ['timeout', 'skipped', 'skipped', 'nxdomain'],
    );
    assert.match(w.steps[1]!.skipped!, /abandoned after a timeout/);
    assert.equal(w.final, 'nxdomain', "glibc's h_errno is the last query's");
  });

  test('REFUSED abandons the search list as well', async () => {
    const w = await walk('refusing');
    assert.deepEqual(
      w.steps.map((x) => (x.result ? x.result.outcome : 'skipped')),
      ['nxdomain', 'rejected', 'skipped', 'nxdomain'],
    );
  });
});
