// Forward over UDP on the native addon: the queries one turn of the event loop sends to an
// upstream leave in one sendmmsg per socket (not a send each), and every answer still finds its query.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { QType, Rcode } from '../../src/dns/constants.js';
import { udpBatchAddon } from '../../src/server/udp-native.js';
import { nativeSendStats } from '../../src/upstream/udp.js';
import { FakeUpstream } from './upstreams.js';
import { forwardChain } from './harness.js';

const noAddon = udpBatchAddon().addon === null ? `no native addon (${udpBatchAddon().why})` : false;

describe('forward over UDP on the native addon', { skip: noAddon }, () => {
  let up: FakeUpstream;
  before(async () => {
    up = await FakeUpstream.start();
  });
  after(() => up.close());

  it('40 queries asked at once leave in at most one sendmmsg per upstream socket, each answer matched to its query', async () => {
    const h = forwardChain(`forward . 127.0.0.1:${up.port}`);
    try {
      const calls = nativeSendStats.calls;
      const sent = nativeSendStats.datagrams;
      const done = await Promise.all(
        Array.from({ length: 40 }, (_, i) => h.ask(`Q${i}.Example.ORG.`, i % 2 ? QType.A : QType.AAAA)),
      );
      for (const [i, r] of done.entries()) {
        assert.equal(r.msg.rcode, Rcode.NOERROR);
        assert.equal(r.msg.id, r.raw.readUInt16BE(0), 'the client ID put back');
        assert.equal(r.msg.questions[0]!.name.toLowerCase(), `q${i}.example.org.`);
        assert.deepEqual(
          r.msg.answers.map((a) => (a.data as { address: string }).address),
          i % 2 ? ['192.0.2.1'] : [],
        );
      }
      assert.equal(nativeSendStats.datagrams - sent, 40);
      // 4 sockets per upstream: one call each (node:dgram made 40 sends).
      assert.ok(nativeSendStats.calls - calls <= 4, `${nativeSendStats.calls - calls} sendmmsg calls for 40 queries`);
      const ports = new Set(up.received.map((q) => q.port));
      assert.ok(ports.size >= 1 && ports.size <= 4, `${ports.size} source ports`);
    } finally {
      h.stop();
    }
  });
});
