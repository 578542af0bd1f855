// CoreDNS's timing with the defaults: 2 s per try, 5 s for the whole query. This file
// takes about 5 s by design (it runs beside the others).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { QType, Rcode } from '../../src/dns/constants.js';
import { forwardChain } from './harness.js';
import { FakeUpstream } from './upstreams.js';

describe('forward deadlines', () => {
  let up: FakeUpstream;
  before(async () => {
    up = await FakeUpstream.start({ behaviour: () => {} });
  });
  after(() => up.close());

  it('tries a silent upstream every 2 s and gives up with SERVFAIL after 5 s', async () => {
    const h = forwardChain(`forward . 127.0.0.1:${up.port} {\n max_fails 0\n}`);
    try {
      const t0 = Date.now();
      const r = await h.ask('slow.example.org.', QType.A);
      assert.equal(r.msg.rcode, Rcode.SERVFAIL);
      assert.ok(r.ms >= 4950 && r.ms < 5600, `answered after ${r.ms} ms`);
      const at = up.queries.map((q) => q.at - t0);
      assert.equal(at.length, 3, `tries at ${at.join(', ')} ms`);
      assert.ok(at[1]! >= 1950 && at[1]! < 2500, `second try at ${at[1]} ms`);
      assert.ok(at[2]! >= 3950 && at[2]! < 4700, `third try at ${at[2]} ms`);
      assert.match(r.res.error ?? '', /i\/o timeout/);
    } finally {
      h.stop();
    }
  });
});
