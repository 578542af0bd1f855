// The state file: which process is connected and every change it made, written before the
// change is made, so `disconnect --cleanup` (or the next connect) can undo a crashed run.
import fs from 'node:fs';
import { dirname, join } from 'node:path';
import { resolveTarget, writeFileAtomic } from '../sys/atomic-file.js';
import type { TargetOs } from './flags.js';
import type { HostsRecord } from './hosts-file.js';
import type { ResolvedRecord } from './resolved.js';

/** What was changed on a Windows interface, and what it had before. */
export interface WindowsRecord {
  /** NRPT rules carry this comment; undo removes exactly those. */
  nrptComment: string;
  /** The interface whose DNS servers we set, with its previous servers; null when untouched. */
  interfaceDns: { interfaceIndex: number; previous: string[] } | null;
  /** Suffixes we added to the global search list (only those not already in it). */
  addedSuffixes: string[];
}

export interface ConnectState {
  version: 1;
  pid: number;
  /** /proc start time of `pid` on Linux, so a recycled pid is not mistaken for ours. */
  pidStart?: string;
  startedAt: string;
  os: TargetOs;
  server: string;
  hosts?: HostsRecord;
  resolved?: ResolvedRecord;
  resolverFiles?: { dir: string; files: string[]; createdDir?: boolean };
  windows?: WindowsRecord;
}

export class StateFileError extends Error {
  readonly code = 'CONNECT_ERR_STATE';
  constructor(path: string, why: string) {
    super(`${path}: ${why}; check what it lists by hand, then remove it`);
    this.name = 'StateFileError';
  }
}

export interface ConnectPaths {
  hosts: string;
  resolverDir: string;
  stateDir: string;
  statePath: string;
}

export function connectPaths(os: TargetOs, root: string | undefined): ConnectPaths {
  if (os === 'windows' && root === undefined) {
    const sys = process.env['SystemRoot'] ?? 'C:\\Windows';
    const data = process.env['ProgramData'] ?? 'C:\\ProgramData';
    const stateDir = `${data}\\clusterdns`;
    return {
      hosts: `${sys}\\System32\\drivers\\etc\\hosts`,
      resolverDir: '',
      stateDir,
      statePath: `${stateDir}\\connect.json`,
    };
  }
  const r = root ?? '/';
  const stateDir = join(r, 'var/lib/clusterdns');
  return {
    hosts: join(r, 'etc/hosts'),
    resolverDir: join(r, 'etc/resolver'),
    stateDir,
    statePath: join(stateDir, 'connect.json'),
  };
}

function isStringArray(v: unknown): v is string[] {
  return Array.isArray(v) && v.every((s) => typeof s === 'string');
}

function isObj(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function validate(v: unknown): v is ConnectState {
  if (!isObj(v) || v['version'] !== 1 || typeof v['pid'] !== 'number' || typeof v['os'] !== 'string') return false;
  const h = v['hosts'];
  if (
    h !== undefined &&
    !(
      isObj(h) &&
      typeof h['path'] === 'string' &&
      typeof h['addedNewline'] === 'boolean' &&
      typeof h['created'] === 'boolean'
    )
  )
    return false;
  const r = v['resolved'];
  if (
    r !== undefined &&
    !(isObj(r) && typeof r['link'] === 'string' && typeof r['server'] === 'string' && isStringArray(r['domains']))
  )
    return false;
  const f = v['resolverFiles'];
  if (f !== undefined && !(isObj(f) && typeof f['dir'] === 'string' && isStringArray(f['files']))) return false;
  const w = v['windows'];
  if (w !== undefined && !(isObj(w) && typeof w['nrptComment'] === 'string' && isStringArray(w['addedSuffixes'])))
    return false;
  return true;
}

export class StateStore {
  constructor(readonly path: string) {}

  read(): ConnectState | null {
    let text: string;
    try {
      text = fs.readFileSync(this.path, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw err;
    }
    let v: unknown;
    try {
      v = JSON.parse(text);
    } catch {
      throw new StateFileError(this.path, 'not valid JSON');
    }
    if (!validate(v)) throw new StateFileError(this.path, 'not a clusterdns connect state file');
    return v;
  }

  write(state: ConnectState): void {
    fs.mkdirSync(dirname(this.path), { recursive: true, mode: 0o755 });
    const target = resolveTarget(this.path, 0o600);
    writeFileAtomic({ ...target, mode: 0o600 }, JSON.stringify(state, null, 2) + '\n');
  }

  /** Removes the state file, and its directory when nothing else is in it (a disconnected machine keeps no trace). */
  remove(): void {
    fs.rmSync(this.path, { force: true });
    try {
      fs.rmdirSync(dirname(this.path));
    } catch {
      // Not empty (someone else's files) or already gone: leave it.
    }
  }
}

/** Linux: field 22 of /proc/PID/stat, which differs between two processes that shared a pid. */
export function processStartTime(pid: number): string | undefined {
  try {
    const stat = fs.readFileSync(join('/proc', String(pid), 'stat'), 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  } catch {
    return undefined;
  }
}
