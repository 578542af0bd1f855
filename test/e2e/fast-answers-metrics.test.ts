// Queries the native answer table answers are counted as if JS had answered them: the same 200
// queries over 20 names against the real binary with CLUSTERDNS_FAST_ANSWERS=0 and by default
// leave the same request, response (by rcode and plugin), size-histogram, duration-count and
// cache counters on /metrics, with one worker and with `-workers 2` (the primary sums them).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { QType } from '../../src/dns/constants.js';
import { KubeApiServer } from '../helpers/kubeapi.js';
import { namespace, service } from '../kubernetes/fixtures.js';
import {
  assertTableUsed,
  Client,
  q,
  scrape,
  sleep,
  startPair,
  sumOf,
  type Mode,
  type Pair,
} from './fast-answers-harness.js';

const HOSTS = Array.from({ length: 6 }, (_, i) => `192.0.2.${i + 1} h${i}.example.org`).join('\n') + '\n';

const QUESTIONS: Buffer[] = [
  ...Array.from({ length: 6 }, (_, i) => q(`h${i}.example.org`, QType.A, i % 2 ? { edns: 1232 } : {})),
  q('h0.example.org', QType.AAAA), // NODATA
  q('H1.Example.Org', QType.A, { edns: 4096, do: true }),
  ...Array.from({ length: 4 }, (_, i) => q(`s${i}.shop.svc.cluster.local`, QType.A, i % 2 ? { edns: 1232 } : {})),
  q('s0.shop.svc.cluster.local', QType.SRV),
  q('_http._tcp.s1.shop.svc.cluster.local', QType.SRV, { edns: 1232 }),
  q('s2.shop.svc.cluster.local', QType.AAAA),
  q('1.8.96.10.in-addr.arpa', QType.PTR),
  ...Array.from({ length: 3 }, (_, i) =>
    q(`nx${i}.shop.svc.cluster.local`, QType.A, i % 2 ? { do: true, edns: 1232 } : {}),
  ),
  q('s3.shop.svc.cluster.local', 999),
];

/** The counters that must match: all of coredns_dns_* and coredns_cache_* but durations' buckets and sums. */
function counters(text: string, port: number): string[] {
  return text
    .split('\n')
    .filter((l) => /^coredns_(dns|cache)_/.test(l))
    .filter((l) => !/^coredns_dns_request_duration_seconds_(bucket|sum)/.test(l))
    .map((l) => l.replaceAll(`:${port}"`, ':PORT"'))
    .sort();
}

/** 10 rounds of the 20 questions from 4 client sockets (so two workers both get some), 200 queries. */
async function drive(m: Mode, clients: Client[]): Promise<void> {
  for (let round = 0; round < 10; round++)
    await Promise.all(
      clients.map(async (c, k) => {
        for (let i = k; i < QUESTIONS.length; i += clients.length) await c.ask(m.port, QUESTIONS[i]!);
      }),
    );
}

for (const workers of [1, 2])
  for (const cache of [false, true])
    describe(
      `fast answers: /metrics equal, table off and on (-workers ${workers}${cache ? ', cache' : ''})`,
      { timeout: 60_000 },
      () => {
        let api: KubeApiServer;
        let pair: Pair;
        const clients: Client[] = [];

        before(async () => {
          assert.equal(QUESTIONS.length, 20);
          api = await KubeApiServer.create();
          api.apply(namespace('shop'));
          for (let i = 0; i < 4; i++) api.apply(service('shop', `s${i}`, [`10.96.8.${i + 1}`], [['http', 'TCP', 80]]));
          pair = await startPair(
            `.:PORT {\n    bind 127.0.0.1\n    prometheus 127.0.0.1:METRICS\n${cache ? '    cache 30\n' : ''}` +
              `    hosts hosts.txt example.org\n` +
              `    kubernetes cluster.local in-addr.arpa {\n        endpoint ${api.url}\n        ttl 30\n    }\n}\n`,
            { files: { 'hosts.txt': HOSTS }, workers },
          );
          for (let i = 0; i < 4; i++) clients.push(await Client.open());
        });

        after(async () => {
          for (const c of clients) c.close();
          await pair?.stop();
          await api?.close();
        });

        test('200 queries over 20 names: the same counters with the table off and on', async () => {
          await Promise.all(pair.both.map((m) => drive(m, clients)));
          const off = counters(await scrape(pair.off.metricsPort), pair.off.port);
          assert.equal(sumOf(off.join('\n'), 'coredns_dns_requests_total'), 200, off.join('\n'));
          // Counts from the table may be folded into the metrics a moment later: wait up to 3 s.
          let on = counters(await scrape(pair.on.metricsPort), pair.on.port);
          const end = Date.now() + 3000;
          while (on.join('\n') !== off.join('\n') && Date.now() < end) {
            await sleep(50);
            on = counters(await scrape(pair.on.metricsPort), pair.on.port);
          }
          const onlyOff = off.filter((l) => !on.includes(l));
          const onlyOn = on.filter((l) => !off.includes(l));
          assert.deepEqual(
            { onlyOff, onlyOn },
            { onlyOff: [], onlyOn: [] },
            'counters differ between the table off and on',
          );
          if (process.env.FASTTEST_DEBUG) console.log(off.join('\n'));
          // The Services were there from the first query: only the nx names are NXDOMAIN.
          assert.equal(sumOf(off.join('\n'), 'coredns_dns_responses_total', 'rcode="NXDOMAIN"'), 30, off.join('\n'));
          if (cache) assert.ok(sumOf(off.join('\n'), 'coredns_cache_hits_total') >= 150, off.join('\n'));
          await assertTableUsed(pair, 100);
        });
      },
    );
