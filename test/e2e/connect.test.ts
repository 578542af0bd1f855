// `clusterdns connect` / `disconnect` end to end: the real binary, a temporary --root holding
// etc/hosts, etc/resolver and the state dir, the route stream fake, and the resolvectl/ip
// stand-ins first on PATH (the real systemd-resolved runs in connect-resolved.test.ts).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BLOCK_BEGIN, BLOCK_END } from '../../src/connect/hosts-block.js';
import { RESOLVER_MARKER } from '../../src/connect/resolver-files.js';
import { FakeRouteServer, route } from '../connect/fake-routes.js';
import { FakeResolved } from '../connect/fake-resolvectl.js';
import { killLeftovers, runCli, startConnect, until, type ConnectProcess } from '../connect/connect-process.js';

// Deliberately without a final line break, with tabs and comments: restored byte for byte.
const HOSTS =
  "127.0.0.1\tlocalhost\n# the user's own entries\n192.168.1.20  nas.home   nas # printer too\n::1 localhost ip6-localhost";
const FOREIGN_RESOLVER = 'nameserver 192.168.5.1\n';

interface Root {
  root: string;
  hosts: string;
  state: string;
  fake: FakeResolved;
  env: NodeJS.ProcessEnv;
}

function makeRoot(): Root {
  const root = fs.mkdtempSync(join(tmpdir(), 'connect-e2e-'));
  fs.mkdirSync(join(root, 'etc'));
  fs.writeFileSync(join(root, 'etc/hosts'), HOSTS, { mode: 0o644 });
  const fake = new FakeResolved(join(root, 'fake'));
  const env: NodeJS.ProcessEnv = { ...process.env, PATH: fake.path() };
  return { root, hosts: join(root, 'etc/hosts'), state: join(root, 'var/lib/clusterdns/connect.json'), fake, env };
}

function hostsText(r: Root): string {
  return fs.readFileSync(r.hosts, 'utf8');
}

/** Waits for the hosts block to have `n` entries; a timeout shows the file and connect's output. */
async function waitBlock(r: Root, c: ConnectProcess, n: number): Promise<void> {
  try {
    await until(`${n} hosts entries`, () => blockOf(hostsText(r)).length === n, 20_000);
  } catch (err) {
    throw new Error(`${(err as Error).message}\nhosts:\n${hostsText(r)}\nconnect output:\n${c.output()}`, {
      cause: err,
    });
  }
}

function blockOf(text: string): string[] {
  const start = text.indexOf(BLOCK_BEGIN);
  const end = text.indexOf(BLOCK_END);
  if (start === -1 || end === -1) return [];
  return text
    .slice(start, end)
    .split('\n')
    .filter((l) => l !== '' && !l.startsWith('#'));
}

describe('clusterdns connect end to end', { concurrency: true }, () => {
  let routes: FakeRouteServer;
  before(async () => {
    routes = new FakeRouteServer('tok-123');
    await routes.listen();
    routes.set(route('default', 'backend', '10.96.120.15'));
    routes.set(route('kube-system', 'kube-dns', '10.96.0.10'));
    routes.set(route('other', 'hidden', '10.96.9.9'));
  });
  after(async () => {
    killLeftovers();
    await routes.close();
  });

  const linuxArgs = (r: Root, extra: string[] = []) => [
    '--server',
    '10.250.0.53:5353',
    '--domains',
    'cluster.local',
    '--search',
    'default.svc.cluster.local,svc.cluster.local,cluster.local',
    '--routes',
    routes.url,
    '--token',
    'tok-123',
    '--namespaces',
    'default,kube-system',
    '--root',
    r.root,
    '--os',
    'linux',
    ...extra,
  ];

  test('connect configures resolved and keeps the hosts block in sync; SIGTERM restores everything byte for byte', async () => {
    const r = makeRoot();
    const c = startConnect(linuxArgs(r), r.env);
    await c.waitFor('connected:');
    await waitBlock(r, c, 2);
    assert.deepEqual(blockOf(hostsText(r)), [
      '10.96.120.15 backend backend.default backend.default.svc backend.default.svc.cluster.local',
      '10.96.0.10 kube-dns.kube-system kube-dns.kube-system.svc kube-dns.kube-system.svc.cluster.local',
    ]);
    assert.ok(hostsText(r).startsWith(HOSTS + '\n' + BLOCK_BEGIN), 'lines outside the block untouched');
    assert.deepEqual(r.fake.link(), {
      index: 3,
      dns: ['10.250.0.53:5353'],
      domains: ['default.svc.cluster.local', 'svc.cluster.local', 'cluster.local'],
      defaultRoute: false,
    });
    assert.equal(
      (JSON.parse(fs.readFileSync(r.state, 'utf8')) as { resolved: { link: string } }).resolved.link,
      'kdns0',
    );

    routes.set(route('default', 'web', '10.96.0.30', 'fd00::30'));
    await until('ADDED in hosts', () => blockOf(hostsText(r)).length === 4);
    assert.ok(blockOf(hostsText(r)).includes('fd00::30 web web.default web.default.svc web.default.svc.cluster.local'));
    routes.delete('default', 'web');
    await until('DELETED from hosts', () => blockOf(hostsText(r)).length === 2);

    c.proc.kill('SIGTERM');
    assert.equal(await c.exited, 0, c.output());
    assert.equal(hostsText(r), HOSTS);
    assert.equal(fs.statSync(r.hosts).mode & 0o777, 0o644);
    assert.deepEqual(r.fake.link(), { index: 3, dns: [], domains: [], defaultRoute: null });
    assert.deepEqual(r.fake.changes().at(-1), ['revert', 'kdns0']);
    assert.equal(fs.existsSync(r.state), false);
    assert.deepEqual(fs.readdirSync(join(r.root, 'etc')), ['hosts'], 'no temporary or lock files left');
    assert.equal(fs.existsSync(join(r.root, 'var/lib/clusterdns')), false, 'nor an empty state directory');
  });

  test('after a dropped stream it reconnects, resumes from its resourceVersion, and catches up', async () => {
    const own = new FakeRouteServer('tok-123');
    await own.listen();
    own.set(route('default', 'backend', '10.96.120.15'));
    const r = makeRoot();
    const args = linuxArgs(r);
    args[args.indexOf(routes.url)] = own.url;
    const c = startConnect(args, r.env);
    await waitBlock(r, c, 1);
    const rv = own.resourceVersion;
    own.dropClients();
    own.set(route('kube-system', 'metrics', '10.96.0.40'));
    await until('caught up', () => blockOf(hostsText(r)).some((l) => l.startsWith('10.96.0.40 ')));
    assert.equal(own.requests.length, 2);
    assert.equal(own.requests[1]?.resourceVersion, rv, 'resumed from the last resourceVersion it saw');
    c.proc.kill('SIGINT');
    assert.equal(await c.exited, 0);
    assert.equal(hostsText(r), HOSTS);
    await own.close();
  });

  test('clusterdns disconnect signals the running connect, which undoes its changes', async () => {
    const r = makeRoot();
    const c = startConnect(linuxArgs(r), r.env);
    await waitBlock(r, c, 2);
    const d = await runCli(['disconnect', '--root', r.root, '--os', 'linux'], r.env);
    assert.equal(d.code, 0, d.stderr + d.stdout);
    assert.match(d.stdout, /stopping connect \(pid \d+\)/);
    assert.equal(await c.exited, 0);
    assert.equal(hostsText(r), HOSTS);
    assert.deepEqual(r.fake.link().dns, []);
    assert.equal(fs.existsSync(r.state), false);
  });

  test('after SIGKILL, disconnect --cleanup restores hosts and reverts resolved from the state file', async () => {
    const r = makeRoot();
    const c = startConnect(linuxArgs(r), r.env);
    await waitBlock(r, c, 2);
    c.proc.kill('SIGKILL');
    await c.exited;
    assert.ok(hostsText(r).includes(BLOCK_BEGIN), 'the crash left the block');
    assert.deepEqual(r.fake.link().dns, ['10.250.0.53:5353'], 'and the link configured');
    const d = await runCli(['disconnect', '--cleanup', '--root', r.root, '--os', 'linux'], r.env);
    assert.equal(d.code, 0, d.stderr + d.stdout);
    assert.equal(hostsText(r), HOSTS);
    assert.deepEqual(r.fake.link(), { index: 3, dns: [], domains: [], defaultRoute: null });
    assert.equal(fs.existsSync(r.state), false);
    const again = await runCli(['disconnect', '--cleanup', '--root', r.root, '--os', 'linux'], r.env);
    assert.equal(again.code, 0);
    assert.match(again.stdout, /nothing was connected/);
  });

  test('after SIGKILL, the next connect restores first, then connects again', async () => {
    const r = makeRoot();
    const first = startConnect(linuxArgs(r), r.env);
    await waitBlock(r, first, 2);
    first.proc.kill('SIGKILL');
    await first.exited;
    const second = startConnect(linuxArgs(r), r.env);
    await second.waitFor('did not exit cleanly');
    await second.waitFor('connected:');
    await waitBlock(r, second, 2);
    assert.equal(hostsText(r).split(BLOCK_BEGIN).length, 2, 'exactly one block');
    second.proc.kill('SIGTERM');
    assert.equal(await second.exited, 0);
    assert.equal(hostsText(r), HOSTS);
  });

  test('a second connect is refused while one runs, and --cleanup will not pull the rug from under it', async () => {
    const r = makeRoot();
    const c = startConnect(linuxArgs(r), r.env);
    await c.waitFor('connected:');
    const second = await runCli(['connect', ...linuxArgs(r)], r.env);
    assert.equal(second.code, 1);
    assert.match(second.stderr, /already connected \(pid \d+/);
    const cleanup = await runCli(['disconnect', '--cleanup', '--root', r.root, '--os', 'linux'], r.env);
    assert.equal(cleanup.code, 1);
    assert.match(cleanup.stderr, /still running/);
    c.proc.kill('SIGTERM');
    assert.equal(await c.exited, 0);
  });

  test('macOS mode: marked resolver files written and removed, a foreign file untouched; crash recovery too', async () => {
    const r = makeRoot();
    const dir = join(r.root, 'etc/resolver');
    fs.mkdirSync(dir);
    fs.writeFileSync(join(dir, 'corp.example'), FOREIGN_RESOLVER);
    const args = [
      '--server',
      '10.96.0.10',
      '--domains',
      'cluster.local,corp.example',
      '--routes',
      routes.url,
      '--token',
      'tok-123',
      '--namespaces',
      'default',
      '--root',
      r.root,
      '--os',
      'darwin',
    ];
    const c = startConnect(args, r.env);
    await c.waitFor('connected:');
    assert.match(c.output(), /not on darwin, not run: dscacheutil -flushcache/);
    assert.match(c.output(), /not on darwin, not run: killall -HUP mDNSResponder/);
    assert.ok(fs.readFileSync(join(dir, 'cluster.local'), 'utf8').startsWith(RESOLVER_MARKER + '\n'));
    assert.equal(fs.readFileSync(join(dir, 'corp.example'), 'utf8'), FOREIGN_RESOLVER);
    await waitBlock(r, c, 1);
    c.proc.kill('SIGKILL');
    await c.exited;
    const d = await runCli(['disconnect', '--cleanup', '--root', r.root], r.env);
    assert.equal(d.code, 0, d.stderr + d.stdout);
    assert.deepEqual(fs.readdirSync(dir), ['corp.example']);
    assert.equal(fs.readFileSync(join(dir, 'corp.example'), 'utf8'), FOREIGN_RESOLVER);
    assert.equal(hostsText(r), HOSTS);
  });

  test('Windows mode prints the PowerShell it would run and removes its NRPT rules on exit', async () => {
    const r = makeRoot();
    const c = startConnect(['--server', '10.96.0.10', '--root', r.root, '--os', 'windows'], r.env);
    await c.waitFor('connected:');
    assert.match(
      c.output(),
      /Add-DnsClientNrptRule -Namespace '\.cluster\.local' -NameServers '10\.96\.0\.10' -Comment 'clusterdns'/,
    );
    c.proc.kill('SIGTERM');
    assert.equal(await c.exited, 0);
    assert.match(c.output(), /Where-Object \{ \$_\.Comment -eq 'clusterdns' \} \| Remove-DnsClientNrptRule -Force/);
  });

  test('a refused token is reported; the resolver setup stays and the process keeps running', async () => {
    const r = makeRoot();
    const c = startConnect(linuxArgs(r, ['--token', 'wrong']), r.env);
    await c.waitFor('HTTP 401');
    assert.deepEqual(r.fake.link().dns, ['10.250.0.53:5353']);
    assert.equal(hostsText(r), HOSTS, 'no block before the first snapshot');
    c.proc.kill('SIGTERM');
    assert.equal(await c.exited, 0);
    assert.deepEqual(r.fake.link().dns, []);
  });

  test('a relative --root is recorded absolute: disconnect --cleanup from another directory restores it', async () => {
    const r = makeRoot();
    const parent = join(r.root, '..');
    const rel = r.root.slice(parent.length + 1);
    const args = linuxArgs(r);
    args[args.indexOf(r.root)] = rel;
    const c = startConnect(args, r.env, [], parent);
    await waitBlock(r, c, 2);
    assert.equal((JSON.parse(fs.readFileSync(r.state, 'utf8')) as { hosts: { path: string } }).hosts.path, r.hosts);
    c.proc.kill('SIGKILL');
    await c.exited;
    const d = await runCli(['disconnect', '--cleanup', '--root', r.root, '--os', 'linux'], r.env, [], tmpdir());
    assert.equal(d.code, 0, d.stderr + d.stdout);
    assert.equal(hostsText(r), HOSTS);
  });

  test('disconnect with a --root that holds nothing says what it looked for and exits 1', async () => {
    const r = makeRoot();
    const wrong = join(r.root, 'wrong');
    const d = await runCli(['disconnect', '--root', wrong, '--os', 'linux'], r.env);
    assert.equal(d.code, 1, d.stdout);
    assert.match(
      d.stderr,
      new RegExp(
        `found no state file \\(${wrong}/var/lib/clusterdns/connect\\.json\\) and no hosts file \\(${wrong}/etc/hosts\\).*is --root the one connect ran with\\?`,
      ),
    );
    // The right root with nothing connected is fine, and says what it checked.
    const ok = await runCli(['disconnect', '--root', r.root, '--os', 'linux'], r.env);
    assert.equal(ok.code, 0, ok.stderr);
    assert.match(
      ok.stdout,
      /nothing was connected: no state file at .*connect\.json, no cluster block in .*etc\/hosts/,
    );
    assert.equal(fs.existsSync(join(r.root, 'var')), false, 'disconnect creates nothing');
  });

  test('--routes without a token is refused at start, before anything changes', async () => {
    const r = makeRoot();
    const env = { ...r.env };
    delete env.CLUSTERDNS_ROUTES_TOKEN;
    const args = linuxArgs(r);
    args.splice(args.indexOf('--token'), 2);
    const out = await runCli(['connect', ...args], env);
    assert.equal(out.code, 2);
    assert.match(
      out.stderr,
      /--routes needs the stream's bearer token: --token-file FILE, --token TOKEN or \$CLUSTERDNS_ROUTES_TOKEN/,
    );
    assert.deepEqual(r.fake.calls(), []);
    assert.equal(fs.existsSync(r.state), false);
  });

  test('Go-style single-dash flags work; unknown ones are named plainly; --version', async () => {
    const r = makeRoot();
    const c = startConnect(
      linuxArgs(r).map((a) => (a.startsWith('--') ? a.slice(1) : a)),
      r.env,
    );
    await waitBlock(r, c, 2);
    c.proc.kill('SIGTERM');
    assert.equal(await c.exited, 0, c.output());
    const typo = await runCli(['connect', '--sever', '10.0.0.1', '--root', r.root], r.env);
    assert.equal(typo.code, 2);
    assert.match(typo.stderr, /unknown flag --sever \(did you mean --server\?\)/);
    for (const cmd of ['connect', 'disconnect']) {
      const v = await runCli([cmd, '--version'], r.env);
      assert.equal(v.code, 0, v.stderr);
      assert.match(v.stdout, new RegExp(`^clusterdns-\\d+\\.\\d+\\.\\d+ ${cmd}\\n$`));
    }
  });

  test("connect --help shows the route stream on the routes plugin's port, as the READMEs do", async () => {
    const help = await runCli(['connect', '--help'], process.env);
    const port = /\*\*ADDRESS\*\* to listen on, `:(\d+)` by default/.exec(
      fs.readFileSync('src/plugins/routes/README.md', 'utf8'),
    )?.[1];
    assert.equal(port, '9002');
    assert.match(help.stdout, new RegExp(`--routes URL .*http://[\\d.]+:${port}/routes`));
    assert.match(
      fs.readFileSync('src/connect/README.md', 'utf8'),
      new RegExp(`--routes http://[\\d.]+:${port}/routes`),
    );
  });

  test('bad flags exit 2 before anything changes', async () => {
    const r = makeRoot();
    const out = await runCli(['connect', '--server', 'not-an-ip', '--root', r.root], r.env);
    assert.equal(out.code, 2);
    assert.match(out.stderr, /--server: "not-an-ip" is not IP\[:PORT\]/);
    assert.equal(hostsText(r), HOSTS);
    assert.deepEqual(r.fake.calls(), []);
  });
});
