// The native answer table answers a repeated question with the very bytes the JS path gave the
// first time: the real binary twice (CLUSTERDNS_FAST_ANSWERS=0 and the default), a test API
// server, a hosts file, each query of a mix asked several times in a row, every reply compared
// byte for byte but for the ID (which must be the asker's own).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { QType } from '../../src/dns/constants.js';
import { decodeMessage, type SoaData } from '../../src/dns/message.js';
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
  `    kubernetes cluster.local in-addr.arpa ip6.arpa {\n        endpoint ${api}\n        ttl 30\n    }\n}\n` +
  `tmpl.test:PORT {\n    bind 127.0.0.1\n    prometheus 127.0.0.1:METRICS\n    template IN A tmpl.test {\n` +
  `        match "^ip-(?P<a>[0-9]*)-(?P<b>[0-9]*)[.]tmpl[.]test[.]$"\n` +
  `        answer "{{ .Name }} 60 IN A 192.0.{{ .Group.a }}.{{ .Group.b }}"\n    }\n}\n` +
  `example.com:PORT {\n    bind 127.0.0.1\n    prometheus 127.0.0.1:METRICS\n` +
  `    rewrite name regex (.*)\\.example\\.com {1}.svc.cluster.local answer auto\n` +
  `    kubernetes cluster.local {\n        endpoint ${api}\n        ttl 30\n    }\n}\n`;

/** The reply with each SOA record's serial zeroed. */
function withoutSerial(b: Buffer): Buffer {
  const c = Buffer.from(b);
  const m = decodeMessage(b);
  for (const rr of [...m.answers, ...m.authorities]) {
    if (rr.type !== QType.SOA) continue;
    const d = rr.data as SoaData;
    const tail = Buffer.alloc(20);
    [d.serial, d.refresh, d.retry, d.expire, d.minimum].forEach((v, k) => tail.writeUInt32BE(v, 4 * k));
    const at = c.indexOf(tail, 12);
    if (at > 0) c.fill(0, at, at + 4);
  }
  return c;
}

/** `b` changed by `f` (a copy). */
function tweak(b: Buffer, f: (c: Buffer) => void): Buffer {
  const c = Buffer.from(b);
  f(c);
  return c;
}

/** An EDNS query carrying one option nobody knows (code 65001, 4 bytes). */
function withUnknownOption(name: string): Buffer {
  const b = q(name, QType.A, { edns: 1232 });
  b.writeUInt16BE(8, b.length - 2);
  return Buffer.concat([b, Buffer.from([0xfd, 0xe9, 0, 4, 1, 2, 3, 4])]);
}

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
  // Appended here so the indexes above stay put.
  q('ip-2-7.tmpl.test', QType.A), // template
  q('IP-2-7.Tmpl.Test', QType.A, { edns: 1232 }),
  q('no-match.tmpl.test', QType.A),
  q('web.shop.example.com', QType.A), // rewrite's kept answer
  q('Web.Shop.Example.Com', QType.A, { edns: 1232, do: true }),
  q('nope.shop.example.com', QType.A),
  tweak(q('web.example.org', QType.A), (b) => (b[3]! |= 0x10)), // CD
  tweak(q('web.shop.svc.cluster.local', QType.A, { edns: 1232 }), (b) => (b[3]! |= 0x20)), // AD
  q('web.example.org', QType.A, { qclass: 3 }), // CH
  q('web.shop.svc.cluster.local', QType.A, { qclass: 255 }), // ANY class
  tweak(q('web.example.org', QType.A, { edns: 1232 }), (b) => (b[b.length - 5] = 1)), // EDNS version 1: BADVERS
  withUnknownOption('web.shop.svc.cluster.local'),
  tweak(q('web.example.org', QType.A), (b) => (b[2] = (b[2]! & 0x87) | (2 << 3))), // opcode STATUS
  Buffer.concat([q('web.example.org', QType.A), Buffer.from([0])]), // a stray byte after the question
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
        // Each mode repeats itself exactly; across the two processes only a SOA serial (the second
        // each process saw its data) may differ.
        for (const [mode, x, first] of [
          ['off', a, off[i]![0]!],
          ['on', b, on[i]![0]!],
        ] as const)
          if (body(x) !== body(first))
            diffs.push(
              `${mode} ${describeQuery(query)} repeat ${r} differs from the first:\n  first  ${body(first)}\n` +
                `  repeat ${body(x)}\n      ${describeReply(x)}`,
            );
        if (body(withoutSerial(a)) !== body(withoutSerial(b)))
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
    assert.equal((first(39).answers[0]?.data as { address: string }).address, '192.0.2.7', 'template answered');
    assert.equal(first(42).answers[0]?.name, 'Web.Shop.Example.Com.', 'rewrite answered the asker’s name');
    assert.equal(first(48).edns?.version, 0);
    assert.equal(decodeMessage(off[48]![0]!).rcode, 16, 'EDNS version 1: BADVERS');
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
