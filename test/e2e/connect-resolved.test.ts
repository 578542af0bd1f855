// `clusterdns connect` against a real systemd-resolved (Debian's), in namespaces of its own with
// a private D-Bus, so this machine's resolver is never touched. Queries go through resolved
// over a veth link to a real clusterdns in a second namespace. Skipped, saying why, where
// resolved or namespaces are not available; test/e2e/connect.test.ts covers the same flows
// with the resolvectl stand-in.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { BLOCK_BEGIN } from '../../src/connect/hosts-block.js';
import { killLeftovers, runCli, startConnect, until, type ConnectProcess } from '../connect/connect-process.js';
import { route } from '../connect/fake-routes.js';
import { LINK, ResolvedSandbox, resolvedUnavailable, SERVER_IP, SERVER_PORT } from '../connect/resolved-netns.js';

const unavailable = resolvedUnavailable();
const HOSTS = '127.0.0.1 localhost\n# mine\n10.1.2.3 printer';
const TOKEN = 'netns-token';

describe('clusterdns connect with a real systemd-resolved', { skip: unavailable ?? false, concurrency: false }, () => {
  const sandbox = new ResolvedSandbox();
  let routes: ChildProcess;
  let routesUrl = '';

  before(async () => {
    await sandbox.start();
    // The route stream fake runs inside too: connect reaches it over the sandbox's loopback.
    const main = resolve('dist/test/connect/fake-routes-main.js');
    const seed = JSON.stringify([route('default', 'backend', '10.96.120.15'), route('default', 'web', '10.96.0.30')]);
    routes = spawn(sandbox.wrap()[0]!, [...sandbox.wrap().slice(1), process.execPath, main, TOKEN, seed], {
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    routesUrl = await new Promise<string>((res, rej) => {
      let buf = '';
      routes.stdout!.on('data', (d: Buffer) => {
        buf += d.toString();
        if (buf.includes('\n')) res(buf.split('\n')[0]!);
      });
      routes.on('exit', (code) => rej(new Error(`route stream fake exited ${code}`)));
    });
  });

  after(async () => {
    killLeftovers();
    routes?.stdin?.end();
    routes?.kill('SIGKILL');
    await sandbox.stop();
  });

  function makeRoot(): { root: string; hosts: string } {
    const root = fs.mkdtempSync(join(tmpdir(), 'connect-resolved-root-'));
    fs.mkdirSync(join(root, 'etc'));
    fs.writeFileSync(join(root, 'etc/hosts'), HOSTS);
    return { root, hosts: join(root, 'etc/hosts') };
  }

  const args = (root: string) => [
    '--server',
    `${SERVER_IP}:${SERVER_PORT}`,
    '--domains',
    'cluster.local',
    '--search',
    'default.svc.cluster.local,svc.cluster.local,cluster.local',
    '--routes',
    routesUrl,
    '--token',
    TOKEN,
    '--namespaces',
    'default',
    '--root',
    root,
  ];

  async function waitConfigured(c: ConnectProcess, hosts: string): Promise<void> {
    await c.waitFor('connected:', 20_000);
    await until('hosts block', () => fs.readFileSync(hosts, 'utf8').includes('10.96.0.30 web '), 20_000);
  }

  test('configures the link found with `ip route get`: cluster names resolve through resolved, others never reach the cluster', async () => {
    const { root, hosts } = makeRoot();
    const c = startConnect(args(root), sandbox.env(), sandbox.wrap());
    await waitConfigured(c, hosts);
    assert.match(c.output(), /systemd-resolved: link kdns0 sends/);
    assert.deepEqual(await sandbox.link('dns'), [`${SERVER_IP}:${SERVER_PORT}`]);
    assert.deepEqual(await sandbox.link('domain'), ['default.svc.cluster.local', 'svc.cluster.local', 'cluster.local']);
    assert.deepEqual(await sandbox.link('default-route'), ['no']);

    const q = await sandbox.run('resolvectl', ['query', '--cache=no', 'backend.default.svc.cluster.local']);
    assert.equal(q.code, 0, q.stderr);
    assert.match(q.stdout, /backend\.default\.svc\.cluster\.local: 10\.96\.120\.15\s+-- link: kdns0/);
    const single = await sandbox.run('resolvectl', ['query', '--cache=no', 'backend']);
    assert.match(single.stdout, /10\.96\.120\.15/, 'the search list on the link expands single-label names');
    await sandbox.run('resolvectl', ['query', '--cache=no', 'example.com']);
    assert.match(sandbox.dnsLog(), /"A IN backend\.default\.svc\.cluster\.local\. udp/);
    assert.doesNotMatch(
      sandbox.dnsLog(),
      /example\.com/,
      'default-route off: other names are not sent to the cluster server',
    );

    c.proc.kill('SIGTERM');
    assert.equal(await c.exited, 0, c.output());
    assert.deepEqual(await sandbox.link('dns'), []);
    assert.deepEqual(await sandbox.link('domain'), []);
    assert.equal(fs.readFileSync(hosts, 'utf8'), HOSTS);
  });

  test('after SIGKILL, disconnect --cleanup reverts the link and restores hosts byte for byte', async () => {
    const { root, hosts } = makeRoot();
    const c = startConnect(args(root), sandbox.env(), sandbox.wrap());
    await waitConfigured(c, hosts);
    c.proc.kill('SIGKILL');
    await c.exited;
    assert.deepEqual(await sandbox.link('dns'), [`${SERVER_IP}:${SERVER_PORT}`], 'a crash leaves the link configured');
    assert.ok(fs.readFileSync(hosts, 'utf8').includes(BLOCK_BEGIN));

    const d = await runCli(['disconnect', '--cleanup', '--root', root], sandbox.env(), sandbox.wrap());
    assert.equal(d.code, 0, d.stdout + d.stderr);
    assert.match(d.stdout, /systemd-resolved: link kdns0 reverted/);
    assert.deepEqual(await sandbox.link('dns'), []);
    assert.deepEqual(await sandbox.link('domain'), []);
    assert.equal(fs.readFileSync(hosts, 'utf8'), HOSTS);
    assert.equal(fs.existsSync(join(root, 'var/lib/clusterdns/connect.json')), false);
    const q = await sandbox.run('resolvectl', ['query', '--cache=no', 'web.default.svc.cluster.local']);
    assert.notEqual(q.code, 0, 'cluster names no longer go to the cluster server');
  });

  test('a link with DNS settings from another manager is left exactly as it was', async () => {
    const { root, hosts } = makeRoot();
    await sandbox.run('resolvectl', ['dns', LINK, '10.250.0.99']);
    await sandbox.run('resolvectl', ['domain', LINK, 'corp.example']);
    try {
      const c = startConnect(args(root), sandbox.env(), sandbox.wrap());
      await c.waitFor('connected:', 20_000);
      assert.match(c.output(), /link kdns0 already has DNS settings from another manager/);
      assert.deepEqual(await sandbox.link('dns'), ['10.250.0.99']);
      c.proc.kill('SIGTERM');
      assert.equal(await c.exited, 0);
      assert.deepEqual(await sandbox.link('dns'), ['10.250.0.99'], 'not reverted either: it was never ours');
      assert.deepEqual(await sandbox.link('domain'), ['corp.example']);
      assert.equal(fs.readFileSync(hosts, 'utf8'), HOSTS);
    } finally {
      await sandbox.run('resolvectl', ['revert', LINK]);
    }
  });
});
