// The bufsize plugin and the default cap on UDP answers, through the real binary: a query
// advertising 65,535 octets never draws more than 1232 (or bufsize's size) over UDP.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, type RunningServer } from '../helpers/server.js';
import { buildQuery, sendTcp, sendUdp } from '../helpers/dns.js';
import { QType } from '../../src/dns/constants.js';
import { decodeMessage } from '../../src/dns/message.js';
import { answerAll, FakeUpstream } from '../forward/upstreams.js';

/** A hosts block answering `name` with 300 addresses (about 5 KB). */
function many(name: string): string {
  return Array.from({ length: 300 }, (_, i) => `        10.1.${i >> 8}.${i & 255} ${name}`).join('\n');
}

let s: RunningServer;
let upstream: FakeUpstream;

before(async () => {
  upstream = await FakeUpstream.start({ behaviour: answerAll });
  s = await startServer({
    corefile: `capped.test:PORT {
    bind 127.0.0.1
    hosts {
${many('big-service.default.svc.capped.test')}
    }
}
wide.test:PORT {
    bind 127.0.0.1
    bufsize 4096
    hosts {
${many('big.wide.test')}
    }
}
plain.test:PORT {
    bind 127.0.0.1
    bufsize
    hosts {
${many('big.plain.test')}
    }
}
fwd.test:PORT {
    bind 127.0.0.1
    bufsize 512
    forward . 127.0.0.1:${upstream.port}
}
`,
  });
});

after(async () => {
  await s?.stop();
  await upstream?.close();
});

async function udp(
  name: string,
  edns: number,
): Promise<{ size: number; ratio: number; m: ReturnType<typeof decodeMessage> }> {
  const q = buildQuery(name, QType.A, { edns });
  const raw = await sendUdp(s.port, q);
  return { size: raw.length, ratio: raw.length / q.length, m: decodeMessage(raw) };
}

describe('UDP answer size', () => {
  test('without bufsize, EDNS 65535 draws at most 1232 octets over UDP (amplification at most 25x); TCP has them all', async () => {
    const r = await udp('big-service.default.svc.capped.test.', 65535);
    assert.ok(r.size <= 1232 && r.size > 1100, `${r.size} octets`);
    assert.ok(r.ratio <= 25, `amplification ${r.ratio.toFixed(1)}x`);
    assert.equal(r.m.tc, true);
    const [tcp] = await sendTcp(s.port, [buildQuery('big-service.default.svc.capped.test.', QType.A, { edns: 65535 })]);
    assert.equal(decodeMessage(tcp!).answers.length, 300);
  });

  test('a client asking for less than the cap gets at most what it asked for', async () => {
    const r = await udp('big-service.default.svc.capped.test.', 700);
    assert.ok(r.size <= 700 && r.size > 600, `${r.size} octets`);
  });

  test('bufsize 4096 raises the cap to 4096 and lowers the advertised size to it', async () => {
    const r = await udp('big.wide.test.', 65535);
    assert.ok(r.size <= 4096 && r.size > 3900, `${r.size} octets`);
    assert.equal(r.m.tc, true);
    assert.equal(r.m.edns?.udpSize, 4096, 'the OPT echoes the lowered size, as CoreDNS');
  });

  test('bufsize without an argument is 1232', async () => {
    const r = await udp('big.plain.test.', 65535);
    assert.ok(r.size <= 1232 && r.size > 1100, `${r.size} octets`);
    assert.equal(r.m.edns?.udpSize, 1232);
    const small = await udp('big.plain.test.', 800);
    assert.equal(small.m.edns?.udpSize, 800, 'a smaller size is never raised');
  });

  test('bufsize 512: forward passes the lowered size upstream', async () => {
    upstream.reset();
    await udp('x.fwd.test.', 4096);
    const seen = upstream.queries.find((q) => q.msg.questions[0]?.name === 'x.fwd.test.');
    assert.ok(seen, 'the upstream got the query');
    assert.equal(seen.msg.edns?.udpSize, 512);
  });
});

describe('bufsize configuration errors', () => {
  for (const [arg, message] of [
    ['100', /Corefile:2 - Error during parsing: bufsize: 100 is out of range \[512, 4096\]/],
    ['1232 1232', /Corefile:2 - Error during parsing: bufsize: takes one argument/],
  ] as const) {
    test(`bufsize ${arg} stops startup with FILE:LINE - Error during parsing`, async () => {
      const bad = await startServer({ corefile: `.:PORT {\n    bufsize ${arg}\n    whoami\n}\n`, noWait: true });
      const code = await new Promise<number | null>((r) => bad.proc.on('exit', (c) => r(c)));
      assert.equal(code, 1);
      assert.match(bad.output(), message);
    });
  }
});
