// macOS: one /etc/resolver/<domain> file per cluster domain, each marked as ours. A file without
// our marker belongs to someone else (another VPN, a previous tool) and is never changed.
import fs, { constants as C } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from '../log.js';
import { resolveTarget, writeFileAtomic } from '../sys/atomic-file.js';
import type { CommandRunner } from '../sys/exec.js';
import type { BackendContext, DnsSetup } from './dns-setup.js';

export const RESOLVER_MARKER = '# managed by clusterdns connect';

/** The commands that make mDNSResponder drop what it cached before the files changed. */
export const DARWIN_FLUSH_COMMANDS: ReadonlyArray<readonly [string, readonly string[]]> = [
  ['dscacheutil', ['-flushcache']],
  ['killall', ['-HUP', 'mDNSResponder']],
];

export function resolverFileContent(setup: DnsSetup): string {
  return [
    RESOLVER_MARKER,
    '# removed by `clusterdns disconnect`; do not edit',
    `nameserver ${setup.server.ip}`,
    `port ${setup.server.port}`,
    'search_order 1',
    'timeout 5',
    '',
  ].join('\n');
}

type FileKind = 'absent' | 'ours' | 'foreign' | 'not-a-file';

export function resolverFileKind(path: string): FileKind {
  let st: fs.Stats;
  try {
    st = fs.lstatSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 'absent';
    throw err;
  }
  if (!st.isFile()) return 'not-a-file';
  const text = fs.readFileSync(path, 'utf8');
  return text.split('\n')[0] === RESOLVER_MARKER ? 'ours' : 'foreign';
}

export async function flushDarwinCache(runner: CommandRunner): Promise<void> {
  for (const [file, args] of DARWIN_FLUSH_COMMANDS) await runner(file, args);
}

export async function applyResolverFiles(dir: string, setup: DnsSetup, ctx: BackendContext): Promise<boolean> {
  const { log } = ctx;
  const createdDir = !fs.existsSync(dir);
  fs.mkdirSync(dir, { recursive: true, mode: 0o755 });
  const content = resolverFileContent(setup);
  const files: string[] = [];
  for (const domain of setup.domains) {
    if (domain === 'local') {
      log.warn(`not writing ${join(dir, 'local')}: it would capture every mDNS .local name`);
      continue;
    }
    const path = join(dir, domain);
    const kind = resolverFileKind(path);
    if (kind === 'foreign' || kind === 'not-a-file') {
      log.warn(
        `${path} exists and is not ours (no "${RESOLVER_MARKER}" line); leaving it, so ${domain} keeps its current resolver`,
      );
      continue;
    }
    files.push(domain);
    ctx.record({ resolverFiles: { dir, files: [...files], ...(createdDir ? { createdDir } : {}) } });
    if (kind === 'ours') {
      writeFileAtomic(resolveTarget(path), content);
    } else {
      const fd = fs.openSync(path, C.O_WRONLY | C.O_CREAT | C.O_EXCL | C.O_NOFOLLOW, 0o644);
      try {
        fs.writeSync(fd, content);
        fs.fsyncSync(fd);
      } finally {
        fs.closeSync(fd);
      }
    }
  }
  if (files.length === 0 && createdDir) ctx.record({ resolverFiles: { dir, files: [], createdDir } });
  await flushDarwinCache(ctx.runner);
  if (files.length)
    log.info(
      `resolver files ${files.map((f) => join(dir, f)).join(', ')} send those domains to ${setup.server.ip} port ${setup.server.port}`,
    );
  return files.length > 0;
}

/** Removes the listed files that still carry our marker; with no list, every marked file in `dir`. */
export async function revertResolverFiles(
  record: { dir: string; files: string[]; createdDir?: boolean },
  runner: CommandRunner,
  log: Logger,
): Promise<void> {
  const { dir } = record;
  let names = record.files;
  if (names.length === 0 && !record.createdDir) {
    try {
      names = fs.readdirSync(dir);
    } catch {
      names = [];
    }
  }
  let removed = 0;
  for (const name of names) {
    const path = join(dir, name);
    const kind = resolverFileKind(path);
    if (kind === 'ours') {
      fs.rmSync(path, { force: true });
      removed++;
    } else if (kind !== 'absent' && record.files.includes(name)) {
      log.warn(`${path} was replaced by a file that is not ours; leaving it`);
    }
  }
  if (record.createdDir) {
    try {
      fs.rmdirSync(dir);
    } catch {
      // Not empty: someone else put files there since.
    }
  }
  if (removed > 0) {
    await flushDarwinCache(runner);
    log.info(`removed ${removed} resolver file(s) from ${dir}`);
  }
}
