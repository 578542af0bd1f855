// The etcd plugin against a real etcd v3 (Debian's etcd-server), started here on loopback ports:
// SkyDNS records, watch-driven updates (no polling) coherent with the cache, credentials and TLS.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServer, type RunningServer } from '../helpers/server.js';
import { dig } from '../helpers/dns.js';
import { freePort } from '../helpers/ports.js';
import { makeTestPki, type TestPki } from '../helpers/kubeapi-pki.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const b64 = (s: string) => Buffer.from(s).toString('base64');
/** A record line without its TTL (a cache hit counts it down). */
const noTtl = (l: string) => l.replace(/ \d+ IN /, ' IN ');

interface Etcd {
  url: string;
  proc: ChildProcess;
  dir: string;
  log(): string;
}

async function startEtcd(tls?: TestPki): Promise<Etcd> {
  const client = await freePort();
  const peer = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'clusterdns-etcd-'));
  const scheme = tls ? 'https' : 'http';
  const url = `${scheme}://127.0.0.1:${client}`;
  const args = [
    '--name',
    'test',
    '--data-dir',
    join(dir, 'data'),
    '--listen-client-urls',
    url,
    '--advertise-client-urls',
    url,
    '--listen-peer-urls',
    `http://127.0.0.1:${peer}`,
    '--initial-advertise-peer-urls',
    `http://127.0.0.1:${peer}`,
    '--initial-cluster',
    `test=http://127.0.0.1:${peer}`,
  ];
  if (tls)
    args.push(
      '--cert-file',
      tls.serverCertFile,
      '--key-file',
      tls.serverKeyFile,
      '--trusted-ca-file',
      tls.caFile,
      '--client-cert-auth',
    );
  const proc = spawn('etcd', args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  proc.stdout.on('data', (d: Buffer) => (out += d.toString()));
  proc.stderr.on('data', (d: Buffer) => (out += d.toString()));
  for (let i = 0; i < 100; i++) {
    if (/ready to serve client requests/.test(out)) return { url, proc, dir, log: () => out };
    if (proc.exitCode !== null) break;
    await sleep(100);
  }
  proc.kill('SIGKILL');
  throw new Error(`etcd did not start:\n${out}`);
}

async function stopEtcd(e: Etcd): Promise<void> {
  e.proc.kill('SIGTERM');
  await new Promise((r) => (e.proc.exitCode !== null ? r(null) : e.proc.on('exit', r)));
  rmSync(e.dir, { recursive: true, force: true });
}

/** etcd's own JSON gateway, to write the records as external-dns or etcdctl would. */
async function etcdCall(e: Etcd, path: string, body: unknown, token?: string): Promise<Record<string, unknown>> {
  const r = await fetch(`${e.url}${path}`, {
    method: 'POST',
    body: JSON.stringify(body),
    headers: token ? { authorization: token } : {},
  });
  const j = (await r.json()) as Record<string, unknown>;
  if (!r.ok) throw new Error(`${path}: ${JSON.stringify(j)}`);
  return j;
}
const put = (e: Etcd, key: string, value: unknown, token?: string) =>
  etcdCall(e, '/v3/kv/put', { key: b64(key), value: b64(JSON.stringify(value)) }, token);
const del = (e: Etcd, key: string) => etcdCall(e, '/v3/kv/deleterange', { key: b64(key) });

async function until(what: string, f: () => Promise<boolean>, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await f()) return;
    await sleep(100);
  }
  assert.fail(`timed out: ${what}`);
}

describe('etcd', () => {
  let etcd: Etcd;
  let s: RunningServer;
  before(async () => {
    etcd = await startEtcd();
    await put(etcd, '/skydns/local/skydns/www/x1', { host: '10.0.0.1', port: 8080, priority: 10, weight: 20 });
    await put(etcd, '/skydns/local/skydns/www/x2', { host: '10.0.0.2', port: 8080, priority: 10, weight: 80 });
    await put(etcd, '/skydns/local/skydns/www/x3', { host: 'fd00::3', port: 8080 });
    await put(etcd, '/skydns/local/skydns/txt', { text: 'hello from etcd', ttl: 60 });
    await put(etcd, '/skydns/local/skydns/alias', { host: 'www.skydns.local' });
    await put(etcd, '/skydns/local/skydns/mail', { host: '10.0.0.25', mail: true, priority: 10 });
    await put(etcd, '/skydns/local/skydns/grp/a', { host: '10.0.1.1', group: 'g1' });
    await put(etcd, '/skydns/local/skydns/grp/b/c', { host: '10.0.1.2', group: 'g2' });
    await put(etcd, '/skydns/local/skydns/grp/d', { host: '10.0.1.3', group: 'g1' });
    await put(etcd, '/skydns/arpa/in-addr/10/0/0/1', { host: 'reverse.skydns.local' });
    await put(etcd, '/skydns/local/skydns/bad', 'not an object');
    s = await startServer({
      corefile: `
skydns.local:PORT 10.0.0.0/24:PORT {
    bind 127.0.0.1
    etcd skydns.local 10.0.0.0/24 {
        path /skydns
        endpoint ${etcd.url}
    }
    cache 300
}
`,
      probe: 'www.skydns.local',
    });
  });
  after(async () => {
    await s?.stop();
    if (etcd) await stopEtcd(etcd);
  });

  test('A, AAAA: every service under the name; TTL 300 unless the service sets one', async () => {
    const a = await dig(s.port, ['www.skydns.local', 'A']);
    assert.equal(a.status, 'NOERROR');
    assert.ok(a.flags.includes('aa'));
    assert.deepEqual(a.answer.sort(), ['www.skydns.local. 300 IN A 10.0.0.1', 'www.skydns.local. 300 IN A 10.0.0.2']);
    assert.deepEqual((await dig(s.port, ['www.skydns.local', 'AAAA'])).answer, [
      'www.skydns.local. 300 IN AAAA fd00::3',
    ]);
    assert.deepEqual((await dig(s.port, ['x1.www.skydns.local', 'A'])).answer, [
      'x1.www.skydns.local. 300 IN A 10.0.0.1',
    ]);
  });

  test('SRV with weights and the key-named targets, addresses in the additional section', async () => {
    const r = await dig(s.port, ['www.skydns.local', 'SRV']);
    assert.ok(r.answer.includes('www.skydns.local. 300 IN SRV 10 20 8080 x1.www.skydns.local.'), r.raw);
    assert.ok(r.answer.includes('www.skydns.local. 300 IN SRV 10 80 8080 x2.www.skydns.local.'), r.raw);
    assert.ok(r.additional.includes('x1.www.skydns.local. 300 IN A 10.0.0.1'), r.raw);
  });

  test('TXT, MX, a host that is a name (CNAME, followed), PTR, groups, wildcards', async () => {
    assert.deepEqual((await dig(s.port, ['txt.skydns.local', 'TXT'])).answer, [
      'txt.skydns.local. 60 IN TXT "hello from etcd"',
    ]);
    assert.deepEqual((await dig(s.port, ['mail.skydns.local', 'MX'])).answer, [
      'mail.skydns.local. 300 IN MX 10 mail.skydns.local.',
    ]);
    const c = (await dig(s.port, ['alias.skydns.local', 'A'])).answer.map(noTtl);
    assert.equal(c[0], 'alias.skydns.local. IN CNAME www.skydns.local.');
    assert.deepEqual(c.slice(1).sort(), ['www.skydns.local. IN A 10.0.0.1', 'www.skydns.local. IN A 10.0.0.2']);
    assert.deepEqual((await dig(s.port, ['-x', '10.0.0.1'])).answer, [
      '1.0.0.10.in-addr.arpa. 300 IN PTR reverse.skydns.local.',
    ]);
    assert.deepEqual(
      (await dig(s.port, ['grp.skydns.local', 'A'])).answer.sort(),
      ['grp.skydns.local. 300 IN A 10.0.1.1', 'grp.skydns.local. 300 IN A 10.0.1.3'],
      'group g1 of the shortest keys',
    );
    assert.deepEqual((await dig(s.port, ['x2.*.skydns.local', 'A'])).answer, ['x2.*.skydns.local. 300 IN A 10.0.0.2']);
  });

  test('a name with no keys is NXDOMAIN with the SOA; a key that is not a service is skipped with a warning naming it', async () => {
    const nx = await dig(s.port, ['nope.skydns.local', 'A']);
    assert.equal(nx.status, 'NXDOMAIN');
    assert.match(
      nx.authority[0]!,
      /^skydns\.local\. 30 IN SOA ns\.dns\.skydns\.local\. hostmaster\.skydns\.local\. \d+ 7200 1800 86400 30$/,
    );
    assert.match(s.output(), /key "\/skydns\/local\/skydns\/bad" does not hold a SkyDNS service/);
  });

  test('a key written to etcd is answered at once through the cache (watched, not polled), and a delete too', async () => {
    assert.equal((await dig(s.port, ['new.skydns.local', 'A'])).status, 'NXDOMAIN', 'a cached NXDOMAIN first');
    const t0 = Date.now();
    await put(etcd, '/skydns/local/skydns/new', { host: '10.0.0.99' });
    await until(
      'the new record',
      async () => (await dig(s.port, ['new.skydns.local', 'A'])).answer[0] === 'new.skydns.local. 300 IN A 10.0.0.99',
      3000,
    );
    assert.ok(Date.now() - t0 < 3000);
    await del(etcd, '/skydns/local/skydns/new');
    await until('the delete', async () => (await dig(s.port, ['new.skydns.local', 'A'])).status === 'NXDOMAIN', 3000);
  });

  test('etcd down: the last known records keep answering; back up, changes made meanwhile are served', async () => {
    etcd.proc.kill('SIGSTOP');
    try {
      await sleep(300);
      assert.equal((await dig(s.port, ['x1.www.skydns.local', 'A', '+tcp'])).status, 'NOERROR');
    } finally {
      etcd.proc.kill('SIGCONT');
    }
    await put(etcd, '/skydns/local/skydns/after', { host: '10.0.0.77' });
    await until(
      'a record written after the pause',
      async () => (await dig(s.port, ['after.skydns.local', 'A'])).answer.length === 1,
      15000,
    );
  });
});

describe('etcd with TLS, and with credentials', () => {
  let pki: TestPki;
  const stops: Array<() => Promise<unknown>> = [];
  before(async () => {
    pki = await makeTestPki();
  });
  after(async () => {
    for (const f of stops.reverse()) await f();
    await pki?.remove();
  });

  test('TLS: the server verified against the CA, a client certificate presented (etcd --client-cert-auth)', async () => {
    const etcd = await startEtcd(pki);
    stops.push(() => stopEtcd(etcd));
    const https = await import('node:https');
    await new Promise<void>((resolve, reject) => {
      const req = https.request(
        `${etcd.url}/v3/kv/put`,
        { method: 'POST', ca: pki.ca, cert: pki.clientCert, key: pki.clientKey },
        (res) => {
          res.resume();
          res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`put: HTTP ${res.statusCode}`))));
        },
      );
      req.on('error', reject);
      req.end(
        JSON.stringify({ key: b64('/skydns/test/secure/www'), value: b64(JSON.stringify({ host: '10.9.0.1' })) }),
      );
    });
    const s = await startServer({
      corefile: `secure.test:PORT {\n    bind 127.0.0.1\n    etcd {\n        endpoint ${etcd.url}\n        tls ${pki.clientCertFile} ${pki.clientKeyFile} ${pki.caFile}\n    }\n}\n`,
      probe: 'www.secure.test',
    });
    stops.push(() => s.stop());
    await until(
      'the record over TLS',
      async () => (await dig(s.port, ['www.secure.test', 'A'])).answer[0] === 'www.secure.test. 300 IN A 10.9.0.1',
    );
  });

  test('credentials: a user name and password get a token; a wrong password is a warning, not a crash', async () => {
    const etcd = await startEtcd();
    stops.push(() => stopEtcd(etcd));
    await etcdCall(etcd, '/v3/auth/user/add', { name: 'root', password: 'rootpw' });
    await etcdCall(etcd, '/v3/auth/user/grant', { user: 'root', role: 'root' });
    await etcdCall(etcd, '/v3/auth/enable', {});
    const { token } = (await etcdCall(etcd, '/v3/auth/authenticate', { name: 'root', password: 'rootpw' })) as {
      token: string;
    };
    await put(etcd, '/skydns/test/secure/www', { host: '10.9.0.2' }, token);
    const good = await startServer({
      corefile: `secure.test:PORT {\n    bind 127.0.0.1\n    etcd {\n        endpoint ${etcd.url}\n        credentials root rootpw\n    }\n}\n`,
      probe: 'www.secure.test',
    });
    stops.push(() => good.stop());
    await until(
      'the record with credentials',
      async () => (await dig(good.port, ['www.secure.test', 'A'])).answer[0] === 'www.secure.test. 300 IN A 10.9.0.2',
    );
    const bad = await startServer({
      corefile: `secure.test:PORT {\n    bind 127.0.0.1\n    etcd {\n        endpoint ${etcd.url}\n        credentials root wrong\n    }\n}\n`,
      probe: 'www.secure.test',
    });
    stops.push(() => bad.stop());
    await bad.waitFor(/plugin\/etcd: .*(authentication failed|invalid)/i, 5000);
    assert.equal((await dig(bad.port, ['www.secure.test', 'A'])).answer.length, 0);
  });
});
