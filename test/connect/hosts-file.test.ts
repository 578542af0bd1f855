import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { UnsafeFileError, type FileOps } from '../../src/sys/atomic-file.js';
import { BLOCK_BEGIN } from '../../src/connect/hosts-block.js';
import { hostsLockPath, syncHostsBlock, type HostsRecord } from '../../src/connect/hosts-file.js';
import { LockTimeoutError, withLock } from '../../src/connect/lock.js';

const ORIGINAL = '127.0.0.1\tlocalhost\n# keep me\n::1 ip6-localhost ip6-loopback';
const ENTRY = '10.96.120.15 backend backend.default backend.default.svc backend.default.svc.cluster.local';

function tempEtc(): string {
  const dir = fs.mkdtempSync(join(tmpdir(), 'connect-hosts-'));
  fs.mkdirSync(join(dir, 'etc'));
  return join(dir, 'etc');
}

function rec(path: string): HostsRecord {
  return { path, addedNewline: false, created: false };
}

describe('hosts file writes', () => {
  test('adds the block, keeps mode and owner, and removal restores the file byte for byte', async () => {
    const etc = tempEtc();
    const hosts = join(etc, 'hosts');
    fs.writeFileSync(hosts, ORIGINAL, { mode: 0o640 });
    fs.chmodSync(hosts, 0o640);
    const root = process.getuid?.() === 0;
    if (root) fs.chownSync(hosts, 4242, 4343);
    const added = await syncHostsBlock(rec(hosts), [ENTRY]);
    assert.equal(added.changed, true);
    assert.equal(added.method, 'rename');
    const text = fs.readFileSync(hosts, 'utf8');
    assert.ok(text.startsWith(ORIGINAL + '\n' + BLOCK_BEGIN + '\n'), text);
    assert.ok(text.includes(ENTRY + '\n'));
    const st = fs.statSync(hosts);
    assert.equal(st.mode & 0o7777, 0o640);
    if (root) assert.deepEqual([st.uid, st.gid], [4242, 4343], 'owner kept');
    await syncHostsBlock(added.record, null);
    assert.equal(fs.readFileSync(hosts, 'utf8'), ORIGINAL);
    assert.deepEqual(fs.readdirSync(etc), ['hosts'], 'no temporary or lock file is left behind');
  });

  test('an unchanged block is not rewritten (same inode)', async () => {
    const etc = tempEtc();
    const hosts = join(etc, 'hosts');
    fs.writeFileSync(hosts, ORIGINAL);
    const first = await syncHostsBlock(rec(hosts), [ENTRY]);
    const ino = fs.statSync(hosts).ino;
    const again = await syncHostsBlock(first.record, [ENTRY]);
    assert.equal(again.changed, false);
    assert.equal(fs.statSync(hosts).ino, ino);
  });

  test('a missing hosts file is created, and removed again when only our block is in it', async () => {
    const etc = tempEtc();
    const hosts = join(etc, 'hosts');
    const out = await syncHostsBlock(rec(hosts), [ENTRY]);
    assert.equal(out.record.created, true);
    await syncHostsBlock(out.record, null);
    assert.equal(fs.existsSync(hosts), false);
  });

  test('when rename fails with EBUSY (a bind-mounted file) it writes in place, never truncating first', async () => {
    const etc = tempEtc();
    const hosts = join(etc, 'hosts');
    fs.writeFileSync(hosts, ORIGINAL);
    const ino = fs.statSync(hosts).ino;
    const busy: FileOps = {
      rename: () => {
        throw Object.assign(new Error('EBUSY: resource busy or locked'), { code: 'EBUSY' });
      },
    };
    const out = await syncHostsBlock(rec(hosts), [ENTRY], { ops: busy });
    assert.equal(out.method, 'in-place');
    assert.equal(fs.statSync(hosts).ino, ino, 'same file, written in place');
    assert.ok(fs.readFileSync(hosts, 'utf8').includes(ENTRY));
    const removed = await syncHostsBlock(out.record, null, { ops: busy });
    assert.equal(removed.method, 'in-place');
    assert.equal(fs.readFileSync(hosts, 'utf8'), ORIGINAL, 'shorter content is truncated to its length');
    assert.deepEqual(fs.readdirSync(etc), ['hosts']);
  });

  test('other rename errors are reported and leave the file untouched', async () => {
    const etc = tempEtc();
    const hosts = join(etc, 'hosts');
    fs.writeFileSync(hosts, ORIGINAL);
    const failing: FileOps = {
      rename: () => {
        throw Object.assign(new Error('EIO'), { code: 'EIO' });
      },
    };
    await assert.rejects(syncHostsBlock(rec(hosts), [ENTRY], { ops: failing }), /EIO/);
    assert.equal(fs.readFileSync(hosts, 'utf8'), ORIGINAL);
    assert.deepEqual(fs.readdirSync(etc), ['hosts']);
  });

  test(
    'a really bind-mounted hosts file (as in Docker) is updated in place',
    { skip: !canUnshareMount() && 'needs unshare --mount' },
    () => {
      const etc = tempEtc();
      const hosts = join(etc, 'hosts');
      const source = join(etc, '..', 'hosts.source');
      fs.writeFileSync(hosts, 'placeholder\n');
      fs.writeFileSync(source, ORIGINAL);
      const main = resolve('dist/test/connect/hosts-write-main.js');
      const script = 'mount --bind "$1" "$2" && "$3" "$4" "$2" "$5" && cat "$2"';
      const r = spawnSync(
        'unshare',
        ['--mount', 'sh', '-c', script, 'sh', source, hosts, process.execPath, main, JSON.stringify([ENTRY])],
        { encoding: 'utf8' },
      );
      assert.equal(r.status, 0, r.stderr);
      assert.equal(r.stdout, `in-place\nin-place\n${ORIGINAL}`);
      assert.equal(fs.readFileSync(source, 'utf8'), ORIGINAL);
    },
  );

  test('a symlink to a file in the same directory is followed and stays a symlink', async () => {
    const etc = tempEtc();
    fs.writeFileSync(join(etc, 'hosts.real'), ORIGINAL);
    fs.symlinkSync('hosts.real', join(etc, 'hosts'));
    await syncHostsBlock(rec(join(etc, 'hosts')), [ENTRY]);
    assert.ok(fs.lstatSync(join(etc, 'hosts')).isSymbolicLink());
    assert.ok(fs.readFileSync(join(etc, 'hosts.real'), 'utf8').includes(ENTRY));
  });

  test('a symlink out of its directory is refused and nothing is written', async () => {
    const etc = tempEtc();
    const outside = join(etc, '..', 'elsewhere');
    fs.writeFileSync(outside, ORIGINAL);
    fs.symlinkSync(outside, join(etc, 'hosts'));
    await assert.rejects(syncHostsBlock(rec(join(etc, 'hosts')), [ENTRY]), UnsafeFileError);
    assert.equal(fs.readFileSync(outside, 'utf8'), ORIGINAL);
  });

  test('a file with an unterminated block is left alone', async () => {
    const etc = tempEtc();
    const hosts = join(etc, 'hosts');
    const text = `${ORIGINAL}\n${BLOCK_BEGIN}\n10.0.0.1 x\n`;
    fs.writeFileSync(hosts, text);
    await assert.rejects(syncHostsBlock(rec(hosts), [ENTRY]), /never closed/);
    assert.equal(fs.readFileSync(hosts, 'utf8'), text);
  });
});

describe('hosts lock', () => {
  test('a second writer waits for the first', async () => {
    const etc = tempEtc();
    const lock = join(etc, 'x.lock');
    const order: string[] = [];
    let release!: () => void;
    const first = withLock(lock, () => {
      order.push('first in');
      return new Promise<void>((r) => (release = r)).then(() => order.push('first out'));
    });
    await new Promise((r) => setTimeout(r, 20));
    const second = withLock(lock, () => void order.push('second in'));
    await new Promise((r) => setTimeout(r, 100));
    assert.deepEqual(order, ['first in']);
    release();
    await Promise.all([first, second]);
    assert.deepEqual(order, ['first in', 'first out', 'second in']);
    assert.equal(fs.existsSync(lock), false);
  });

  test('a lock held by a live process times out with its pid', async () => {
    const etc = tempEtc();
    const lock = join(etc, 'x.lock');
    const holder = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 30000)']);
    try {
      fs.writeFileSync(lock, `${holder.pid}\n`);
      await assert.rejects(
        withLock(lock, () => undefined, { timeoutMs: 200 }),
        (err: Error) => err instanceof LockTimeoutError && err.message.includes(`pid ${holder.pid}`),
      );
    } finally {
      holder.kill('SIGKILL');
    }
  });

  test('a stale lock of a dead process is taken over', async () => {
    const etc = tempEtc();
    const hosts = join(etc, 'hosts');
    fs.writeFileSync(hosts, ORIGINAL);
    const dead = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' });
    fs.writeFileSync(hostsLockPath(hosts), `${dead.stdout}\n`);
    await syncHostsBlock(rec(hosts), [ENTRY], {});
    assert.ok(fs.readFileSync(hosts, 'utf8').includes(ENTRY));
    assert.equal(fs.existsSync(hostsLockPath(hosts)), false);
  });
});

function canUnshareMount(): boolean {
  if (process.platform !== 'linux') return false;
  return spawnSync('unshare', ['--mount', 'true']).status === 0;
}
