// The command line as CoreDNS users know it: flags, the built-in config, config errors.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { BIN, startServer } from '../helpers/server.js';
import { query, sendUdp, buildQuery } from '../helpers/dns.js';
import { freePort } from '../helpers/ports.js';
import { QType } from '../../src/dns/constants.js';

const run = promisify(execFile);

test('-version prints the program and platform', async () => {
  const { stdout } = await run(process.execPath, [BIN, '-version']);
  assert.match(stdout, /^clusterdns-\d+\.\d+\.\d+\n/);
  assert.match(stdout, /linux\/x64|linux\/arm64/);
});

test('-plugins lists the compiled-in plugins', async () => {
  const { stdout } = await run(process.execPath, [BIN, '-plugins']);
  for (const p of [
    'dns.hosts',
    'dns.whoami',
    'dns.log',
    'dns.errors',
    'dns.health',
    'dns.ready',
    'dns.reload',
    'dns.bind',
    'dns.loadbalance',
  ]) {
    assert.ok(stdout.includes(p), `missing ${p}`);
  }
});

test('-h prints the usage with CoreDNS flag names', async () => {
  const { stdout } = await run(process.execPath, [BIN, '-h']);
  for (const f of ['-conf', '-dns.port', '-pidfile', '-plugins', '-quiet', '-version'])
    assert.ok(stdout.includes(f), f);
});

test('an unknown flag is an error with the usage', async () => {
  await assert.rejects(
    run(process.execPath, [BIN, '-bogus']),
    (e: { code?: number; stderr?: string }) => e.code === 1 && /Usage/.test(e.stderr ?? ''),
  );
});

test('a config error prints FILE:LINE - Error during parsing and exits 1 before binding', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'clusterdns-cli-'));
  const port = await freePort();
  const conf = join(dir, 'Corefile');
  writeFileSync(conf, `.:${port} {\n    whoami\n    nosuchplugin\n}\n`);
  const r = await run(process.execPath, [BIN, '-conf', conf]).catch((e: { code: number; stderr: string }) => e);
  assert.equal((r as { code: number }).code, 1);
  assert.equal(
    (r as { stderr: string }).stderr.trim(),
    `${conf}:3 - Error during parsing: Unknown directive 'nosuchplugin'`,
  );
  // Nothing was bound: the port is still free.
  await assert.rejects(sendUdp(port, buildQuery('x.', QType.A), 300), /timeout/);
});

test('a bad plugin option names its line', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'clusterdns-cli-'));
  const conf = join(dir, 'Corefile');
  writeFileSync(conf, `.:1 {\n    hosts {\n        ttl abc\n    }\n}\n`);
  const r = await run(process.execPath, [BIN, '-conf', conf]).catch((e: { code: number; stderr: string }) => e);
  assert.equal((r as { code: number }).code, 1);
  assert.match(
    (r as { stderr: string }).stderr,
    new RegExp(`^${conf}:3 - Error during parsing: ttl: "abc" is not a number`),
  );
});

test('without -conf and without ./Corefile it serves whoami on -dns.port', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'clusterdns-cli-'));
  const port = await freePort();
  const p = spawn(process.execPath, [BIN, '-dns.port', String(port), '-workers', '1'], {
    cwd: dir,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  p.stdout.on('data', (d) => (out += d));
  try {
    let r;
    for (let i = 0; i < 50; i++) {
      try {
        r = await query(port, 'who.example.', QType.A, { timeoutMs: 300 });
        break;
      } catch {
        /* not up yet */
      }
    }
    assert.ok(r, 'no answer from the built-in config');
    assert.deepEqual(r.additionals.find((x) => x.type === QType.A)?.data, { address: '127.0.0.1' });
    await new Promise((res) => setTimeout(res, 200));
    assert.match(out, new RegExp(`^\\.:${port}\\n`)); // the banner names the server block
    assert.match(out, /"A IN who\.example\. udp/); // and `log` is on
  } finally {
    p.kill('SIGTERM');
    await new Promise((r) => p.on('exit', r));
  }
});

test('./Corefile is read when -conf is not given', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'clusterdns-cli-'));
  const port = await freePort();
  writeFileSync(join(dir, 'Corefile'), `.:${port} {\n bind 127.0.0.1\n hosts {\n 10.9.9.9 local.corefile\n }\n}\n`);
  const p = spawn(process.execPath, [BIN, '-workers', '1', '-quiet'], { cwd: dir, stdio: 'ignore' });
  try {
    let r;
    for (let i = 0; i < 50 && !r; i++)
      r = await query(port, 'local.corefile.', QType.A, { timeoutMs: 300 }).catch(() => undefined);
    assert.deepEqual(r?.answers[0]?.data, { address: '10.9.9.9' });
  } finally {
    p.kill('SIGTERM');
    await new Promise((r) => p.on('exit', r));
  }
});

test('-pidfile is written while running and removed on SIGTERM; -quiet prints no banner; exit code 0', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'clusterdns-cli-'));
  const pidfile = join(dir, 'clusterdns.pid');
  const s = await startServer({
    corefile: `.:PORT {\n bind 127.0.0.1\n whoami\n}\n`,
    args: ['-pidfile', pidfile, '-quiet'],
    probe: 'x.',
  });
  for (let i = 0; i < 20 && !existsSync(pidfile); i++) await new Promise((r) => setTimeout(r, 50));
  assert.equal(readFileSync(pidfile, 'utf8').trim(), String(s.proc.pid));
  assert.equal(s.output(), '');
  assert.equal(await s.stop('SIGTERM'), 0);
  assert.equal(existsSync(pidfile), false);
});

test('SIGINT also shuts down cleanly with exit code 0', async () => {
  const s = await startServer({ corefile: `.:PORT {\n bind 127.0.0.1\n whoami\n}\n` });
  assert.equal(await s.stop('SIGINT'), 0);
});

test('a port already in use is a clear error and exit code 1', async () => {
  const s = await startServer({ corefile: `.:PORT {\n bind 127.0.0.1\n whoami\n}\n` });
  try {
    const dir = mkdtempSync(join(tmpdir(), 'clusterdns-cli-'));
    const conf = join(dir, 'Corefile');
    writeFileSync(conf, `.:${s.port} {\n bind 127.0.0.1\n whoami\n}\n`);
    const r = await run(process.execPath, [BIN, '-conf', conf, '-workers', '1']).catch(
      (e: { code: number; stderr: string }) => e,
    );
    assert.equal((r as { code: number }).code, 1);
    assert.equal(
      (r as { stderr: string }).stderr,
      `clusterdns: cannot listen on dns://127.0.0.1:${s.port}: address already in use\n`,
    );
  } finally {
    await s.stop();
  }
});

test('a server loads the code of the plugins its Corefile uses; a reload that adds one loads it', async () => {
  // A module hook (NODE_OPTIONS --import) prints every plugin module the process loads.
  const hooks = mkdtempSync(join(tmpdir(), 'clusterdns-hooks-'));
  writeFileSync(
    join(hooks, 'hooks.mjs'),
    `export async function load(url, context, next) {\n  if (url.includes('/plugins/')) console.error('LOADED ' + url.slice(url.indexOf('/plugins/') + 9));\n  return next(url, context);\n}\n`,
  );
  writeFileSync(
    join(hooks, 'register.mjs'),
    `import { register } from 'node:module';\nregister(${JSON.stringify(pathToFileURL(join(hooks, 'hooks.mjs')).href)});\n`,
  );
  const s = await startServer({
    corefile: `.:PORT {\n bind 127.0.0.1\n whoami\n}\n`,
    env: { NODE_OPTIONS: `--import ${join(hooks, 'register.mjs')}` },
    probe: 'x.',
  });
  try {
    const loaded = () => new Set([...s.output().matchAll(/^LOADED (\S+)/gm)].map((m) => m[1]));
    assert.ok(loaded().has('whoami/setup.js'), s.output());
    assert.ok(loaded().has('bind/setup.js'), s.output());
    for (const other of [
      'forward/setup.js',
      'cache/setup.js',
      'kubernetes/setup.js',
      'hosts/setup.js',
      'prometheus/setup.js',
    ]) {
      assert.ok(!loaded().has(other), `${other} was loaded for a whoami-only Corefile`);
    }
    writeFileSync(s.corefile, `.:${s.port} {\n bind 127.0.0.1\n hosts {\n  10.7.7.7 added.test\n }\n whoami\n}\n`);
    s.proc.kill('SIGUSR1');
    let r;
    for (let i = 0; i < 50 && r?.answers[0] === undefined; i++) {
      r = await query(s.port, 'added.test.', QType.A, { timeoutMs: 300 }).catch(() => undefined);
      if (r?.answers[0] === undefined) await new Promise((res) => setTimeout(res, 100));
    }
    assert.deepEqual(r?.answers[0]?.data, { address: '10.7.7.7' });
    assert.ok(loaded().has('hosts/setup.js'), s.output());
    assert.ok(!loaded().has('forward/setup.js'));
  } finally {
    await s.stop();
  }
});
