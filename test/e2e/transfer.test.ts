// Zone transfers through the real binary: `dig AXFR` of a file zone and of the cluster zone, in
// several messages, refused to clients not listed, and a real secondary (Debian's Knot DNS)
// pulling the zone and re-pulling it after our NOTIFY.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { startServer, type RunningServer } from '../helpers/server.js';
import { dig, query } from '../helpers/dns.js';
import { QType, Rcode } from '../../src/dns/constants.js';
import { freePort } from '../helpers/ports.js';

const execFileP = promisify(execFile);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const zone = (serial: number, www: string, extra = '') => `$ORIGIN example.org.
$TTL 300
@ IN SOA ns1 hostmaster ${serial} 7200 3600 1209600 300
@ IN NS ns1
ns1 IN A 10.0.0.53
www IN A ${www}
mail IN MX 10 www
${extra}`;

/** `dig AXFR`'s records (comments and blank lines dropped, white space squeezed). */
async function axfr(port: number, name: string, from = '127.0.0.1'): Promise<{ records: string[]; raw: string }> {
  const { stdout } = await execFileP(
    'dig',
    ['@127.0.0.1', '-p', String(port), '-b', from, '+tries=1', '+time=3', 'AXFR', name],
    { timeout: 15000 },
  );
  const records = stdout
    .split('\n')
    .filter((l) => l.trim() !== '' && !l.startsWith(';'))
    .map((l) => l.replace(/\s+/g, ' ').trim());
  return { records, raw: stdout };
}

describe('transfer', () => {
  let s: RunningServer;
  let secondaryPort: number;
  let knot: ChildProcess | null = null;
  let knotLog = '';
  const big = Array.from({ length: 3000 }, (_, i) => `host${i} IN A 10.1.${i >> 8}.${i & 255}`).join('\n');

  before(async () => {
    secondaryPort = await freePort();
    s = await startServer({
      corefile: `
example.org:PORT {
    bind 127.0.0.1
    file example.org.db {
        reload 200ms
    }
    transfer {
        to 127.0.0.1:${secondaryPort}
    }
}
big.test:PORT {
    bind 127.0.0.1
    file big.db
    transfer {
        to *
    }
}
cluster.local:PORT {
    bind 127.0.0.1
    kubernetes cluster.local {
        manifests cluster.yaml
    }
    transfer {
        to 127.0.0.1
    }
}
closed.test:PORT {
    bind 127.0.0.1
    file closed.db
    transfer {
        to 192.0.2.1
    }
}
`,
      files: {
        'example.org.db': zone(1, '10.0.0.80'),
        'big.db': `$ORIGIN big.test.\n$TTL 60\n@ SOA ns hostmaster 7 1 1 1 1\n@ NS ns\nns A 10.0.0.1\n${big}\n`,
        'closed.db': '$ORIGIN closed.test.\n$TTL 60\n@ SOA ns hostmaster 1 1 1 1 1\nwww A 10.0.0.1\n',
        'cluster.yaml': readFileSync(resolve('examples/demo/cluster.yaml'), 'utf8'),
      },
      probe: 'www.example.org',
    });
  });
  after(async () => {
    knot?.kill('SIGTERM');
    await s.stop();
  });

  test('dig AXFR of a file zone: SOA first and last, every record between', async () => {
    const r = await axfr(s.port, 'example.org');
    assert.equal(
      r.records[0],
      'example.org. 300 IN SOA ns1.example.org. hostmaster.example.org. 1 7200 3600 1209600 300',
    );
    assert.equal(r.records.at(-1), r.records[0]);
    assert.deepEqual(r.records.slice(1, -1).sort(), [
      'example.org. 300 IN NS ns1.example.org.',
      'mail.example.org. 300 IN MX 10 www.example.org.',
      'ns1.example.org. 300 IN A 10.0.0.53',
      'www.example.org. 300 IN A 10.0.0.80',
    ]);
  });

  test('a big zone goes out in several messages, every record once', async () => {
    const r = await axfr(s.port, 'big.test');
    const m = /XFR size: (\d+) records \(messages (\d+),/.exec(r.raw);
    assert.ok(m, r.raw.slice(-300));
    assert.equal(Number(m[1]), 3000 + 4);
    assert.ok(Number(m[2]) >= 6, `messages: ${m[2]}`);
    assert.equal(new Set(r.records).size, 3000 + 3);
  });

  test('a client not listed in `to` is refused; AXFR over UDP is refused', async () => {
    const r = await axfr(s.port, 'closed.test');
    assert.match(r.raw, /Transfer failed/);
    const udp = await query(s.port, 'example.org', QType.AXFR);
    assert.equal(udp.rcode, Rcode.REFUSED);
  });

  test('dig AXFR of the cluster zone: Services, their SRV, headless endpoints, ExternalName', async () => {
    const r = await axfr(s.port, 'cluster.local');
    assert.match(
      r.records[0]!,
      /^cluster\.local\. 5 IN SOA ns\.dns\.cluster\.local\. hostmaster\.cluster\.local\. \d+ 7200 1800 86400 5$/,
    );
    for (const want of [
      'backend.default.svc.cluster.local. 5 IN A 10.96.120.15',
      'backend.default.svc.cluster.local. 5 IN AAAA fd00:10:96::f',
      '_http._tcp.backend.default.svc.cluster.local. 5 IN SRV 0 100 8080 backend.default.svc.cluster.local.',
      'mysql-0.mysql.default.svc.cluster.local. 5 IN A 10.244.1.10',
      'external.default.svc.cluster.local. 5 IN CNAME example.com.',
    ]) {
      assert.ok(r.records.includes(want), `${want} missing from:\n${r.records.join('\n')}`);
    }
  });

  test('a real secondary (Knot DNS) pulls the zone, and pulls it again after our NOTIFY', async () => {
    const dir = join(s.dir, 'knot');
    mkdirSync(join(dir, 'zones'), { recursive: true });
    writeFileSync(
      join(dir, 'knot.conf'),
      `server:\n    listen: 127.0.0.1@${secondaryPort}\n    rundir: ${dir}\n    user: root:root\n` +
        `database:\n    storage: ${dir}/db\n` +
        `log:\n  - target: stdout\n    any: info\n` +
        `remote:\n  - id: primary\n    address: 127.0.0.1@${s.port}\n` +
        `acl:\n  - id: from_primary\n    address: 127.0.0.1\n    action: notify\n` +
        `template:\n  - id: default\n    storage: ${dir}/zones\n` +
        `zone:\n  - domain: example.org\n    master: primary\n    acl: from_primary\n`,
    );
    knot = spawn('knotd', ['-c', join(dir, 'knot.conf')], { stdio: ['ignore', 'pipe', 'pipe'] });
    knot.stdout!.on('data', (d: Buffer) => (knotLog += d.toString()));
    knot.stderr!.on('data', (d: Buffer) => (knotLog += d.toString()));
    const waitAnswer = async (want: string) => {
      for (let i = 0; i < 60; i++) {
        const r = await dig(secondaryPort, ['www.example.org', 'A']).catch(() => null);
        if (r?.answer[0] === want) return;
        await sleep(250);
      }
      assert.fail(`the secondary never answered ${want}; its log:\n${knotLog}`);
    };
    await waitAnswer('www.example.org. 300 IN A 10.0.0.80');
    writeFileSync(join(s.dir, 'example.org.db'), zone(2, '10.0.0.81'));
    await s.waitFor(`Sent notify for zone "example.org." to "127.0.0.1:${secondaryPort}"`, 8000);
    await waitAnswer('www.example.org. 300 IN A 10.0.0.81');
    assert.match(knotLog, /serial 1 -> 2/);
  });
});
