// Windows backend: the PowerShell it generates, recorded instead of run.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { recordingRunner, type CommandRunner } from '../../src/sys/exec.js';
import { parseServer } from '../../src/connect/flags.js';
import type { ConnectState } from '../../src/connect/state.js';
import type { DnsSetup } from '../../src/connect/dns-setup.js';
import {
  applyScript,
  applyWindows,
  inspectScript,
  parseInspection,
  planWindows,
  POWERSHELL,
  powershellArgs,
  psQuote,
  revertScript,
  revertWindows,
  scriptOf,
} from '../../src/connect/windows-dns.js';
import { memoryLog } from './memory-log.js';

const setup: DnsSetup = {
  server: parseServer('10.96.0.10'),
  domains: ['cluster.local'],
  search: ['default.svc.cluster.local', 'svc.cluster.local', 'cluster.local'],
};

describe('Windows NRPT and interface DNS through PowerShell', () => {
  test('quotes values as single-quoted literals, doubling every kind of single quote', () => {
    assert.equal(psQuote('cluster.local'), "'cluster.local'");
    assert.equal(psQuote("a'b"), "'a''b'");
    assert.equal(
      psQuote('x\u2019; Remove-Item C:\\ -Recurse; \u2018'),
      "'x\u2019\u2019; Remove-Item C:\\ -Recurse; \u2018\u2018'",
    );
    assert.equal(
      psQuote('$(Get-Process) `n "q"'),
      '\'$(Get-Process) `n "q"\'',
      '$, backtick and " are inert inside single quotes',
    );
  });

  test('scripts travel base64 UTF-16LE in -EncodedCommand, so no command line is parsed', () => {
    const args = powershellArgs("Write-Output 'hi'");
    assert.deepEqual(args.slice(0, 5), [
      '-NoProfile',
      '-NonInteractive',
      '-ExecutionPolicy',
      'Bypass',
      '-EncodedCommand',
    ]);
    assert.equal(Buffer.from(args[5]!, 'base64').toString('utf16le'), "Write-Output 'hi'");
    assert.equal(scriptOf(args), "Write-Output 'hi'");
  });

  test('adds one NRPT rule per cluster domain, sets the tun interface DNS, and puts cluster suffixes first', () => {
    const found = parseInspection('{"interfaceIndex":17,"servers":[],"suffixSearchList":["corp.example.com"]}');
    const { plan, record } = planWindows(setup, setup.search, found);
    assert.equal(
      applyScript(plan),
      [
        "$ErrorActionPreference = 'Stop'",
        "Get-DnsClientNrptRule | Where-Object { $_.Comment -eq 'clusterdns' } | Remove-DnsClientNrptRule -Force",
        "Add-DnsClientNrptRule -Namespace '.cluster.local' -NameServers '10.96.0.10' -Comment 'clusterdns'",
        "Set-DnsClientServerAddress -InterfaceIndex 17 -ServerAddresses @('10.96.0.10')",
        "Set-DnsClientGlobalSetting -SuffixSearchList @('default.svc.cluster.local', 'svc.cluster.local', 'cluster.local', 'corp.example.com')",
        'Clear-DnsClientCache',
      ].join('\n'),
    );
    assert.deepEqual(record, {
      nrptComment: 'clusterdns',
      interfaceDns: { interfaceIndex: 17, previous: [] },
      addedSuffixes: ['default.svc.cluster.local', 'svc.cluster.local', 'cluster.local'],
    });
    assert.equal(
      revertScript(record),
      [
        "$ErrorActionPreference = 'Continue'",
        "Get-DnsClientNrptRule | Where-Object { $_.Comment -eq 'clusterdns' } | Remove-DnsClientNrptRule -Force",
        'Set-DnsClientServerAddress -InterfaceIndex 17 -ResetServerAddresses',
        "$ours = @('default.svc.cluster.local', 'svc.cluster.local', 'cluster.local')",
        'Set-DnsClientGlobalSetting -SuffixSearchList @(@((Get-DnsClientGlobalSetting).SuffixSearchList) | Where-Object { $ours -notcontains $_ })',
        'Clear-DnsClientCache',
      ].join('\n'),
    );
  });

  test('an interface with its own DNS servers keeps them; suffixes already there are not ours to remove', () => {
    const found = parseInspection(
      '{"interfaceIndex":4,"servers":["192.168.1.1","fe80::1"],"suffixSearchList":"svc.cluster.local"}',
    );
    const { plan, record } = planWindows(setup, setup.search, found);
    assert.equal(plan.interfaceIndex, null);
    assert.equal(record.interfaceDns, null);
    assert.deepEqual(record.addedSuffixes, ['default.svc.cluster.local', 'cluster.local']);
    assert.doesNotMatch(applyScript(plan), /Set-DnsClientServerAddress/);
    assert.doesNotMatch(revertScript(record), /Set-DnsClientServerAddress/);
  });

  test('the inspection script finds the interface by route and reads both address families', () => {
    const s = inspectScript('fd00::10');
    assert.match(s, /Find-NetRoute -RemoteIPAddress 'fd00::10'/);
    assert.match(s, /Get-DnsClientServerAddress -InterfaceIndex \$index \|/, 'no -AddressFamily: IPv4 and IPv6 both');
    assert.match(s, /ConvertTo-Json -Compress$/);
  });

  test('applyWindows inspects, records the undo, then applies; revert runs the removal script', async () => {
    const ran: string[] = [];
    const runner: CommandRunner = async (file, args) => {
      assert.equal(file, POWERSHELL);
      const script = scriptOf(args);
      ran.push(script);
      return {
        code: 0,
        stdout: script.includes('ConvertTo-Json') ? '{"interfaceIndex":12,"servers":null,"suffixSearchList":[]}' : '',
        stderr: '',
      };
    };
    const log = memoryLog();
    const records: Array<Partial<ConnectState>> = [];
    assert.equal(await applyWindows(setup, { runner, log, record: (p) => void records.push(p) }), true);
    assert.equal(ran.length, 2);
    assert.match(ran[1]!, /Add-DnsClientNrptRule -Namespace '\.cluster\.local'/);
    assert.match(ran[1]!, /Set-DnsClientServerAddress -InterfaceIndex 12 /);
    assert.equal(records[0]?.windows?.interfaceDns?.interfaceIndex, 12);
    await revertWindows(records[0].windows, runner, log);
    assert.match(ran[2]!, /Remove-DnsClientNrptRule -Force/);
  });

  test('a port other than 53 cannot be used by the Windows DNS client: warning, nothing run', async () => {
    const ran: string[][] = [];
    const log = memoryLog();
    const ok = await applyWindows(
      { ...setup, server: parseServer('10.96.0.10:5353') },
      { runner: recordingRunner((f, a) => void ran.push([f, ...a])), log, record: () => {} },
    );
    assert.equal(ok, false);
    assert.deepEqual(ran, []);
    assert.ok(log.lines.some((l) => l.includes('only uses port 53')));
  });

  test('unparseable inspection output is treated as nothing known', () => {
    assert.deepEqual(parseInspection('WARNING: something'), { interfaceIndex: 0, servers: [], suffixSearchList: [] });
    assert.deepEqual(parseInspection('{"interfaceIndex":"1; rm"}'), {
      interfaceIndex: 0,
      servers: [],
      suffixSearchList: [],
    });
  });
});
