// The native answer table through the real binary: repeats of a question are answered by the
// addon (clusterdns_fast_answers_total grows) and still counted as CoreDNS counts them, and a
// change of the data (a Service added, an address changed, a hosts file edited) is seen at once:
// no stale answer, no stale NXDOMAIN. With CLUSTERDNS_FAST_ANSWERS=0 the table stays off.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServer, type RunningServer } from '../helpers/server.js';
import { dig, query } from '../helpers/dns.js';
import { freePort } from '../helpers/ports.js';
import { scrape, total, until } from '../helpers/workers.js';
import { QType, Rcode } from '../../src/dns/constants.js';
import { DEFAULT_ADDON_PATH } from '../../src/server/udp-native.js';

const skip = existsSync(DEFAULT_ADDON_PATH) ? false : 'native addon not built';

function services(items: Array<[string, string]>): string {
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'List',
    items: items.map(([name, ip]) => ({
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name, namespace: 'shop' },
      spec: { clusterIP: ip, ports: [{ name: 'http', port: 80, protocol: 'TCP' }] },
    })),
  });
}

const namespace = '{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"shop"}}';

async function digA(port: number, name: string): Promise<{ status: string; answer: string[] }> {
  const r = await dig(port, ['+nocookie', name, 'A']);
  return { status: r.status, answer: r.answer };
}

describe('native answer table: kubernetes and hosts behind the real binary', { skip }, () => {
  let s: RunningServer;
  let metricsPort: number;
  let dir: string;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'clusterdns-fast-'));
    writeFileSync(join(dir, 'ns.json'), namespace);
    writeFileSync(join(dir, 'svc.json'), services([['web', '10.96.7.1']]));
    writeFileSync(join(dir, 'hosts'), '10.1.1.1 h.example.org\n');
    metricsPort = await freePort();
    s = await startServer({
      corefile: `cluster.local:PORT {
    bind 127.0.0.1
    prometheus 127.0.0.1:${metricsPort}
    kubernetes {
        manifests ${dir}
    }
}
example.org:PORT {
    bind 127.0.0.1
    hosts ${join(dir, 'hosts')} {
        reload 200ms
    }
}
`,
      probe: 'web.shop.svc.cluster.local',
    });
  });

  after(async () => {
    await s?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  test('repeats are answered by the table, byte for byte, and counted as requests', async () => {
    const before = total(await scrape(metricsPort), 'coredns_dns_requests_total');
    const first = await digA(s.port, 'web.shop.svc.cluster.local');
    assert.deepEqual(first, { status: 'NOERROR', answer: ['web.shop.svc.cluster.local. 5 IN A 10.96.7.1'] });
    for (let i = 0; i < 20; i++) assert.deepEqual(await digA(s.port, 'web.shop.svc.cluster.local'), first);
    const nx = await digA(s.port, 'new.shop.svc.cluster.local');
    assert.equal(nx.status, 'NXDOMAIN');
    for (let i = 0; i < 10; i++) assert.equal((await digA(s.port, 'new.shop.svc.cluster.local')).status, 'NXDOMAIN');
    const text = await scrape(metricsPort);
    const fast = total(text, 'clusterdns_fast_answers_total');
    // Entries live up to 1 s: slow digs on shared cores re-enter JS now and then.
    assert.ok(fast >= 12, `fast answers ${fast}`);
    assert.equal(total(text, 'coredns_dns_requests_total') - before, 32, 'every query counted once');
  });

  test('a Service added and an address changed are answered at once: no stale NXDOMAIN, no old address', async () => {
    // Kept answers for both names first.
    for (let i = 0; i < 5; i++) {
      await digA(s.port, 'new.shop.svc.cluster.local');
      await digA(s.port, 'web.shop.svc.cluster.local');
    }
    const file = join(dir, 'svc.json');
    writeFileSync(
      `${file}.tmp`,
      services([
        ['web', '10.96.7.2'],
        ['new', '10.96.7.3'],
      ]),
    );
    renameSync(`${file}.tmp`, file);
    await until(
      'the new Service answers',
      8000,
      async () => (await digA(s.port, 'new.shop.svc.cluster.local')).status === 'NOERROR',
    );
    // Once seen, every later query sees it (the table was flushed with the change).
    for (let i = 0; i < 20; i++) {
      assert.deepEqual((await digA(s.port, 'new.shop.svc.cluster.local')).answer, [
        'new.shop.svc.cluster.local. 5 IN A 10.96.7.3',
      ]);
      assert.deepEqual((await digA(s.port, 'web.shop.svc.cluster.local')).answer, [
        'web.shop.svc.cluster.local. 5 IN A 10.96.7.2',
      ]);
    }
  });

  test('a hosts file edit is answered at once after its re-read', async () => {
    for (let i = 0; i < 5; i++)
      assert.deepEqual((await digA(s.port, 'h.example.org')).answer, ['h.example.org. 3600 IN A 10.1.1.1']);
    writeFileSync(join(dir, 'hosts'), '10.1.1.2 h.example.org\n');
    await until(
      'the new address',
      5000,
      async () => (await digA(s.port, 'h.example.org')).answer[0]?.endsWith('10.1.1.2') === true,
    );
    for (let i = 0; i < 10; i++)
      assert.deepEqual((await digA(s.port, 'h.example.org')).answer, ['h.example.org. 3600 IN A 10.1.1.2']);
  });

  test("IDs are the asker's, and a query in other letters is its own entry", async () => {
    for (let id = 100; id < 110; id++) {
      const m = await query(s.port, 'WEB.shop.svc.cluster.local.', QType.A, { id });
      assert.equal(m.id, id);
      assert.equal(m.rcode, Rcode.NOERROR);
      assert.equal(m.questions[0]!.name, 'WEB.shop.svc.cluster.local.');
    }
  });
});

test('CLUSTERDNS_FAST_ANSWERS=0: no answer comes from the table', { skip }, async () => {
  const mp = await freePort();
  const s = await startServer({
    corefile: `example.org:PORT {
    bind 127.0.0.1
    prometheus 127.0.0.1:${mp}
    hosts {
        10.1.1.1 h.example.org
    }
}
`,
    env: { CLUSTERDNS_FAST_ANSWERS: '0' },
    probe: 'h.example.org',
  });
  try {
    for (let i = 0; i < 10; i++) assert.equal((await digA(s.port, 'h.example.org')).status, 'NOERROR');
    const text = await scrape(mp);
    assert.equal(total(text, 'clusterdns_fast_answers_total'), 0);
    assert.ok(total(text, 'coredns_dns_requests_total') >= 10);
  } finally {
    await s.stop();
  }
});

test(
  'cache hits repeated by the table count in the cache metrics at once, and their TTLs still count down',
  { skip },
  async () => {
    const mp = await freePort();
    const s = await startServer({
      corefile: `example.org:PORT {
    bind 127.0.0.1
    prometheus 127.0.0.1:${mp}
    cache 60
    hosts {
        10.1.1.1 h.example.org
        ttl 30
    }
}
`,
      probe: 'other.example.org',
    });
    try {
      const before = await scrape(mp);
      const delta = (text: string, name: string) => total(text, name) - total(before, name);
      const ttls: number[] = [];
      for (let i = 0; i < 20; i++) {
        const r = await digA(s.port, 'h.example.org');
        ttls.push(Number(r.answer[0]!.split(' ')[1]));
      }
      // Scraped at once: the hits the table gave are folded in before any counter is read.
      const text = await scrape(mp);
      assert.equal(delta(text, 'coredns_cache_requests_total'), 20);
      assert.equal(delta(text, 'coredns_cache_misses_total'), 1, 'the first query');
      assert.equal(delta(text, 'coredns_cache_hits_total'), 19);
      assert.equal(delta(text, 'coredns_dns_requests_total'), 20);
      assert.ok(total(text, 'clusterdns_fast_answers_total') > 0);
      // Never increasing, and never below what the time since the first allows.
      for (let i = 1; i < ttls.length; i++) assert.ok(ttls[i]! <= ttls[i - 1]!, `TTLs ${ttls.join(' ')}`);
      await new Promise((r) => setTimeout(r, 2100));
      const later = Number((await digA(s.port, 'h.example.org')).answer[0]!.split(' ')[1]);
      assert.ok(later <= ttls[ttls.length - 1]! - 2, `TTL ${later} after 2.1 s (was ${ttls[ttls.length - 1]})`);
    } finally {
      await s.stop();
    }
  },
);
