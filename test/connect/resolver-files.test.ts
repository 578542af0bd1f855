// macOS backend: files under a temporary root, the flush commands recorded instead of run.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { recordingRunner } from '../../src/sys/exec.js';
import { parseServer } from '../../src/connect/flags.js';
import {
  applyResolverFiles,
  DARWIN_FLUSH_COMMANDS,
  RESOLVER_MARKER,
  resolverFileContent,
  revertResolverFiles,
} from '../../src/connect/resolver-files.js';
import type { ConnectState } from '../../src/connect/state.js';
import type { DnsSetup } from '../../src/connect/dns-setup.js';
import { memoryLog } from './memory-log.js';

const setup: DnsSetup = {
  server: parseServer('10.96.0.10:5353'),
  domains: ['cluster.local', 'corp.k8s'],
  search: ['default.svc.cluster.local'],
};

function harness() {
  const root = fs.mkdtempSync(join(tmpdir(), 'connect-darwin-'));
  const dir = join(root, 'etc/resolver');
  const ran: string[][] = [];
  const runner = recordingRunner((f, a) => void ran.push([f, ...a]));
  const log = memoryLog();
  let state: Partial<ConnectState> = {};
  return {
    dir,
    ran,
    runner,
    log,
    state: () => state,
    ctx: { runner, log, record: (p: Partial<ConnectState>) => void (state = { ...state, ...p }) },
  };
}

describe('macOS /etc/resolver files', () => {
  test('one marked file per cluster domain with nameserver, port, search_order and timeout', async () => {
    const h = harness();
    assert.equal(await applyResolverFiles(h.dir, setup, h.ctx), true);
    assert.deepEqual(fs.readdirSync(h.dir).sort(), ['cluster.local', 'corp.k8s']);
    const text = fs.readFileSync(join(h.dir, 'cluster.local'), 'utf8');
    assert.equal(text, resolverFileContent(setup));
    assert.deepEqual(text.split('\n'), [
      RESOLVER_MARKER,
      '# removed by `clusterdns disconnect`; do not edit',
      'nameserver 10.96.0.10',
      'port 5353',
      'search_order 1',
      'timeout 5',
      '',
    ]);
    assert.equal(fs.statSync(join(h.dir, 'cluster.local')).mode & 0o777, 0o644);
    assert.deepEqual(h.state().resolverFiles, { dir: h.dir, files: ['cluster.local', 'corp.k8s'], createdDir: true });
  });

  test('the resolver cache is flushed with dscacheutil and a HUP to mDNSResponder, after writing and after removing', async () => {
    const h = harness();
    await applyResolverFiles(h.dir, setup, h.ctx);
    assert.deepEqual(h.ran, [
      ['dscacheutil', '-flushcache'],
      ['killall', '-HUP', 'mDNSResponder'],
    ]);
    assert.deepEqual(
      DARWIN_FLUSH_COMMANDS.map(([f, a]) => [f, ...a]),
      h.ran,
    );
    await revertResolverFiles(h.state().resolverFiles!, h.runner, h.log);
    assert.equal(h.ran.length, 4);
    assert.equal(fs.existsSync(h.dir), false, 'the directory we created is gone once empty');
  });

  test('a file without our marker is never overwritten or removed', async () => {
    const h = harness();
    fs.mkdirSync(h.dir, { recursive: true });
    const theirs = 'nameserver 192.168.5.1\n';
    fs.writeFileSync(join(h.dir, 'corp.k8s'), theirs);
    fs.writeFileSync(join(h.dir, 'other.vpn'), theirs);
    await applyResolverFiles(h.dir, setup, h.ctx);
    assert.equal(fs.readFileSync(join(h.dir, 'corp.k8s'), 'utf8'), theirs);
    assert.ok(h.log.lines.some((l) => l.includes('corp.k8s exists and is not ours')));
    assert.deepEqual(h.state().resolverFiles?.files, ['cluster.local']);
    await revertResolverFiles(h.state().resolverFiles!, h.runner, h.log);
    assert.deepEqual(fs.readdirSync(h.dir).sort(), ['corp.k8s', 'other.vpn']);
    assert.equal(fs.readFileSync(join(h.dir, 'other.vpn'), 'utf8'), theirs);
  });

  test('a file replaced by someone else after we wrote it is left alone on removal', async () => {
    const h = harness();
    await applyResolverFiles(h.dir, setup, h.ctx);
    fs.writeFileSync(join(h.dir, 'cluster.local'), 'nameserver 1.2.3.4\n');
    await revertResolverFiles(h.state().resolverFiles!, h.runner, h.log);
    assert.equal(fs.readFileSync(join(h.dir, 'cluster.local'), 'utf8'), 'nameserver 1.2.3.4\n');
    assert.equal(fs.existsSync(join(h.dir, 'corp.k8s')), false);
  });

  test('a symlink in place of a resolver file is not followed', async () => {
    const h = harness();
    fs.mkdirSync(h.dir, { recursive: true });
    const victim = join(h.dir, '..', 'victim');
    fs.writeFileSync(victim, 'precious\n');
    fs.symlinkSync(victim, join(h.dir, 'cluster.local'));
    await applyResolverFiles(h.dir, setup, h.ctx);
    assert.equal(fs.readFileSync(victim, 'utf8'), 'precious\n');
    assert.ok(fs.lstatSync(join(h.dir, 'cluster.local')).isSymbolicLink());
  });

  test('our own file from a crashed run is rewritten; a sweep removes only marked files', async () => {
    const h = harness();
    fs.mkdirSync(h.dir, { recursive: true });
    fs.writeFileSync(join(h.dir, 'cluster.local'), `${RESOLVER_MARKER}\nnameserver 10.0.0.99\n`);
    fs.writeFileSync(join(h.dir, 'keep.me'), 'nameserver 1.1.1.1\n');
    await applyResolverFiles(h.dir, setup, h.ctx);
    assert.ok(fs.readFileSync(join(h.dir, 'cluster.local'), 'utf8').includes('nameserver 10.96.0.10'));
    await revertResolverFiles({ dir: h.dir, files: [] }, h.runner, h.log);
    assert.deepEqual(fs.readdirSync(h.dir), ['keep.me']);
  });

  test('a bare "local" domain is refused (it would capture mDNS)', async () => {
    const h = harness();
    await applyResolverFiles(h.dir, { ...setup, domains: ['local'] }, h.ctx);
    assert.equal(fs.existsSync(join(h.dir, 'local')), false);
  });
});
