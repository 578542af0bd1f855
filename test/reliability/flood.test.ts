// A random-subdomain ("water torture") flood through the real listener, cache and forward,
// in this process so their insides can be inspected afterwards: the cache stays within its
// capacity, single-flight leaves no flight behind, forward never has more than max_concurrent
// queries at the upstream, and a legitimate client is still answered during and after.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import { buildForwards } from '../forward/harness.js';
import { FakeUpstream, answer } from '../forward/upstreams.js';
import { startRig } from '../cache/harness.js';
import { buildQuery, query } from '../helpers/dns.js';
import { QClass, QType, Rcode } from '../../src/dns/constants.js';
import { decodeMessage, encodeMessage } from '../../src/dns/message.js';
import { bareReply } from '../../src/server/reply.js';
import { Response, type Next } from '../../src/server/request.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const MAX_CONCURRENT = 50;
const CAPACITY = 1024;

test(
  'a random-subdomain flood: the cache stays within capacity, no flight is left, the upstream never sees more than max_concurrent, a real client is answered',
  { timeout: 90_000 },
  async () => {
    // The victim zone's server: NXDOMAIN with an SOA (cacheable) after 20 ms, counting how many
    // queries it holds at once; the hot name gets an address.
    let holding = 0;
    let mostHeld = 0;
    const upstream = await FakeUpstream.start({
      behaviour: (q, r) => {
        holding++;
        mostHeld = Math.max(mostHeld, holding);
        setTimeout(() => {
          holding--;
          const name = q.msg.questions[0]!.name.toLowerCase();
          if (name === 'www.victim.example.') return r.send(answer(q, { a: ['192.0.2.80'] }));
          const m = decodeMessage(answer(q, { rcode: Rcode.NXDOMAIN }));
          m.authorities.push({
            name: 'victim.example.',
            type: QType.SOA,
            class: QClass.IN,
            ttl: 60,
            data: {
              mname: 'ns.victim.example.',
              rname: 'h.victim.example.',
              serial: 1,
              refresh: 1,
              retry: 1,
              expire: 1,
              minimum: 60,
            },
          });
          r.send(encodeMessage(m));
        }, 20);
      },
    });
    const [forward] = buildForwards(
      `forward . 127.0.0.1:${upstream.port} {\n max_concurrent ${MAX_CONCURRENT}\n}`,
      '/flood/Corefile',
    );
    const terminal: Next = (req) => Response.wire(bareReply(req, Rcode.SERVFAIL), 'next');
    const rig = await startRig(`cache 30 {\n success ${CAPACITY}\n denial ${CAPACITY}\n}`, (req) =>
      forward!.serveDNS(req, terminal),
    );
    const flights = (rig.handler as unknown as { flights: Map<string, unknown> }).flights;
    const flooder = dgram.createSocket('udp4');
    try {
      await new Promise<void>((r) => flooder.bind(0, '127.0.0.1', () => r()));
      flooder.setRecvBufferSize(4 * 1024 * 1024);
      const rcodes = new Map<number, number>();
      let replies = 0;
      flooder.on('message', (m) => {
        replies++;
        rcodes.set(m[3]! & 0xf, (rcodes.get(m[3]! & 0xf) ?? 0) + 1);
      });
      // 30,000 queries: fresh random names, and every tenth one repeated at once (single flight).
      const total = 30_000;
      const salt = Math.random().toString(36).slice(2, 8);
      // A popular name is in the cache before the flood starts; an uncached one competes with the
      // flood for max_concurrent's slots and may be REFUSED (RELIABILITY.md).
      assert.equal((await query(rig.port, 'www.victim.example.', QType.A)).answers.length, 1);
      let hotWorst = 0;
      let hotAnswered = 0;
      const hot = (async () => {
        // A stub resolver's way: up to three tries of 1 s (the flood may crowd out a datagram).
        for (let i = 0; i < 40; i++) {
          const t0 = performance.now();
          for (let attempt = 0; attempt < 3; attempt++) {
            const m = await query(rig.port, 'www.victim.example.', QType.A, { timeoutMs: 1000 }).catch(() => null);
            if (m?.answers.length === 1) {
              hotAnswered++;
              break;
            }
          }
          hotWorst = Math.max(hotWorst, performance.now() - t0);
          await sleep(50);
        }
      })();
      for (let sent = 0; sent < total;) {
        await new Promise<void>((done) => {
          let left = 500;
          for (let j = 0; j < 500; j++, sent++) {
            const id = sent % 10 === 1 ? sent - 1 : sent;
            flooder.send(
              buildQuery(`r${id.toString(36)}-${salt}.victim.example.`, QType.A),
              rig.port,
              '127.0.0.1',
              () => {
                if (--left === 0) done();
              },
            );
          }
        });
        await sleep(5);
      }
      await hot;
      // Let every trip finish: upstream answers in 20 ms, a lost one times out in 2 s per try.
      for (let i = 0; i < 100 && (flights.size > 0 || forward!.inflight > 0); i++) await sleep(100);
      await sleep(200);

      assert.equal(flights.size, 0, 'every single-flight entry was removed once its trip ended');
      assert.equal(forward!.inflight, 0, "forward's count of queries in flight is back to 0");
      assert.ok(
        mostHeld <= MAX_CONCURRENT,
        `the upstream held ${mostHeld} queries at once; max_concurrent is ${MAX_CONCURRENT}`,
      );
      assert.ok(
        rig.handler.entries('denial') <= CAPACITY,
        `${rig.handler.entries('denial')} denial entries, capacity ${CAPACITY}`,
      );
      assert.ok(rig.handler.entries('success') <= CAPACITY, `${rig.handler.entries('success')} success entries`);
      assert.ok(rig.handler.entries('denial') > CAPACITY / 2, 'the flood did fill the denial cache');
      assert.ok(
        (rcodes.get(Rcode.REFUSED) ?? 0) > 0,
        `max_concurrent refused some of the flood: ${JSON.stringify([...rcodes])}`,
      );
      // UDP under a flood drops what the socket buffers cannot hold; that is the kernel's choice, not a failure.
      assert.ok(replies > total * 0.2, `${replies} replies to ${total} flood queries`);
      // UDP under a flood on a loaded 2-core machine: a stub may lose all three tries of one lookup now and then.
      assert.ok(hotAnswered >= 36, `the real client got ${hotAnswered} of 40 answers during the flood`);
      // After the flood: the hot name comes from the cache at once.
      const t0 = performance.now();
      const after = await query(rig.port, 'www.victim.example.', QType.A);
      assert.deepEqual(after.answers[0]?.data, { address: '192.0.2.80' });
      assert.ok(performance.now() - t0 < 100);
      assert.ok(hotWorst < 2500, `the real client waited up to ${hotWorst.toFixed(0)} ms during the flood`);
    } finally {
      flooder.close();
      await rig.close();
      forward!.stop();
      await upstream.close();
    }
  },
);
