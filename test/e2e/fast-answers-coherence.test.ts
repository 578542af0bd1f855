// A question the native answer table has seen goes stale with its source: a Service created,
// changed and deleted in the test API server, a hosts file rewritten. TCP never goes through the
// UDP table, so once a TCP query sees the new answer the very next UDP query must see it too; both
// modes (CLUSTERDNS_FAST_ANSWERS=0 and the default) must take the same steps.
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { QType } from '../../src/dns/constants.js';
import { decodeMessage } from '../../src/dns/message.js';
import { KubeApiServer } from '../helpers/kubeapi.js';
import { namespace, service, slice } from '../kubernetes/fixtures.js';
import {
  askTcp,
  assertTableUsed,
  Client,
  describeQuery,
  describeReply,
  q,
  sleep,
  startPair,
  type Mode,
  type Pair,
} from './fast-answers-harness.js';

/** `NXDOMAIN` or the A records' addresses joined. */
function seen(raw: Buffer): string {
  const m = decodeMessage(raw);
  if (m.rcode === 3) return 'NXDOMAIN';
  if (m.rcode !== 0) return `rcode ${m.rcode}`;
  return m.answers
    .filter((r) => r.type === QType.A)
    .map((r) => (r.data as { address: string }).address)
    .join(',');
}

/**
 * Asks `query` several times over UDP so the table holds it; returns what it answered.
 */
async function warm(client: Client, m: Mode, query: Buffer, want: string): Promise<void> {
  for (let i = 0; i < 6; i++) {
    const raw = await client.ask(m.port, query);
    assert.equal(seen(raw), want, `${m.name}: ${describeQuery(query)} before the change: ${describeReply(raw)}`);
  }
}

/**
 * After a change: UDP and TCP in turn until TCP shows `want`; then the next UDP query must show it,
 * and no UDP answer after the first new one may go back. Returns the polls it took.
 */
async function follow(client: Client, m: Mode, queries: Buffer[], want: string, ms = 8000): Promise<number> {
  const end = Date.now() + ms;
  const changed = new Set<number>();
  for (let polls = 1; ; polls++) {
    for (const [i, query] of queries.entries()) {
      const u = seen(await client.ask(m.port, query));
      if (u === want) changed.add(i);
      else assert.ok(!changed.has(i), `${m.name}: ${describeQuery(query)} went back to ${u} after answering ${want}`);
    }
    const t = seen(await askTcp(m.port, queries[0]!));
    if (t === want) {
      for (const query of queries) {
        const raw = await client.ask(m.port, query);
        assert.equal(
          seen(raw),
          want,
          `${m.name}: TCP already answered ${want}, the next UDP ${describeQuery(query)}: ${describeReply(raw)}`,
        );
      }
      return polls;
    }
    assert.ok(Date.now() < end, `${m.name}: TCP still answers ${t}, not ${want}, ${ms} ms after the change`);
    await sleep(5);
  }
}

for (const cache of [false, true]) {
  describe(`fast answers follow the API server (${cache ? 'cache in front of kubernetes' : 'kubernetes alone'})`, () => {
    let api: KubeApiServer;
    let pair: Pair;
    let client: Client;

    before(async () => {
      api = await KubeApiServer.create();
      api.apply(namespace('shop'));
      api.apply(service('shop', 'web', ['10.96.9.1'], [['http', 'TCP', 80]]));
      pair = await startPair(
        `.:PORT {\n    bind 127.0.0.1\n    prometheus 127.0.0.1:METRICS\n${cache ? '    cache 30\n' : ''}` +
          `    kubernetes cluster.local {\n        endpoint ${api.url}\n        ttl 30\n    }\n}\n`,
        { probe: 'web.shop.svc.cluster.local' },
      );
      client = await Client.open();
    });

    after(async () => {
      client?.close();
      await pair?.stop();
      await api?.close();
    });

    test('created, changed, deleted: the next query after TCP sees it sees it over UDP too', async () => {
      const names = ['late.shop.svc.cluster.local', 'LATE.Shop.svc.cluster.local'];
      const queries = [...names.map((n) => q(n, QType.A)), ...names.map((n) => q(n, QType.A, { edns: 1232 }))];
      const step = async (change: () => void, before: string, after: string) => {
        await Promise.all(pair.both.map(async (m) => Promise.all(queries.map((x) => warm(client, m, x, before)))));
        change();
        const polls = await Promise.all(pair.both.map((m) => follow(client, m, queries, after)));
        return polls;
      };
      await step(
        () => api.apply(service('shop', 'late', ['10.96.7.1'], [['http', 'TCP', 80]])),
        'NXDOMAIN',
        '10.96.7.1',
      );
      await step(
        () => api.apply(service('shop', 'late', ['10.96.7.2'], [['http', 'TCP', 80]])),
        '10.96.7.1',
        '10.96.7.2',
      );
      await step(() => api.remove('Service', 'shop', 'late'), '10.96.7.2', 'NXDOMAIN');
      await assertTableUsed(pair, 10);
    });

    test("a headless Service's answer follows its EndpointSlice (another object than the one asked)", async () => {
      api.apply(service('shop', 'hl', 'None', [['http', 'TCP', 80]]));
      api.apply(slice('shop', 'hl-1', 'hl', 'IPv4', [{ ip: '10.244.0.5' }], [['http', 'TCP', 80]]));
      const queries = [
        q('hl.shop.svc.cluster.local', QType.A),
        q('Hl.Shop.svc.cluster.local', QType.A, { edns: 1232 }),
      ];
      await Promise.all(pair.both.map((m) => follow(client, m, queries, '10.244.0.5')));
      await Promise.all(pair.both.map((m) => Promise.all(queries.map((x) => warm(client, m, x, '10.244.0.5')))));
      api.apply(slice('shop', 'hl-1', 'hl', 'IPv4', [{ ip: '10.244.0.6' }], [['http', 'TCP', 80]]));
      await Promise.all(pair.both.map((m) => follow(client, m, queries, '10.244.0.6')));
    });
  });
}

describe('fast answers follow a rewritten hosts file', () => {
  let pair: Pair;
  let client: Client;

  before(async () => {
    pair = await startPair(
      `.:PORT {\n    bind 127.0.0.1\n    prometheus 127.0.0.1:METRICS\n` +
        `    hosts hosts.txt example.org {\n        reload 300ms\n    }\n}\n`,
      { files: { 'hosts.txt': '192.0.2.1 web.example.org\n' }, probe: 'web.example.org' },
    );
    client = await Client.open();
  });

  after(async () => {
    client?.close();
    await pair?.stop();
  });

  test('after the reload picks the file up, the next UDP query answers from the new file', async () => {
    const queries = [
      q('web.example.org', QType.A),
      q('Web.Example.Org', QType.A, { edns: 4096 }),
      q('new.example.org', QType.A),
    ];
    const all = async (want: string[]) =>
      Promise.all(pair.both.map((m) => Promise.all(queries.map((x, i) => warm(client, m, x, want[i]!)))));
    // A name the file lacks is passed on, and nothing follows hosts here: SERVFAIL.
    await all(['192.0.2.1', '192.0.2.1', 'rcode 2']);
    for (const m of pair.both)
      writeFileSync(join(m.s.dir, 'hosts.txt'), '192.0.2.2 web.example.org\n192.0.2.3 new.example.org\n');
    await Promise.all(pair.both.map((m) => follow(client, m, queries.slice(0, 2), '192.0.2.2')));
    await Promise.all(pair.both.map((m) => follow(client, m, queries.slice(2), '192.0.2.3')));
    await all(['192.0.2.2', '192.0.2.2', '192.0.2.3']);
    await assertTableUsed(pair, 10);
  });
});

describe('fast answers follow a new Corefile', () => {
  let pair: Pair;
  let client: Client;

  before(async () => {
    pair = await startPair(
      `.:PORT {\n    bind 127.0.0.1\n    prometheus 127.0.0.1:METRICS\n` +
        `    hosts {\n        192.0.2.1 conf.example.org\n        reload 0\n    }\n}\n`,
      { probe: 'conf.example.org' },
    );
    client = await Client.open();
  });

  after(async () => {
    client?.close();
    await pair?.stop();
  });

  test('after SIGUSR1 loads the new Corefile, the next UDP query answers from it', async () => {
    const queries = [q('conf.example.org', QType.A), q('CONF.example.org', QType.A, { edns: 1232 })];
    await Promise.all(pair.both.map((m) => Promise.all(queries.map((x) => warm(client, m, x, '192.0.2.1')))));
    for (const m of pair.both) {
      writeFileSync(m.s.corefile, readFileSync(m.s.corefile, 'utf8').replace('192.0.2.1', '192.0.2.2'));
      m.s.proc.kill('SIGUSR1');
    }
    await Promise.all(pair.both.map((m) => follow(client, m, queries, '192.0.2.2')));
    await assertTableUsed(pair, 5);
  });
});
