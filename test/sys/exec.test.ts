// The one command runner of nodecache and connect: no shell, failures as values.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execRunner, execRunnerSync, formatCommand, runnerWithTimeout } from '../../src/sys/exec.js';

describe('command runner', () => {
  test('a program that is not installed is exit 127, as a shell says, from both runners', async () => {
    const r = await execRunner('clusterdns-no-such-program', ['x']);
    assert.equal(r.code, 127);
    assert.match(r.stderr, /clusterdns-no-such-program: not installed/);
    assert.equal(execRunnerSync('clusterdns-no-such-program', []).code, 127);
  });

  test('input goes to stdin, arguments are never shell syntax, the exit status is kept', async () => {
    const r = await execRunner('sh', ['-c', 'cat; echo "$1"; exit 3', 'sh', '$(id); echo hi'], 'from stdin\n');
    assert.equal(r.code, 3);
    assert.equal(r.stdout, 'from stdin\n$(id); echo hi\n');
  });

  test('a command past its timeout is killed and reported as -1', async () => {
    const r = await runnerWithTimeout(200)('sleep', ['5']);
    assert.equal(r.code, -1);
  });

  test('log lines quote what a shell would split', () => {
    assert.equal(
      formatCommand('resolvectl', ['domain', 'eth0', '~cluster.local']),
      'resolvectl domain eth0 ~cluster.local',
    );
    assert.equal(formatCommand('sh', ['-c', "echo 'a b'"]), `sh -c 'echo '\\''a b'\\'''`);
  });
});
