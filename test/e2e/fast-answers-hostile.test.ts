// A client that never repeats itself cannot make the native answer table grow without bound:
// 24 000 queries for distinct random long names (each one a table candidate: a kubernetes
// NXDOMAIN) against the real binary with CLUSTERDNS_FAST_ANSWERS=0 and by default; afterwards
// both still answer right and the default's resident memory grew no more than a bound over the
// table-off run's.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { QType } from '../../src/dns/constants.js';
import { decodeMessage } from '../../src/dns/message.js';
import { KubeApiServer } from '../helpers/kubeapi.js';
import { namespace, service } from '../kubernetes/fixtures.js';
import {
  assertTableUsed,
  body,
  Client,
  describeReply,
  q,
  rssKb,
  sleep,
  startPair,
  type Mode,
  type Pair,
} from './fast-answers-harness.js';

const ROUNDS = 3;
const PER_ROUND = 8_000;
const WINDOW = 128;
// Names of ~250 letters (the most a name holds): ~270-byte queries and ~340-byte NXDOMAIN replies,
// ~600 bytes a table entry.
const label = (n: number) => randomBytes(n).toString('base64url').slice(0, n).replace(/[-_]/g, 'x');
const randomName = () => `${label(60)}.${label(60)}.${label(60)}.${label(40)}.shop.svc.cluster.local`;

/** `n` distinct random questions, WINDOW in flight at a time; UDP may drop one under load: asked again. */
async function flood(m: Mode, client: Client, n: number): Promise<{ nx: number; retries: number }> {
  let next = 0;
  let nx = 0;
  let retries = 0;
  await Promise.all(
    Array.from({ length: WINDOW }, async () => {
      while (next < n) {
        next++;
        const query = q(randomName(), QType.A);
        for (let attempt = 0; ; attempt++) {
          try {
            if (((await client.ask(m.port, query, 1000))[3]! & 0x0f) === 3) nx++;
            break;
          } catch (e) {
            if (attempt === 4) throw e;
            retries++;
          }
        }
      }
    }),
  );
  return { nx, retries };
}

describe('fast answers: distinct random names keep memory bounded', { timeout: 120_000 }, () => {
  let api: KubeApiServer;
  let pair: Pair;
  const clients = new Map<string, Client>();

  before(async () => {
    api = await KubeApiServer.create();
    api.apply(namespace('shop'));
    api.apply(service('shop', 'web', ['10.96.9.1'], [['http', 'TCP', 80]]));
    pair = await startPair(
      `.:PORT {\n    bind 127.0.0.1\n    prometheus 127.0.0.1:METRICS\n` +
        `    kubernetes cluster.local {\n        endpoint ${api.url}\n        ttl 30\n    }\n}\n`,
      { probe: 'web.shop.svc.cluster.local' },
    );
    for (const m of pair.both) clients.set(m.name, await Client.open());
  });

  after(async () => {
    for (const c of clients.values()) c.close();
    await pair?.stop();
    await api?.close();
  });

  test(`${ROUNDS} x ${PER_ROUND} random names: every one NXDOMAIN, then right answers, RSS within bounds`, async () => {
    const known = [q('web.shop.svc.cluster.local', QType.A), q('Web.Shop.svc.cluster.local', QType.A, { edns: 1232 })];
    const ask = async (m: Mode) => {
      const c = clients.get(m.name)!;
      const out: Buffer[] = [];
      for (const k of known) for (let i = 0; i < 3; i++) out.push(await c.ask(m.port, k));
      return out;
    };
    const before = await Promise.all(pair.both.map(ask));
    // Settle the heap and the code first, so the baseline is not start-up's.
    await Promise.all(pair.both.map((m) => flood(m, clients.get(m.name)!, 2000)));
    const rss = pair.both.map((m) => [rssKb(m.s.proc.pid!)]);
    for (let r = 0; r < ROUNDS; r++) {
      const res = await Promise.all(pair.both.map((m) => flood(m, clients.get(m.name)!, PER_ROUND)));
      assert.deepEqual(
        res.map((x) => x.nx),
        [PER_ROUND, PER_ROUND],
        'every random name is NXDOMAIN',
      );
      // A few drops under load are UDP's; many would be the server falling behind.
      for (const [i, x] of res.entries())
        assert.ok(x.retries < PER_ROUND / 100, `${pair.both[i]!.name}: ${x.retries} retries`);
      if (process.env.FASTTEST_DEBUG) console.log(`retries ${res.map((x) => x.retries).join(' ')}`);
      pair.both.forEach((m, i) => rss[i]!.push(rssKb(m.s.proc.pid!)));
      // Random names only replace entries (4-way sets): the table stays bounded whatever their lifetime.
      await sleep(100);
    }
    // A heap that gave memory back makes a negative growth: the bound is over zero then.
    const growth = rss.map((series) => Math.max(0, series.at(-1)! - series[0]!) / 1024);
    const late = rss.map((series) => Math.max(0, series.at(-1)! - series[1]!) / 1024);
    const msg = `RSS kB by round, off ${rss[0]!.join(' ')} on ${rss[1]!.join(' ')}`;
    if (process.env.FASTTEST_DEBUG) console.log(msg);
    // A table keeps each question's bytes with its answer: ~610 bytes an entry here, so 24 000 kept
    // forever would be ~15 MB. 10 MB over the table-off run's growth leaves room for a whole round
    // kept at once (~5 MB) and two V8 heaps growing differently (the off run grew 2-3 MB), and
    // catches that.
    assert.ok(
      growth[1]! <= growth[0]! + 10,
      `the table's run grew ${growth[1]!.toFixed(1)} MB, off ${growth[0]!.toFixed(1)} MB; ${msg}`,
    );
    // After the first round a bounded table reuses its memory: rounds 2 and 3 (~10 MB if kept) add
    // at most 6 MB over the table-off run's.
    assert.ok(
      late[1]! <= late[0]! + 6,
      `rounds 2-${ROUNDS} grew ${late[1]!.toFixed(1)} MB, off ${late[0]!.toFixed(1)} MB; ${msg}`,
    );
    // Still answers right, and alike.
    const afterward = await Promise.all(pair.both.map(ask));
    for (const [i, replies] of afterward.entries())
      for (const [j, reply] of replies.entries()) {
        assert.equal(
          body(reply),
          body(before[i]![j]!),
          `${pair.both[i]!.name} after the flood: ${describeReply(reply)}`,
        );
        assert.equal(body(reply), body(afterward[0]![j]!), `on differs from off: ${describeReply(reply)}`);
      }
    assert.equal((decodeMessage(afterward[1]![0]!).answers[0]?.data as { address: string }).address, '10.96.9.1');
    // Nothing repeated but the known questions: the table answered a few of those at most.
    await assertTableUsed(pair, 1);
  });
});
