// Several forward lines in one block, `next`, `failover`, FROM/except, and policies.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { QType, Rcode } from '../../src/dns/constants.js';
import { forwardChain } from './harness.js';
import { answer, FakeUpstream, type Behaviour } from './upstreams.js';

const nx: Behaviour = (q, r) => r.send(answer(q, { rcode: Rcode.NXDOMAIN }));
const servfail: Behaviour = (q, r) => r.send(answer(q, { rcode: Rcode.SERVFAIL }));
const nodata: Behaviour = (q, r) => r.send(answer(q));
const ip =
  (addr: string): Behaviour =>
  (q, r) =>
    r.send(answer(q, { a: [addr] }));

function firstIp(m: { answers: Array<{ data: unknown }> }): string | undefined {
  return (m.answers[0]?.data as { address: string } | undefined)?.address;
}

describe('forward lines in a chain', () => {
  const ups: FakeUpstream[] = [];
  before(async () => {
    for (let i = 0; i < 3; i++) ups.push(await FakeUpstream.start());
  });
  after(async () => {
    for (const u of ups) await u.close();
  });

  it('`next NXDOMAIN` hands the query to the following forward line', async () => {
    const [a, b] = ups;
    a!.behaviour = nx;
    b!.behaviour = ip('192.0.2.2');
    const h = forwardChain(`forward . 127.0.0.1:${a!.port} {\n next NXDOMAIN\n}\nforward . 127.0.0.1:${b!.port}`);
    try {
      const r = await h.ask('n.example.org.', QType.A);
      assert.equal(r.msg.rcode, Rcode.NOERROR);
      assert.equal(firstIp(r.msg), '192.0.2.2');
    } finally {
      h.stop();
    }
  });

  it('ignores `next` on the last forward line (the following plugin is not a forward)', async () => {
    const [a] = ups;
    a!.behaviour = nx;
    const h = forwardChain(`forward . 127.0.0.1:${a!.port} {\n next NXDOMAIN\n}`);
    try {
      const r = await h.ask('last.example.org.', QType.A);
      assert.equal(r.msg.rcode, Rcode.NXDOMAIN);
      assert.equal(r.res.plugin, 'forward');
    } finally {
      h.stop();
    }
  });

  it('`next_on_nodata` passes an empty NOERROR answer on', async () => {
    const [a, b] = ups;
    a!.behaviour = nodata;
    b!.behaviour = ip('192.0.2.3');
    const h = forwardChain(`forward . 127.0.0.1:${a!.port} {\n next_on_nodata\n}\nforward . 127.0.0.1:${b!.port}`);
    try {
      assert.equal(firstIp((await h.ask('nd.example.org.', QType.A)).msg), '192.0.2.3');
    } finally {
      h.stop();
    }
  });

  it('`failover SERVFAIL` tries the next upstream, and returns the last reply when every one failed', async () => {
    const [a, b, c] = ups;
    a!.behaviour = servfail;
    b!.behaviour = servfail;
    c!.behaviour = ip('192.0.2.4');
    const h = forwardChain(
      `forward . 127.0.0.1:${a!.port} 127.0.0.1:${b!.port} 127.0.0.1:${c!.port} {\n policy sequential\n failover SERVFAIL\n}`,
    );
    const all = forwardChain(
      `forward . 127.0.0.1:${a!.port} 127.0.0.1:${b!.port} {\n policy sequential\n failover SERVFAIL\n}`,
    );
    try {
      assert.equal(firstIp((await h.ask('fo.example.org.', QType.A)).msg), '192.0.2.4');
      a!.reset();
      b!.reset();
      const r = await all.ask('fo2.example.org.', QType.A);
      assert.equal(r.msg.rcode, Rcode.SERVFAIL);
      assert.ok(r.res.hasWire, "the upstream's own SERVFAIL reply");
      assert.equal(a!.queries.length + b!.queries.length, 2);
    } finally {
      h.stop();
      all.stop();
    }
  });

  it('without failover, an upstream SERVFAIL is the answer (a reply is not a failure)', async () => {
    const [a, b] = ups;
    a!.behaviour = servfail;
    b!.behaviour = ip('192.0.2.5');
    b!.reset();
    const h = forwardChain(`forward . 127.0.0.1:${a!.port} 127.0.0.1:${b!.port} {\n policy sequential\n}`);
    try {
      assert.equal((await h.ask('sf.example.org.', QType.A)).msg.rcode, Rcode.SERVFAIL);
      assert.equal(b!.queries.length, 0);
    } finally {
      h.stop();
    }
  });

  it('passes names outside FROM, and names under `except`, to the next plugin', async () => {
    const [a] = ups;
    a!.behaviour = ip('192.0.2.6');
    a!.reset();
    const h = forwardChain(`forward example.org 127.0.0.1:${a!.port} {\n except private.example.org\n}`);
    try {
      assert.equal((await h.ask('www.example.org.', QType.A)).res.plugin, 'forward');
      assert.equal((await h.ask('www.example.com.', QType.A)).res.plugin, 'next');
      assert.equal((await h.ask('db.private.example.org.', QType.A)).res.plugin, 'next');
      assert.equal(a!.queries.length, 1);
    } finally {
      h.stop();
    }
  });

  it('orders upstreams by policy: sequential always the first, round_robin in turn, random both', async () => {
    const [a, b, c] = ups;
    for (const [u, addr] of [
      [a!, '192.0.2.10'],
      [b!, '192.0.2.11'],
      [c!, '192.0.2.12'],
    ] as const)
      u.behaviour = ip(addr);
    const to = `127.0.0.1:${a!.port} 127.0.0.1:${b!.port} 127.0.0.1:${c!.port}`;
    const seq = forwardChain(`forward . ${to} {\n policy sequential\n}`);
    const rr = forwardChain(`forward . ${to} {\n policy round_robin\n}`);
    const rnd = forwardChain(`forward . ${to}`);
    try {
      const seqSeen = [];
      const rrSeen = [];
      const rndSeen = new Set<string | undefined>();
      for (let i = 0; i < 6; i++) {
        seqSeen.push(firstIp((await seq.ask(`s${i}.example.org.`, QType.A)).msg));
        rrSeen.push(firstIp((await rr.ask(`r${i}.example.org.`, QType.A)).msg));
      }
      for (let i = 0; i < 40; i++) rndSeen.add(firstIp((await rnd.ask(`x${i}.example.org.`, QType.A)).msg));
      assert.deepEqual(seqSeen, Array(6).fill('192.0.2.10'));
      assert.deepEqual(rrSeen, ['192.0.2.10', '192.0.2.11', '192.0.2.12', '192.0.2.10', '192.0.2.11', '192.0.2.12']);
      assert.equal(rndSeen.size, 3);
    } finally {
      seq.stop();
      rr.stop();
      rnd.stop();
    }
  });
});
