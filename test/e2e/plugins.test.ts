// The first plugins, each through the real binary: hosts, whoami, log, errors, ready, loadbalance, bind.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startServer, type RunningServer } from '../helpers/server.js';
import { dig, query } from '../helpers/dns.js';
import { freePort } from '../helpers/ports.js';
import { QType, Rcode } from '../../src/dns/constants.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('hosts', () => {
  let s: RunningServer;
  before(async () => {
    s = await startServer({
      corefile: `
example.org:PORT 10.0.0.0/8:PORT {
    bind 127.0.0.1
    hosts example.hosts {
        10.0.0.1 inline.example.org
        ttl 60
        reload 300ms
    }
}
fall.test:PORT {
    bind 127.0.0.1
    hosts {
        10.0.0.2 a.fall.test
        fallthrough
    }
    whoami
}
norev.test:PORT {
    bind 127.0.0.1
    hosts {
        10.0.0.3 a.norev.test
        no_reverse
    }
}
`,
      files: {
        'example.hosts':
          '# comment\n10.0.0.10 file.example.org alias.example.org\nfd00::10 file.example.org\nnot-an-ip bad.example.org\n',
      },
    });
  });
  after(async () => {
    await s.stop();
  });

  test('inline and file entries answer A and AAAA with the configured TTL and AA set', async () => {
    const a = await dig(s.port, ['inline.example.org', 'A']);
    assert.deepEqual(a.answer, ['inline.example.org. 60 IN A 10.0.0.1']);
    assert.ok(a.flags.includes('aa'));
    const f = await dig(s.port, ['file.example.org', 'AAAA']);
    assert.deepEqual(f.answer, ['file.example.org. 60 IN AAAA fd00::10']);
  });

  test('PTR records are served for every name of an address', async () => {
    const p = await dig(s.port, ['-x', '10.0.0.10']);
    assert.deepEqual(p.answer.sort(), [
      '10.0.0.10.in-addr.arpa. 60 IN PTR alias.example.org.',
      '10.0.0.10.in-addr.arpa. 60 IN PTR file.example.org.',
    ]);
  });

  test('no_reverse leaves PTR out', async () => {
    const r = await query(s.port, '3.0.0.10.in-addr.arpa.', QType.PTR);
    // No block serves in-addr.arpa here, so the query is refused rather than answered.
    assert.equal(r.answers.length, 0);
  });

  test('a name with other records gets NODATA; an unknown one SERVFAIL as in CoreDNS', async () => {
    const nodata = await query(s.port, 'inline.example.org.', QType.AAAA);
    assert.equal(nodata.rcode, Rcode.NOERROR);
    assert.equal(nodata.answers.length, 0);
    const unknown = await query(s.port, 'nope.example.org.', QType.A);
    assert.equal(unknown.rcode, Rcode.SERVFAIL);
  });

  test('fallthrough hands unknown names to the next plugin', async () => {
    const r = await query(s.port, 'other.fall.test.', QType.A);
    assert.deepEqual(r.additionals.find((x) => x.type === QType.A)?.data, { address: '127.0.0.1' }); // whoami
    const known = await query(s.port, 'a.fall.test.', QType.A);
    assert.deepEqual(known.answers[0]?.data, { address: '10.0.0.2' });
  });

  test('a bad line in the hosts file is skipped with a warning naming the file and line', async () => {
    await s.waitFor(/example\.hosts:4: the first field is not an IP address; line skipped/, 3000);
  });

  test(
    'the hosts file is re-read when it changes, and a deleted file serves inline entries only',
    { timeout: 15000 },
    async () => {
      const file = join(s.dir, 'example.hosts');
      writeFileSync(file, '10.0.0.99 new.example.org\n');
      let r;
      for (let i = 0; i < 30; i++) {
        r = await query(s.port, 'new.example.org.', QType.A);
        if (r.answers.length) break;
        await sleep(100);
      }
      assert.deepEqual(r?.answers[0]?.data, { address: '10.0.0.99' });
      rmSync(file);
      for (let i = 0; i < 30; i++) {
        r = await query(s.port, 'new.example.org.', QType.A);
        if (r.rcode === Rcode.SERVFAIL) break;
        await sleep(100);
      }
      assert.equal(r?.rcode, Rcode.SERVFAIL);
      assert.equal((await query(s.port, 'inline.example.org.', QType.A)).answers.length, 1);
      writeFileSync(file, '10.0.0.100 back.example.org\n');
      for (let i = 0; i < 30; i++) {
        r = await query(s.port, 'back.example.org.', QType.A);
        if (r.answers.length) break;
        await sleep(100);
      }
      assert.deepEqual(r?.answers[0]?.data, { address: '10.0.0.100' });
    },
  );
});

describe('whoami, log, loadbalance, bind, ready', () => {
  test('whoami answers with the client address and port in the additional section', async () => {
    const s = await startServer({ corefile: `.:PORT {\n bind 127.0.0.1\n whoami\n}\n` });
    try {
      const r = await dig(s.port, ['+tcp', 'example.org']);
      assert.equal(r.answer.length, 0);
      assert.ok(r.additional.includes('example.org. 0 IN A 127.0.0.1'), r.raw);
      assert.ok(
        r.additional.some((l) => /^_tcp\.example\.org\. 0 IN SRV 0 0 \d+ \.$/.test(l)),
        r.raw,
      );
    } finally {
      await s.stop();
    }
  });

  test('log writes CoreDNS common-format lines, filtered by class', async () => {
    const s = await startServer({
      corefile: `.:PORT {\n bind 127.0.0.1\n log . {\n class denial error\n }\n hosts {\n 10.0.0.1 ok.test\n }\n}\n`,
    });
    try {
      await query(s.port, 'ok.test.', QType.A, { id: 4242 });
      await query(s.port, 'ok.test.', QType.AAAA, { id: 4343, edns: 1232 });
      await sleep(200);
      const out = s.output();
      assert.ok(!out.includes(' - 4242 '), 'a success was logged despite class denial error');
      assert.match(
        out,
        /\[INFO\] 127\.0\.0\.1:\d+ - 4343 "AAAA IN ok\.test\. udp \d+ false 1232" NOERROR qr,aa,rd \d+ \d+\.\d+s/,
      );
    } finally {
      await s.stop();
    }
  });

  test('loadbalance shuffles the order of address records', async () => {
    const lines = Array.from({ length: 6 }, (_, i) => `10.0.0.${i + 1} many.test`).join('\n');
    const s = await startServer({
      corefile: `.:PORT {\n bind 127.0.0.1\n loadbalance\n hosts many.hosts\n}\n`,
      files: { 'many.hosts': lines },
    });
    try {
      const orders = new Set<string>();
      for (let i = 0; i < 20; i++) {
        const r = await query(s.port, 'many.test.', QType.A);
        assert.equal(r.answers.length, 6);
        orders.add(r.answers.map((a) => (a.data as { address: string }).address).join(','));
      }
      assert.ok(orders.size > 3, `only ${orders.size} different orders in 20 answers`);
    } finally {
      await s.stop();
    }
  });

  test('bind listens only on the given address', async () => {
    const s = await startServer({
      corefile: `.:PORT {\n bind 127.0.0.2\n whoami\n}\n`,
      probe: undefined,
      noWait: true,
    });
    try {
      await s.waitFor(/clusterdns-/);
      const on2 = await dig(s.port, ['example.org'], '127.0.0.2');
      assert.equal(on2.status, 'NOERROR');
      await assert.rejects(query(s.port, 'example.org.', QType.A, { timeoutMs: 500 }), /timeout/);
    } finally {
      await s.stop();
    }
  });

  test('ready and health answer on their own addresses', async () => {
    const rp = await freePort();
    const hp = await freePort();
    const s = await startServer({
      corefile: `.:PORT {\n bind 127.0.0.1\n ready 127.0.0.1:${rp}\n health 127.0.0.1:${hp}\n whoami\n}\n`,
    });
    try {
      const r = await fetch(`http://127.0.0.1:${rp}/ready`);
      assert.equal(r.status, 200);
      assert.equal(await r.text(), 'OK');
      const h = await fetch(`http://127.0.0.1:${hp}/health`);
      assert.equal(await h.text(), 'OK');
      assert.equal((await fetch(`http://127.0.0.1:${hp}/nothing`)).status, 404);
    } finally {
      await s.stop();
    }
  });
});
