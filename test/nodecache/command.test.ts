// The subcommand's exits that need no privileges and touch nothing: bad flags, nothing to forward to.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { BIN } from '../helpers/server.js';

function nodecache(args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ code: number; stdout: string; stderr: string }> {
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
  const r = await nodecache(['-localip', '169.254.20.10', '-conf', '/tmp/x/Corefile', '-basecorefile', '/tmp/x/Corefile']);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /would overwrite its template/);
});

test('no upstream Service address: exit 1 naming the variable, before the node is touched', async () => {
  // Never touches the host even if it got further: no interface, no rules, an unwritable -conf.
  const r = await nodecache(['-localip', '169.254.20.10', '-upstreamsvc', 'kube-dns-upstream', '-conf', '/nonexistent/Corefile', '-metrics-listen-address', '', '-setupinterface=false', '-setupiptables=false']);
  assert.equal(r.code, 1);
  assert.match(r.stdout + r.stderr, /\[FATAL\] nodecache: \$KUBE_DNS_UPSTREAM_SERVICE_HOST is not set/);
  assert.doesNotMatch(r.stdout + r.stderr, /teardown/);
});

test('-version and -h', async () => {
  assert.match((await nodecache(['-version'])).stdout, /^clusterdns-\d+\.\d+\.\d+ nodecache\n$/);
  const h = await nodecache(['-h']);
  assert.equal(h.code, 0);
  assert.match(h.stdout, /-localip string/);
});
