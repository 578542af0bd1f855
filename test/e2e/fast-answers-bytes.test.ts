// The native answer table answers a repeated question with the very bytes the JS path gave the
// first time: the real binary twice (CLUSTERDNS_FAST_ANSWERS=0 and the default), a test API
// server, a hosts file, each query of a mix asked several times in a row, every reply compared
// byte for byte but for the ID (which must be the asker's own).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { QType } from '../../src/dns/constants.js';
import { decodeMessage } from '../../src/dns/message.js';
import { KubeApiServer } from '../helpers/kubeapi.js';
import { namespace, service, slice } from '../kubernetes/fixtures.js';
import {
  assertTableUsed,
  body,
  Client,
  describeQuery,
  describeReply,
  q,
  startPair,
  type Pair,
} from './fast-answers-harness.js';

const HOSTS = [
  '192.0.2.10 web.example.org',
  '192.0.2.11 multi.example.org',
  '192.0.2.12 multi.example.org',
  '192.0.2.13 multi.example.org',
  '2001:db8::10 v6.example.org',
].join('\n');

// Enough endpoints that the headless answer (16 bytes a record) does not fit 512 bytes.
const MANY = Array.from({ length: 60 }, (_, i) => ({ ip: `10.244.1.${i + 1}` }));

const COREFILE = (api: string) =>
  `.:PORT {\n    bind 127.0.0.1\n    prometheus 127.0.0.1:METRICS\n    hosts hosts.txt example.org\n` +
  `    kubernetes cluster.local in-addr.arpa ip6.arpa {\n        endpoint ${api}\n        ttl 30\n    }\n}\n`;

const QUERIES: Buffer[] = [
  q('web.example.org', QType.A),
  q('web.example.org', QType.A, { edns: 1232 }),
  q('web.example.org', QType.A, { edns: 4096, do: true }),
  q('web.example.org', QType.A, { rd: false }),
  q('WeB.ExAmPlE.oRg', QType.A),
  q('multi.example.org', QType.A),
  q('v6.example.org', QType.AAAA),
  q('web.example.org', QType.AAAA), // NODATA
  q('absent.example.org', QType.A), // NXDOMAIN
  q('1.10.2.0.192.in-addr.arpa', QType.PTR),
  q('web.shop.svc.cluster.local', QType.A),
  q('web.shop.svc.cluster.local', QType.A, { edns: 1232 }),
  q('web.shop.svc.cluster.local', QType.A, { edns: 1232, do: true }),
  q('web.shop.svc.cluster.local', QType.A, { rd: false }),
  q('WEB.shop.SVC.Cluster.Local', QType.A),
  q('wEb.ShOp.SvC.cLuStEr.LoCaL', QType.A, { edns: 1232 }),
  q('web.shop.svc.cluster.local', QType.AAAA),
  q('web.shop.svc.cluster.local', QType.SRV),
  q('_http._tcp.web.shop.svc.cluster.local', QType.SRV),
  q('_HTTP._Tcp.Web.shop.svc.cluster.local', QType.SRV, { edns: 4096 }),
  q('web.shop.svc.cluster.local', QType.MX), // NODATA with SOA
  q('web.shop.svc.cluster.local', 65280), // a private-use type
  q('web.shop.svc.cluster.local', 999), // unassigned
  q('nope.shop.svc.cluster.local', QType.A), // NXDOMAIN with SOA
  q('nope.shop.svc.cluster.local', QType.A, { edns: 1232, do: true }),
  q('NoPe.Shop.svc.cluster.local', QType.AAAA),
  q('1.9.96.10.in-addr.arpa', QType.PTR),
  q('1.9.96.10.IN-ADDR.arpa', QType.PTR, { edns: 1232 }),
  q('1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa', QType.PTR),
  q('wide.shop.svc.cluster.local', QType.A), // truncated: 60 records, no EDNS
  q('wide.shop.svc.cluster.local', QType.A, { edns: 512 }), // truncated
  q('wide.shop.svc.cluster.local', QType.A, { edns: 1232 }), // fits
  q('hl.shop.svc.cluster.local', QType.A), // headless
  q('pod-1.hl.shop.svc.cluster.local', QType.A),
  q('_http._tcp.hl.shop.svc.cluster.local', QType.SRV, { edns: 1232 }),
  q('shop.svc.cluster.local', QType.A),
  q('cluster.local', QType.SOA),
  q('cluster.local', QType.NS),
];

const ROUNDS = 5;

describe('fast answers: byte-identical replies, the table off and on', { timeout: 60_000 }, () => {
  let api: KubeApiServer;
  let pair: Pair;
  let client: Client;

  before(async () => {
    api = await KubeApiServer.create();
    api.apply(namespace('shop'));
    api.apply(service('shop', 'web', ['10.96.9.1', 'fd00::1'], [['http', 'TCP', 80]]));
    api.apply(service('shop', 'hl', 'None', [['http', 'TCP', 80]]));
    api.apply(
      slice(
        'shop',
        'hl-1',
        'hl',
        'IPv4',
        [{ ip: '10.244.0.5', hostname: 'pod-1' }, { ip: '10.244.0.6' }],
        [['http', 'TCP', 80]],
      ),
    );
    api.apply(service('shop', 'wide', 'None', [['http', 'TCP', 80]]));
    api.apply(slice('shop', 'wide-1', 'wide', 'IPv4', MANY, [['http', 'TCP', 80]]));
    pair = await startPair(COREFILE(api.url), { files: { 'hosts.txt': HOSTS + '\n' }, probe: 'web.example.org' });
    client = await Client.open();
    // Both have the Services before the first compared query.
    for (const m of pair.both) {
      const end = Date.now() + 10_000;
      while (
        decodeMessage(await client.ask(m.port, q('pod-1.hl.shop.svc.cluster.local', QType.A))).answers.length === 0
      ) {
        assert.ok(Date.now() < end, `${m.name}: the Services never showed up`);
        await new Promise((r) => setTimeout(r, 50));
      }
    }
  });

  after(async () => {
    client?.close();
    await pair?.stop();
    await api?.close();
  });

  test('every reply, first and repeated, equals the other mode byte for byte but the ID', async () => {
    // Each question asked ROUNDS times in a row, then the whole mix again: repeats within a second.
    const run = async (port: number) => {
      const out: Buffer[][] = [];
      for (let pass = 0; pass < 2; pass++)
        for (const [i, query] of QUERIES.entries()) {
          const replies: Buffer[] = [];
          for (let r = 0; r < ROUNDS; r++) {
            const reply = await client.ask(port, query);
            replies.push(reply);
          }
          (out[i] ??= []).push(...replies);
        }
      return out;
    };
    const [off, on] = await Promise.all([run(pair.off.port), run(pair.on.port)]);
    const diffs: string[] = [];
    for (const [i, query] of QUERIES.entries()) {
      for (let r = 0; r < off[i]!.length; r++) {
        const a = off[i]![r]!;
        const b = on[i]![r]!;
        if (body(a) !== body(b))
          diffs.push(
            `${describeQuery(query)} (repeat ${r}):\n  off ${body(a)}\n      ${describeReply(a)}\n` +
              `  on  ${body(b)}\n      ${describeReply(b)}`,
          );
      }
    }
    assert.deepEqual(diffs, [], `replies differ:\n${diffs.join('\n')}`);
    // The mix means what it says (a wrong fixture would make every check above trivially equal).
    const first = (i: number) => decodeMessage(off[i]![0]!);
    assert.equal(first(4).questions[0]!.name, 'WeB.ExAmPlE.oRg.');
    assert.equal(first(29).tc, true, 'the wide answer without EDNS is truncated');
    assert.equal(first(31).tc, false);
    assert.equal(first(23).rcode, 3, 'NXDOMAIN');
    assert.equal(first(20).authorities[0]?.type, QType.SOA, 'NODATA carries the SOA');
    assert.equal(first(10).answers[0]?.type, QType.A);
    await assertTableUsed(pair, QUERIES.length);
  });

  // The client matches replies by ID: a reply with another asker's ID would time out.
  test('each reply carries the asker’s ID and spelling, whichever spelling came first', async () => {
    for (const m of pair.both)
      for (const spelling of ['web.shop.svc.cluster.local', 'WEB.SHOP.svc.cluster.local', 'Web.Shop.Svc.Cluster.Local'])
        for (let i = 0; i < 4; i++) {
          const raw = await client.ask(m.port, q(spelling, QType.A));
          const reply = decodeMessage(raw);
          assert.equal(reply.questions[0]!.name, spelling + '.', `${m.name}: ${describeReply(raw)}`);
          assert.equal(reply.answers[0]!.name, spelling + '.', `${m.name}: ${describeReply(raw)}`);
        }
  });
});
