// An upstream with no route to it (connect fails at once) must give SERVFAIL, not a crash.
// Runs inside a network namespace the test creates with only loopback, so nothing leaves it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BIN } from '../helpers/server.js';

function canUseNetns(): boolean {
  try {
    execFileSync('ip', ['netns', 'list'], { stdio: 'ignore' });
    return process.getuid?.() === 0;
  } catch {
    return false;
  }
}

test(
  'a forward upstream with no route gets SERVFAIL and the server keeps running',
  { skip: !canUseNetns() && 'needs root and ip netns', timeout: 30000 },
  async () => {
    const ns = `cdns-noroute-${process.pid}`;
    execFileSync('ip', ['netns', 'add', ns]);
    try {
      execFileSync('ip', ['netns', 'exec', ns, 'ip', 'link', 'set', 'lo', 'up']);
      const dir = mkdtempSync(join(tmpdir(), 'clusterdns-noroute-'));
      writeFileSync(
        join(dir, 'Corefile'),
        `.:1053 {\n bind 127.0.0.1\n errors\n forward . 10.255.255.1 {\n max_fails 0\n }\n}\n`,
      );
      const p = spawn(
        'ip',
        ['netns', 'exec', ns, process.execPath, BIN, '-conf', join(dir, 'Corefile'), '-workers', '1'],
        { stdio: ['ignore', 'pipe', 'pipe'] },
      );
      let out = '';
      p.stdout.on('data', (d) => (out += d));
      p.stderr.on('data', (d) => (out += d));
      try {
        for (let i = 0; i < 50 && !/clusterdns-\d/.test(out); i++) await new Promise((r) => setTimeout(r, 100));
        const dig = (name: string) =>
          execFileSync('ip', ['netns', 'exec', ns, 'dig', '@127.0.0.1', '-p', '1053', '+tries=1', '+time=8', name], {
            encoding: 'utf8',
          });
        for (const name of ['a.example.', 'b.example.']) assert.match(dig(name), /status: SERVFAIL/);
        assert.equal(p.exitCode, null, `the server exited:\n${out}`);
        for (let i = 0; i < 30 && !/plugin\/errors: 2 a\.example\. A/.test(out); i++)
          await new Promise((r) => setTimeout(r, 100));
        assert.match(
          out,
          /\[ERROR\] plugin\/errors: 2 a\.example\. A: read udp ->10\.255\.255\.1:53: network is unreachable/,
        );
      } finally {
        p.kill('SIGTERM');
        await new Promise((r) => p.on('exit', r));
      }
    } finally {
      execFileSync('ip', ['netns', 'del', ns]);
    }
  },
);
