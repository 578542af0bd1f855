import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConnectFlagError, parseConnectFlags, parseDisconnectFlags, parseServer } from '../../src/connect/flags.js';

describe('connect flags', () => {
  test('server forms: IP, IP:PORT, IPv6, [IPv6]:PORT', () => {
    assert.deepEqual(parseServer('10.96.0.10'), { ip: '10.96.0.10', port: 53, family: 4 });
    assert.deepEqual(parseServer('10.96.0.10:5353'), { ip: '10.96.0.10', port: 5353, family: 4 });
    assert.deepEqual(parseServer('fd00::10'), { ip: 'fd00::10', port: 53, family: 6 });
    assert.deepEqual(parseServer('[fd00::10]:5353'), { ip: 'fd00::10', port: 5353, family: 6 });
    for (const bad of ['kube-dns', '10.96.0.10:0', '10.96.0.10:70000', '[fd00::10', '1.2.3.4; rm -rf /']) {
      assert.throws(() => parseServer(bad), ConnectFlagError, bad);
    }
  });

  test('defaults: cluster.local, the search list of the first namespace', () => {
    const f = parseConnectFlags(['--server', '10.96.0.10', '--namespaces', 'team-a,default'], {});
    assert.deepEqual(f.domains, ['cluster.local']);
    assert.deepEqual(f.search, ['team-a.svc.cluster.local', 'svc.cluster.local', 'cluster.local']);
    assert.equal(f.streamIdleMs, 120_000);
  });

  test('domains are normalised and validated', () => {
    const f = parseConnectFlags(
      ['--server', '10.96.0.10', '--domains', 'Cluster.Local.,corp.k8s', '--search', 'default.svc.cluster.local'],
      {},
    );
    assert.deepEqual(f.domains, ['cluster.local', 'corp.k8s']);
    for (const bad of ['../etc', 'a..b', 'x/y', '-', '']) {
      assert.throws(() => parseConnectFlags(['--server', '10.96.0.10', '--domains', bad], {}), ConnectFlagError, bad);
    }
  });

  test('the token comes from --token, --token-file or the environment, and must be printable', () => {
    const file = join(fs.mkdtempSync(join(tmpdir(), 'connect-flags-')), 'token');
    fs.writeFileSync(file, 'from-file\n');
    assert.equal(parseConnectFlags(['--server', '10.0.0.1', '--token-file', file], {}).token, 'from-file');
    assert.equal(parseConnectFlags(['--server', '10.0.0.1'], { CLUSTERDNS_ROUTES_TOKEN: 'env' }).token, 'env');
    assert.throws(() => parseConnectFlags(['--server', '10.0.0.1', '--token', 'a\r\nX-Evil: 1'], {}), ConnectFlagError);
  });

  test('bad input is a flag error, not a crash', () => {
    assert.throws(() => parseConnectFlags([], {}), /--server is required/);
    assert.throws(() => parseConnectFlags(['--server', '10.0.0.1', '--routes', 'ftp://x/'], {}), ConnectFlagError);
    assert.throws(() => parseConnectFlags(['--server', '10.0.0.1', '--bogus'], {}), ConnectFlagError);
    assert.throws(() => parseConnectFlags(['--server', '10.0.0.1', '--os', 'plan9'], {}), ConnectFlagError);
    assert.throws(
      () => parseConnectFlags(['--server', '10.0.0.1', '--interface', 'eth0; reboot'], {}),
      ConnectFlagError,
    );
  });

  test('disconnect flags', () => {
    assert.deepEqual(parseDisconnectFlags(['--cleanup', '--root', '/tmp/x', '--timeout', '2']), {
      root: '/tmp/x',
      cleanup: true,
      timeoutMs: 2000,
      os: 'linux',
      help: false,
      version: false,
    });
    // A relative --root is made absolute here, so the state file names paths any cwd can use.
    assert.equal(parseDisconnectFlags(['--root', 'rel/dir']).root, join(process.cwd(), 'rel/dir'));
  });
});
