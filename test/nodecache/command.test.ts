// The subcommand's exits that need no privileges and touch nothing: bad flags, nothing to forward to.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BIN } from '../helpers/server.js';
import { dig } from '../helpers/dns.js';
import { freePort } from '../helpers/ports.js';

function nodecache(
  args: string[],
  env: NodeJS.ProcessEnv = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  const base: NodeJS.ProcessEnv = { ...process.env, ...env };
  delete base.KUBERNETES_SERVICE_HOST;
  delete base.KUBE_DNS_SERVICE_HOST;
  delete base.KUBE_DNS_UPSTREAM_SERVICE_HOST;
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, 'nodecache', ...args], { env: base, timeout: 20_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr });
    });
  });
}

test('bad flags exit 2 with the message and the usage', async () => {
  const r = await nodecache(['-localip', '169.254.20.10', '-syncinterval', 'often']);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /invalid value "often" for -syncinterval/);
  assert.match(r.stderr, /Usage of clusterdns nodecache/);
  const missing = await nodecache([]);
  assert.equal(missing.code, 2);
  assert.match(missing.stderr, /-localip is required/);
});

test('-conf equal to -basecorefile is refused before anything is written', async () => {
  const r = await nodecache([
    '-localip',
    '169.254.20.10',
    '-conf',
    '/tmp/x/Corefile',
    '-basecorefile',
    '/tmp/x/Corefile',
  ]);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /would overwrite its template/);
});

test('no upstream Service address: exit 1 naming the variable, before the node is touched', async () => {
  // Never touches the host even if it got further: no interface, no rules, an unwritable -conf.
  const r = await nodecache([
    '-localip',
    '169.254.20.10',
    '-upstreamsvc',
    'kube-dns-upstream',
    '-conf',
    '/nonexistent/Corefile',
    '-metrics-listen-address',
    '',
    '-setupinterface=false',
    '-setupiptables=false',
  ]);
  assert.equal(r.code, 1);
  assert.match(r.stdout + r.stderr, /\[FATAL\] nodecache: \$KUBE_DNS_UPSTREAM_SERVICE_HOST is not set/);
  assert.doesNotMatch(r.stdout + r.stderr, /teardown/);
});

test('no upstream Service address and a template that does not use __PILLAR__CLUSTER__DNS__: a warning, and it serves', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'nodecache-nocluster-'));
  const port = await freePort();
  writeFileSync(join(dir, 'Corefile.base'), `.:${port} {\n    bind 127.0.0.1\n    whoami\n}\n`);
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env.KUBERNETES_SERVICE_HOST;
  delete env.KUBE_DNS_SERVICE_HOST;
  delete env.KUBE_DNS_UPSTREAM_SERVICE_HOST;
  const args = [
    '-localip',
    '169.254.20.10',
    '-upstreamsvc',
    'kube-dns-upstream',
    '-basecorefile',
    join(dir, 'Corefile.base'),
    '-conf',
    join(dir, 'Corefile'),
    '-metrics-listen-address',
    '',
    '-setupinterface=false',
    '-setupiptables=false',
  ];
  const p = spawn(process.execPath, [BIN, 'nodecache', ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  p.stdout.on('data', (d: Buffer) => (out += d.toString()));
  p.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((r) => p.on('exit', (code) => r(code)));
  try {
    const end = Date.now() + 15_000;
    while (!out.includes('ready: serving DNS') && p.exitCode === null && Date.now() < end)
      await new Promise((r) => setTimeout(r, 50));
    assert.match(out, /ready: serving DNS/, out);
    assert.match(
      out,
      /\[WARNING\] nodecache: Unable to lookup IP address of Upstream service kube-dns-upstream: \$KUBE_DNS_UPSTREAM_SERVICE_HOST is not set.*does not use __PILLAR__CLUSTER__DNS__/,
    );
    assert.equal((await dig(port, ['whoami.example', 'A'])).status, 'NOERROR');
  } finally {
    p.kill('SIGTERM');
  }
  assert.equal(await exited, 0, out);
});

test('-version and -h', async () => {
  assert.match((await nodecache(['-version'])).stdout, /^clusterdns-\d+\.\d+\.\d+ nodecache\n$/);
  const h = await nodecache(['-h']);
  assert.equal(h.code, 0);
  assert.match(h.stdout, /-localip string/);
});
