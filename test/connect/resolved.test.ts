// The Linux backend against a resolvectl stand-in (argument vectors and per-link state recorded).
// test/e2e/connect-resolved.test.ts runs the same path against a real systemd-resolved.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execRunner, type CommandRunner } from '../../src/sys/exec.js';
import {
  applyResolved,
  parseLinkValues,
  reapplyResolved,
  resolvectlApplyArgs,
  revertResolved,
} from '../../src/connect/resolved.js';
import type { ConnectState } from '../../src/connect/state.js';
import { parseServer } from '../../src/connect/flags.js';
import type { DnsSetup } from '../../src/connect/dns-setup.js';
import { FakeResolved } from './fake-resolvectl.js';
import { memoryLog } from './memory-log.js';

const setup: DnsSetup = {
  server: parseServer('10.250.0.53:5353'),
  domains: ['cluster.local'],
  search: ['default.svc.cluster.local', 'svc.cluster.local', 'cluster.local'],
};

/** Runs programs from the fake's bin only; anything else is "not installed" (exit 127). */
function fakeRunner(fake: FakeResolved): CommandRunner & { ran: string[][] } {
  const ran: string[][] = [];
  const run: CommandRunner = async (file, args) => {
    ran.push([file, ...args]);
    const p = join(fake.bin, file);
    if (!fs.existsSync(p)) return { code: 127, stdout: '', stderr: `${file}: not found` };
    return execRunner(p, args);
  };
  return Object.assign(run, { ran });
}

function harness(links?: Record<string, number>, routeDev?: string) {
  const fake = new FakeResolved(fs.mkdtempSync(join(tmpdir(), 'connect-resolved-')), links, routeDev);
  const runner = fakeRunner(fake);
  const log = memoryLog();
  const records: Array<Partial<ConnectState>> = [];
  return {
    fake,
    runner,
    log,
    records,
    ctx: { runner, log, record: (p: Partial<ConnectState>) => void records.push(p) },
  };
}

describe('systemd-resolved backend (resolvectl stand-in)', () => {
  test('configures the link that reaches the server: server with port, search and routing domains, default route off', async () => {
    const h = harness({ kdns0: 3, eth0: 2 });
    assert.equal(await applyResolved(setup, h.ctx), true);
    assert.deepEqual(
      h.runner.ran.find((c) => c[0] === 'ip'),
      ['ip', 'route', 'get', '10.250.0.53'],
    );
    assert.deepEqual(h.fake.changes(), [
      ['dns', 'kdns0', '10.250.0.53:5353'],
      ['domain', 'kdns0', 'default.svc.cluster.local', 'svc.cluster.local', 'cluster.local'],
      ['default-route', 'kdns0', 'false'],
    ]);
    assert.deepEqual(
      h.fake.link('eth0'),
      { index: 2, dns: [], domains: [], defaultRoute: null },
      'other links untouched',
    );
    assert.deepEqual(
      h.records,
      [
        {
          resolved: {
            link: 'kdns0',
            server: '10.250.0.53:5353',
            domains: ['default.svc.cluster.local', 'svc.cluster.local', 'cluster.local'],
          },
        },
      ],
      'the undo record is written before the change',
    );
    await revertResolved(h.records[0]!.resolved, h.runner, h.log);
    assert.deepEqual(h.fake.link('kdns0'), { index: 3, dns: [], domains: [], defaultRoute: null });
    assert.deepEqual(h.fake.changes().at(-1), ['revert', 'kdns0']);
  });

  test('cluster domains not in the search list are routing-only (~domain)', () => {
    const args = resolvectlApplyArgs(
      'tun0',
      { ...setup, server: parseServer('10.96.0.10'), domains: ['cluster.local', 'corp.k8s'] },
      ['default.svc.cluster.local'],
    );
    assert.deepEqual(args, [
      ['dns', 'tun0', '10.96.0.10'],
      ['domain', 'tun0', 'default.svc.cluster.local', '~cluster.local', '~corp.k8s'],
      ['default-route', 'tun0', 'false'],
    ]);
    assert.deepEqual(resolvectlApplyArgs('tun0', { ...setup, server: parseServer('[fd00::10]:5353') }, [])[0], [
      'dns',
      'tun0',
      '[fd00::10]:5353',
    ]);
  });

  test('a search domain outside the cluster domains is left out with a warning', async () => {
    const h = harness();
    await applyResolved({ ...setup, search: ['default.svc.cluster.local', 'corp.example.com'] }, h.ctx);
    assert.deepEqual(h.fake.link().domains, ['default.svc.cluster.local', '~cluster.local']);
    assert.ok(h.log.lines.some((l) => l.includes('corp.example.com is not inside cluster.local')));
  });

  test('--interface overrides the route lookup', async () => {
    const h = harness({ kdns0: 3, tun7: 9 });
    await applyResolved({ ...setup, interface: 'tun7' }, h.ctx);
    assert.equal(
      h.runner.ran.some((c) => c[0] === 'ip'),
      false,
    );
    assert.deepEqual(h.fake.link('tun7').dns, ['10.250.0.53:5353']);
  });

  test('a link with DNS settings of its own is not touched', async () => {
    const h = harness({ eth0: 2 }, 'eth0');
    h.fake.setLink('eth0', ['192.168.1.1'], ['home.arpa']);
    assert.equal(await applyResolved(setup, h.ctx), false);
    assert.deepEqual(h.fake.changes(), []);
    assert.deepEqual(h.records, []);
    assert.ok(
      h.log.lines.some((l) => l.includes('already has DNS settings') && l.includes('192.168.1.1')),
      h.log.lines.join('\n'),
    );
  });

  test('our own settings left by a crash are taken over, not refused', async () => {
    const h = harness();
    await applyResolved(setup, h.ctx);
    assert.equal(await applyResolved(setup, h.ctx), true);
  });

  test('the loopback device is refused with a clear warning', async () => {
    const h = harness({ lo: 1 }, 'lo');
    assert.equal(await applyResolved(setup, h.ctx), false);
    assert.ok(h.log.lines.some((l) => l.includes('loopback')));
    assert.deepEqual(h.fake.changes(), []);
  });

  test('resolved not running: a warning and no change', async () => {
    const h = harness();
    h.fake.setDown(true);
    assert.equal(await applyResolved(setup, h.ctx), false);
    assert.ok(
      h.log.lines.some((l) => l.includes('systemd-resolved did not answer')),
      h.log.lines.join('\n'),
    );
    assert.deepEqual(h.records, []);
  });

  test('resolvectl not installed: names the other managers found and changes nothing', async () => {
    const h = harness();
    fs.rmSync(join(h.fake.bin, 'resolvectl'));
    fs.writeFileSync(join(h.fake.bin, 'nmcli'), '#!/bin/sh\necho "nmcli tool, version 1.42"\n', { mode: 0o755 });
    assert.equal(await applyResolved(setup, h.ctx), false);
    const warning = h.log.lines.find((l) => l.includes('no systemd-resolved on this machine (resolvectl not found)'));
    assert.ok(warning?.includes('NetworkManager is here, but would make the cluster server'), h.log.lines.join('\n'));
    // What does work without it: the hosts block only with --routes, else a split-DNS rule of one's own.
    assert.ok(
      warning?.includes(
        'without --routes (the /etc/hosts block of cluster Services) nothing on this machine resolves cluster names',
      ),
      warning,
    );
    assert.match(warning!, /dnsmasq: server=\/cluster\.local\/10\.250\.0\.53/);
    const withRoutes = harness();
    fs.rmSync(join(withRoutes.fake.bin, 'resolvectl'));
    await applyResolved({ ...setup, hostsBlock: true }, withRoutes.ctx);
    assert.ok(
      withRoutes.log.lines.some((l) =>
        l.includes('cluster Service names resolve only through the /etc/hosts block kept from --routes'),
      ),
      withRoutes.log.lines.join('\n'),
    );
    assert.equal(
      h.runner.ran.some((c) => c[0] === 'nmcli' && c[1] !== '--version'),
      false,
      'only asked for its version',
    );
  });

  test('a failing step is undone at once', async () => {
    const h = harness();
    const failing: CommandRunner = async (file, args) =>
      file === 'resolvectl' && args[0] === 'default-route'
        ? { code: 1, stdout: '', stderr: 'Access denied' }
        : h.runner(file, args);
    assert.equal(await applyResolved(setup, { ...h.ctx, runner: failing }), false);
    assert.deepEqual(h.fake.link(), { index: 3, dns: [], domains: [], defaultRoute: null });
    assert.deepEqual(
      h.records.map((r) => r.resolved?.link),
      ['kdns0', undefined],
    );
  });

  test('settings lost by a resolved restart are applied again; a link taken over by another manager is left to it', async () => {
    const h = harness();
    await applyResolved(setup, h.ctx);
    const record = h.records[0]!.resolved!;
    h.fake.setLink('kdns0', [], []);
    assert.equal(await reapplyResolved(record, h.runner, h.log), true);
    assert.deepEqual(h.fake.link(), {
      index: 3,
      dns: ['10.250.0.53:5353'],
      domains: ['default.svc.cluster.local', 'svc.cluster.local', 'cluster.local'],
      defaultRoute: false,
    });
    assert.ok(h.log.lines.some((l) => l.includes('applied them again')));
    const before = h.fake.changes().length;
    assert.equal(await reapplyResolved(record, h.runner, h.log), true);
    assert.equal(h.fake.changes().length, before, 'nothing to do while our settings are there');
    h.fake.setLink('kdns0', ['192.168.1.1'], ['lan']);
    assert.equal(await reapplyResolved(record, h.runner, h.log), false);
    await revertResolved(record, h.runner, h.log);
    assert.deepEqual(h.fake.link().dns, ['192.168.1.1'], 'never reverts settings that are not ours');
    assert.equal(
      h.fake.changes().some((c) => c[0] === 'revert'),
      false,
    );
  });

  test('parses resolvectl per-link output', () => {
    assert.deepEqual(parseLinkValues('Link 3 (kdns0): 10.250.0.53:5353 fd00::1\n'), ['10.250.0.53:5353', 'fd00::1']);
    assert.deepEqual(parseLinkValues('Link 3 (kdns0):\n'), []);
    assert.deepEqual(parseLinkValues('Global: 1.1.1.1\nLink 2 (eth0): ~.\n'), ['~.']);
  });
});
