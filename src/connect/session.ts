// One connected session: applies the OS resolver setup, keeps the hosts block in sync with the
// route stream, and undoes all of it. `undoFromState` is also what a later process runs to
// clean up after a crash, from nothing but the state file.
import { readFileSync } from 'node:fs';
import type { Logger } from '../log.js';
import type { FileOps } from '../sys/atomic-file.js';
import type { DnsSetup } from './dns-setup.js';
import { formatCommand, recordingRunner, type CommandRunner } from '../sys/exec.js';
import { formatServer, type ConnectFlags, type TargetOs } from './flags.js';
import { hostsEntries, type HostsNaming } from './hosts-block.js';
import { syncHostsBlock, type HostsRecord } from './hosts-file.js';
import { applyResolved, reapplyResolved, revertResolved } from './resolved.js';
import { applyResolverFiles, revertResolverFiles } from './resolver-files.js';
import { RouteStream } from './route-stream.js';
import type { Route } from './routes.js';
import { processStartTime, type ConnectPaths, type ConnectState, type StateStore } from './state.js';
import { applyWindows, revertWindows, scriptOf } from './windows-dns.js';
import { pidAlive } from './lock.js';

export interface SessionDeps {
  log: Logger;
  /** Runs the OS commands: the real one on the native OS, a recorder for `--os` another. */
  runner: CommandRunner;
  paths: ConnectPaths;
  store: StateStore;
  fileOps?: FileOps;
  /** Debounce for hosts writes after stream events (ms). */
  hostsDelayMs?: number;
  /** How often to check that systemd-resolved still holds our link settings (ms, default 30 s). */
  resolvedRecheckMs?: number;
}

export function nativeOs(): TargetOs {
  return process.platform === 'darwin' ? 'darwin' : process.platform === 'win32' ? 'windows' : 'linux';
}

/** A recorder that logs what it would have run on the other OS. */
export function foreignRunner(os: TargetOs, log: Logger): CommandRunner {
  return recordingRunner((file, args) => {
    const script = scriptOf(args);
    log.info(
      `not on ${os}, not run: ${script ? `${file} -EncodedCommand <<\n${script}\n>>` : formatCommand(file, args)}`,
    );
  });
}

/** True when the state's process is running (and, on Linux, is the same process, not a reused pid). */
export function stateProcessAlive(state: ConnectState): boolean {
  if (state.pid === process.pid || !pidAlive(state.pid)) return false;
  if (state.pidStart === undefined) return true;
  const now = processStartTime(state.pid);
  return now === undefined || now === state.pidStart;
}

export class ConnectSession {
  readonly state: ConnectState;
  private stream: RouteStream | null = null;
  private hosts: HostsRecord;
  private hostsTimer: NodeJS.Timeout | null = null;
  private hostsDirty = false;
  private hostsWriting: Promise<void> | null = null;
  private keepAlive: NodeJS.Timeout | null = null;
  private recheck: NodeJS.Timeout | null = null;
  private rechecking: Promise<void> | null = null;
  private stopping: Promise<boolean> | null = null;
  private naming: HostsNaming | null = null;

  constructor(
    private readonly flags: ConnectFlags,
    private readonly deps: SessionDeps,
  ) {
    this.state = {
      version: 1,
      pid: process.pid,
      pidStart: processStartTime(process.pid),
      startedAt: new Date().toISOString(),
      os: flags.os,
      server: formatServer(flags.server),
    };
    this.hosts = { path: deps.paths.hosts, addedNewline: false, created: false };
  }

  private record(patch: Partial<ConnectState>): void {
    Object.assign(this.state, patch);
    for (const k of Object.keys(patch) as Array<keyof ConnectState>) if (patch[k] === undefined) delete this.state[k];
    this.deps.store.write(this.state);
  }

  async start(): Promise<void> {
    this.record({});
    this.keepAlive = setInterval(() => {}, 1 << 30);
    const setup: DnsSetup = {
      server: this.flags.server,
      domains: this.flags.domains,
      search: this.flags.search,
      interface: this.flags.interface,
      hostsBlock: this.flags.routesUrl !== undefined,
    };
    const ctx = { runner: this.deps.runner, log: this.deps.log, record: (p: Partial<ConnectState>) => this.record(p) };
    if (this.flags.os === 'linux') await applyResolved(setup, ctx);
    else if (this.flags.os === 'darwin') await applyResolverFiles(this.deps.paths.resolverDir, setup, ctx);
    else await applyWindows(setup, ctx);

    if (this.flags.routesUrl) {
      this.naming = { clusterDomain: this.flags.domains[0]!, searchDomains: this.flags.search };
      this.stream = new RouteStream({
        url: this.flags.routesUrl,
        token: this.flags.token,
        namespaces: this.flags.namespaces,
        ca: this.flags.caFile ? readFileSync(this.flags.caFile) : undefined,
        log: this.deps.log,
        idleTimeoutMs: this.flags.streamIdleMs,
        onChange: () => this.scheduleHosts(),
      });
      this.stream.start();
    }
    if (this.state.resolved) this.watchResolved();
  }

  /** Every recheck interval, puts our link settings back if systemd-resolved lost them. */
  private watchResolved(): void {
    const every = this.deps.resolvedRecheckMs ?? 30_000;
    const tick = async () => {
      const record = this.state.resolved;
      if (!record || this.stopping) return;
      const keep = await reapplyResolved(record, this.deps.runner, this.deps.log).catch(() => true);
      if (!keep) this.record({ resolved: undefined });
      else if (!this.stopping)
        this.recheck = setTimeout(() => {
          this.rechecking = tick();
        }, every);
    };
    this.recheck = setTimeout(() => {
      this.rechecking = tick();
    }, every);
  }

  private scheduleHosts(): void {
    this.hostsDirty = true;
    if (this.hostsTimer || this.stopping) return;
    this.hostsTimer = setTimeout(() => {
      this.hostsTimer = null;
      void this.flushHosts();
    }, this.deps.hostsDelayMs ?? 100);
  }

  private async flushHosts(): Promise<void> {
    if (this.hostsWriting) return;
    this.hostsWriting = (async () => {
      while (this.hostsDirty && !this.stopping && this.stream && this.naming) {
        this.hostsDirty = false;
        const entries = hostsEntries(this.currentRoutes(), this.naming);
        try {
          const out = await syncHostsBlock(this.hosts, entries, {
            ops: this.deps.fileOps,
            defaultEol: this.flags.os === 'windows' ? '\r\n' : '\n',
            before: (next) => {
              if (this.state.hosts === undefined || JSON.stringify(this.state.hosts) !== JSON.stringify(next))
                this.record({ hosts: next });
            },
          });
          this.hosts = out.record;
          if (out.changed)
            this.deps.log.info(
              `${this.hosts.path}: ${entries.length} cluster entries${out.method === 'in-place' ? ' (written in place: the file is a mount point)' : ''}`,
            );
        } catch (err) {
          this.deps.log.error(`cannot update ${this.hosts.path}: ${(err as Error).message}; retrying in 5 s`);
          setTimeout(() => this.scheduleHosts(), 5000).unref();
        }
      }
    })();
    try {
      await this.hostsWriting;
    } finally {
      this.hostsWriting = null;
    }
  }

  private currentRoutes(): Iterable<Route> {
    return this.stream ? this.stream.snapshot() : [];
  }

  /** Undoes everything; safe to call more than once. Resolves false when something could not be undone. */
  stop(): Promise<boolean> {
    this.stopping ??= (async () => {
      if (this.hostsTimer) clearTimeout(this.hostsTimer);
      if (this.recheck) clearTimeout(this.recheck);
      await this.rechecking;
      await this.stream?.stop();
      await this.hostsWriting;
      if (this.keepAlive) clearInterval(this.keepAlive);
      return undoFromState(this.state, this.deps);
    })();
    return this.stopping;
  }
}

/** Undoes what `state` lists, newest change first, then removes the state file if all went well. */
export async function undoFromState(state: ConnectState, deps: SessionDeps): Promise<boolean> {
  const { log, runner } = deps;
  let ok = true;
  if (state.hosts) {
    try {
      const out = await syncHostsBlock(state.hosts, null, { ops: deps.fileOps });
      if (out.changed) log.info(`${state.hosts.path}: cluster entries removed`);
    } catch (err) {
      ok = false;
      log.error(`cannot remove the block from ${state.hosts.path}: ${(err as Error).message}`);
    }
  }
  try {
    if (state.resolved) await revertResolved(state.resolved, runner, log);
    if (state.resolverFiles) await revertResolverFiles(state.resolverFiles, runner, log);
    if (state.windows) await revertWindows(state.windows, runner, log);
  } catch (err) {
    ok = false;
    log.error(`cannot undo the resolver setup: ${(err as Error).message}`);
  }
  if (ok) deps.store.remove();
  else log.error(`keeping ${deps.store.path} so that \`clusterdns disconnect --cleanup\` can try again`);
  return ok;
}

/** With no state file: removes any block and marked resolver files a lost state file left behind. */
export async function sweepLeftovers(os: TargetOs, deps: SessionDeps): Promise<false | 'cleaned' | 'clean'> {
  let ok: false | 'cleaned' | 'clean' = 'clean';
  try {
    const out = await syncHostsBlock({ path: deps.paths.hosts, addedNewline: false, created: false }, null, {
      ops: deps.fileOps,
    });
    if (out.changed) {
      deps.log.info(`${deps.paths.hosts}: a leftover cluster block removed`);
      ok = 'cleaned';
    }
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') {
      ok = false;
      deps.log.error(`cannot clean ${deps.paths.hosts}: ${(err as Error).message}`);
    }
  }
  if (os === 'darwin') await revertResolverFiles({ dir: deps.paths.resolverDir, files: [] }, deps.runner, deps.log);
  return ok;
}
