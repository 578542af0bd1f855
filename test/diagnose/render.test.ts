// The terminal report: colour only for a TTY without NO_COLOR; the parts a reader looks for.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { diagnose, parseDiagnoseArgs, parseServerFlag } from '../../src/diagnose/command.js';
import { renderText, wantColour } from '../../src/diagnose/render.js';
import type { DiagnoseReport } from '../../src/diagnose/report.js';
import { startFakeDns, type FakeDns } from './fakedns.js';

describe('terminal output', () => {
  let dns: FakeDns;
  let resolved: DiagnoseReport;
  let missing: DiagnoseReport;
  const dir = mkdtempSync(join(tmpdir(), 'diagnose-render-'));
  before(async () => {
    dns = await startFakeDns([{ match: '^web\\.default\\.svc\\.cluster\\.local\\.$', reply: { A: '10.96.1.1' } }]);
    const conf = join(dir, 'resolv.conf');
    writeFileSync(
      conf,
      'search default.svc.cluster.local svc.cluster.local cluster.local\nnameserver 10.96.0.10\noptions ndots:5 bogus\n',
    );
    const opts = (name: string) => {
      const o = parseDiagnoseArgs([name, '--resolv-conf', conf, '--server', `127.0.0.1:${dns.port}`]);
      assert.notEqual(o, 'help');
      return o as Exclude<typeof o, 'help' | 'version'>;
    };
    resolved = await diagnose(opts('web'), {});
    missing = await diagnose(opts('nope'), {});
  });
  after(async () => {
    await dns.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('colour only when stdout is a TTY and NO_COLOR is not set', () => {
    assert.equal(wantColour(true, {}), true);
    assert.equal(wantColour(true, { NO_COLOR: '1' }), false);
    assert.equal(wantColour(false, {}), false);
    assert.equal(wantColour(undefined, {}), false);
    assert.ok(renderText(resolved, true).includes('\x1b[32mRESOLVED\x1b[0m'), 'RESOLVED in green');
    assert.ok(!renderText(resolved, false).includes('\x1b['), 'no colour escapes');
  });

  test('a resolved name: the settings, the answering candidate with its records, the verdict', () => {
    const text = renderText(resolved, false);
    assert.match(text, /nameserver 10\.96\.0\.10/);
    assert.match(text, /options {4}ndots:5 timeout:5 attempts:2/);
    assert.match(text, /! line 3: unknown option "bogus": ignored/);
    assert.match(text, /1\. web\.default\.svc\.cluster\.local\./);
    assert.match(text, /A {5}NOERROR {3}10\.96\.1\.1/);
    assert.match(text, /AAAA {2}NOERROR {3}\(no records\)/);
    assert.match(text, /not asked: an earlier name was answered/);
    assert.match(text, /Verdict: RESOLVED {2}web resolves to 10\.96\.1\.1/);
  });

  test('a failure: what the application sees and what to check next', () => {
    const text = renderText(missing, false);
    assert.match(text, /Verdict: NXDOMAIN/);
    assert.match(text, /the application sees: EAI_NONAME "Name or service not known" \(h_errno HOST_NOT_FOUND\)/);
    assert.match(text, /Next\n {2}- check the Service name and namespace/);
  });

  test('--server takes IP, IP:PORT, [IPv6]:PORT and a bare IPv6 address', () => {
    assert.equal(parseServerFlag('10.96.0.10').label, '10.96.0.10:53');
    assert.equal(parseServerFlag('127.0.0.1:1053').label, '127.0.0.1:1053');
    assert.equal(parseServerFlag('[fd00::a]:5353').label, '[fd00::a]:5353');
    assert.equal(parseServerFlag('fd00::a').label, '[fd00::a]:53');
    assert.throws(() => parseServerFlag('dns.example:53'), /not an IP address/);
    assert.throws(() => parseServerFlag('10.0.0.1:99999'), /invalid port/);
  });
});
