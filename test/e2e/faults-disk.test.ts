// A full disk when clusterdns writes state: the nodecache agent writing its generated Corefile,
// and `connect` writing its /etc/hosts block (the rename path, and the in-place path of a
// bind-mounted file as in Docker). Each runs in a private mount namespace (`unshare --mount`)
// over a tiny tmpfs; a running process's tmpfs is reached through /proc/PID/root.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { BIN } from '../helpers/server.js';
import { freePort } from '../helpers/ports.js';
import { query } from '../helpers/dns.js';
import { QType } from '../../src/dns/constants.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function canMountTmpfs(): boolean {
  if (process.platform !== 'linux') return false;
  const probe = 'd=$(mktemp -d) && mount -t tmpfs -o size=4k tmpfs "$d" && umount "$d"; r=$?; rmdir "$d"; exit $r';
  return spawnSync('unshare', ['--mount', 'sh', '-c', probe]).status === 0;
}
const skip = !canMountTmpfs() && 'needs unshare --mount and tmpfs mounts (root)';

interface Run {
  pid: number;
  output(): string;
  waitFor(re: RegExp, ms: number): Promise<void>;
  exited: Promise<number | null>;
  stop(): Promise<number | null>;
}

/**
 * Runs `argv` in a new mount namespace where `disk` is a tmpfs of `sizeKb`, after the shell
 * `setup` (which sees the tmpfs as "$d"). With `exec`, argv replaces the shell (same pid);
 * without, the shell prints `exit=N` and `left: FILES` on the tmpfs afterwards.
 */
function inTmpfs(
  disk: string,
  sizeKb: number,
  setup: string,
  argv: string[],
  exec: boolean,
  env: Record<string, string> = {},
): Run {
  const after = exec ? 'exec "$@"' : '"$@"; echo "exit=$?"; echo "left: $(ls -A "$d" | tr "\\n" " ")"';
  const script = `d="$1"; shift; mount -t tmpfs -o size=${sizeKb}k tmpfs "$d" || exit 97; ${setup}; ${after}`;
  const child = spawn('unshare', ['--mount', 'sh', '-c', script, 'sh', disk, ...argv], {
    env: { ...process.env, CLUSTERDNS_EXIT_WITH_PARENT: '1', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  let code: number | null | undefined;
  const exited = new Promise<number | null>((r) => child.on('exit', (c) => r((code = c))));
  return {
    pid: child.pid!,
    output: () => out,
    exited,
    async waitFor(re, ms) {
      const end = Date.now() + ms;
      while (!re.test(out)) {
        if (code !== undefined || Date.now() > end) assert.fail(`no ${re} (exit ${code}):\n${out}`);
        await sleep(50);
      }
    },
    async stop() {
      if (code !== undefined) return code;
      child.kill('SIGTERM');
      const t = setTimeout(() => child.kill('SIGKILL'), 10_000);
      const c = await exited;
      clearTimeout(t);
      return c;
    },
  };
}

function nodecacheArgs(dir: string, disk: string, port: number): string[] {
  return [
    process.execPath,
    BIN,
    'nodecache',
    '-localip',
    '127.0.0.1',
    '-setupinterface=false',
    '-setupiptables=false',
    '-metrics-listen-address',
    '',
    '-basecorefile',
    join(dir, 'template'),
    '-conf',
    join(disk, 'Corefile'),
    '-dns.port',
    String(port),
    '-upstreamsvc',
    'kube-dns-upstream',
    '-resolvconf',
    join(dir, 'resolv.conf'),
  ];
}

const NODECACHE_ENV = { KUBE_DNS_UPSTREAM_SERVICE_HOST: '127.0.0.1' };

function writeTemplate(dir: string, port: number, ip: string): void {
  writeFileSync(
    join(dir, 'template'),
    `.:${port} {\n    bind __PILLAR__LOCAL__DNS__\n    hosts {\n        ${ip} a.example\n    }\n}\n`,
  );
}

async function addressOf(port: number): Promise<string | null> {
  const m = await query(port, 'a.example.', QType.A, { timeoutMs: 1000 }).catch(() => null);
  const a = m?.answers.find((r) => r.type === QType.A);
  return a ? (a.data as { address: string }).address : null;
}

function scratch(): { dir: string; disk: string } {
  const dir = mkdtempSync(join(tmpdir(), 'clusterdns-disk-'));
  const disk = join(dir, 'disk');
  mkdirSync(disk);
  writeFileSync(join(dir, 'resolv.conf'), 'nameserver 127.0.0.1\n');
  return { dir, disk };
}

const FILL = 'dd if=/dev/zero of="$d/filler" bs=4k count=64 2>/dev/null';

describe('a full disk while writing state', { skip }, () => {
  test(
    'nodecache cannot write its Corefile at start: exit 1 naming the file and ENOSPC, no temporary file left',
    { timeout: 30_000 },
    async () => {
      const { dir, disk } = scratch();
      try {
        const port = await freePort();
        writeTemplate(dir, port, '10.0.0.1');
        const run = inTmpfs(disk, 16, FILL, nodecacheArgs(dir, disk, port), false, NODECACHE_ENV);
        await run.exited;
        assert.match(
          run.output(),
          /\[FATAL\] nodecache: cannot write \S+\/disk\/Corefile: ENOSPC: no space left on device/,
        );
        assert.match(run.output(), /^exit=1$/m);
        assert.match(run.output(), /^left: filler $/m, 'only the filler: no half-written temporary file');
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  );

  test(
    'nodecache regenerating its Corefile on a full disk: the error is logged, the running configuration serves on, and it is written once there is room',
    { timeout: 40_000 },
    async () => {
      const { dir, disk } = scratch();
      const port = await freePort();
      writeTemplate(dir, port, '10.0.0.1');
      const run = inTmpfs(disk, 64, 'true', nodecacheArgs(dir, disk, port), true, NODECACHE_ENV);
      try {
        await run.waitFor(/ready: serving DNS/, 15_000);
        assert.equal(await addressOf(port), '10.0.0.1');
        const view = `/proc/${run.pid}/root${disk}`;
        assert.deepEqual(readdirSync(view), ['Corefile']);
        // Fill the agent's disk from outside its namespace, then change the template.
        spawnSync('dd', ['if=/dev/zero', `of=${view}/filler`, 'bs=4k', 'count=64'], { stdio: 'ignore' });
        writeTemplate(dir, port, '10.0.0.2');
        await run.waitFor(
          /\[ERROR\] nodecache: cannot regenerate \S+\/disk\/Corefile: ENOSPC: no space left on device.*still serving the previous configuration/,
          10_000,
        );
        for (let i = 0; i < 10; i++) assert.equal(await addressOf(port), '10.0.0.1');
        assert.deepEqual(readdirSync(view).sort(), ['Corefile', 'filler'], 'no temporary file left behind');
        rmSync(`${view}/filler`);
        await run.waitFor(/changed; wrote \S+\/disk\/Corefile, reloading/, 10_000);
        let ip: string | null = null;
        for (let i = 0; i < 50 && ip !== '10.0.0.2'; i++) {
          ip = await addressOf(port);
          await sleep(100);
        }
        assert.equal(ip, '10.0.0.2', 'the regenerated Corefile was written and loaded once the disk had room');
        assert.equal(await run.stop(), 0);
      } finally {
        await run.stop();
        rmSync(dir, { recursive: true, force: true });
      }
    },
  );

  test(
    "connect on a disk with no block left: the lock's pid cannot be written, ENOSPC is reported, and no empty lock file stays behind",
    { timeout: 30_000 },
    () => {
      const { dir, disk } = scratch();
      try {
        const setup = [
          `mkdir "$d/etc" && printf '127.0.0.1 localhost\\n' > "$d/etc/hosts"`,
          `dd if=/dev/zero of="$d/filler" bs=4k count=$(( $(df -B4k --output=avail "$d" | tail -1) )) 2>/dev/null; true`,
        ].join(' && ');
        const entries = JSON.stringify(['10.96.0.1 a.default.svc.cluster.local a.default']);
        const r = spawnSync(
          'unshare',
          [
            '--mount',
            'sh',
            '-c',
            `d="$1"; mount -t tmpfs -o size=64k tmpfs "$d" && ${setup} || exit 97; "$2" "$3" "$d/etc/hosts" "$4"; echo "exit=$?"; echo "etc: $(ls -A "$d/etc" | tr "\\n" " ")"`,
            'sh',
            disk,
            process.execPath,
            resolve('dist/test/connect/hosts-write-main.js'),
            entries,
          ],
          { env: process.env, encoding: 'utf8' },
        );
        assert.notEqual(r.status, 97, r.stderr);
        const out = r.stdout + r.stderr;
        assert.match(out, /ENOSPC: no space left on device/);
        assert.match(out, /^exit=1$/m);
        assert.match(out, /^etc: hosts $/m, 'only the hosts file is left in its directory');
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  );

  for (const mode of ['renamed into place', 'bind-mounted (written in place)'] as const) {
    test(
      `connect's /etc/hosts block on a full disk, ${mode}: ENOSPC, and the hosts file is exactly as it was`,
      { timeout: 30_000 },
      () => {
        const { dir, disk } = scratch();
        try {
          // About 3,950 octets of hosts lines; the block makes the file cross a 4 KiB page. Free
          // pages: renamed, one for the lock and not enough for the temporary copy; in place, room
          // for the lock and the copy (rename then fails with EBUSY) but none for the file's growth.
          const lines = ['127.0.0.1 localhost'];
          for (let i = 0; lines.join('\n').length < 3940; i++)
            lines.push(`10.1.0.${i % 250} host-${i}.example host-${i}`);
          const original = lines.join('\n') + '\n';
          const bind = mode !== 'renamed into place';
          const setup = [
            `mkdir "$d/etc" && printf '%s' "$HOSTS" > "$d/hosts.src"`,
            bind
              ? 'touch "$d/etc/hosts" && mount --bind "$d/hosts.src" "$d/etc/hosts"'
              : 'mv "$d/hosts.src" "$d/etc/hosts"',
            `dd if=/dev/zero of="$d/filler" bs=4k count=$(( $(df -B4k --output=avail "$d" | tail -1) - ${bind ? 3 : 2} )) 2>/dev/null`,
          ].join(' && ');
          const entries = JSON.stringify(
            ['a', 'b', 'c', 'd'].map((n, i) => `10.96.0.${i + 1} ${n}.default.svc.cluster.local ${n}.default`),
          );
          const show = `; echo "hosts:"; cat "$d/etc/hosts"`;
          const r = spawnSync(
            'unshare',
            [
              '--mount',
              'sh',
              '-c',
              `d="$1"; mount -t tmpfs -o size=64k tmpfs "$d" && ${setup} || exit 97; "$2" "$3" "$d/etc/hosts" "$4"; echo "exit=$?"${show}`,
              'sh',
              disk,
              process.execPath,
              resolve('dist/test/connect/hosts-write-main.js'),
              entries,
            ],
            { env: { ...process.env, HOSTS: original }, encoding: 'utf8' },
          );
          assert.notEqual(r.status, 97, r.stderr);
          const out = r.stdout + r.stderr;
          assert.match(out, /ENOSPC: no space left on device/);
          assert.match(out, /^exit=1$/m);
          assert.equal(
            r.stdout.slice(r.stdout.indexOf('hosts:\n') + 'hosts:\n'.length),
            original,
            'the hosts file is unchanged, not cut off half-way through the block',
          );
        } finally {
          rmSync(dir, { recursive: true, force: true });
        }
      },
    );
  }
});
