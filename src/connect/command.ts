// `clusterdns connect` and `clusterdns disconnect`.
// Exit codes: 2 bad flags; 1 could not start, already connected, or could not undo; 0 otherwise.
import { existsSync } from 'node:fs';
import { exitWith, roleLogger, type Logger } from '../log.js';
import { roleFlags } from '../cli-flags.js';
import { runnerWithTimeout, type CommandRunner } from '../sys/exec.js';
import {
  CONNECT_USAGE,
  ConnectFlagError,
  DISCONNECT_USAGE,
  formatServer,
  parseConnectFlags,
  parseDisconnectFlags,
  type TargetOs,
} from './flags.js';
import {
  ConnectSession,
  foreignRunner,
  nativeOs,
  stateProcessAlive,
  sweepLeftovers,
  undoFromState,
  type SessionDeps,
} from './session.js';
import { connectPaths, StateFileError, StateStore, type ConnectState } from './state.js';

const connectLogger = (): Logger => roleLogger('connect');

function die(cmd: string, code: number, message: string): never {
  return exitWith(cmd, code, message);
}

function runnerFor(os: TargetOs, log: Logger): CommandRunner {
  return os === nativeOs() ? runnerWithTimeout(15_000) : foreignRunner(os, log);
}

function readState(cmd: string, store: StateStore): ConnectState | null {
  try {
    return store.read();
  } catch (err) {
    if (err instanceof StateFileError) die(cmd, 1, err.message);
    throw err;
  }
}

export async function run(argv: string[]): Promise<void> {
  const flags = roleFlags(
    'connect',
    CONNECT_USAGE,
    () => parseConnectFlags(argv),
    ConnectFlagError,
    (code, m) => die('connect', code, m),
  );
  if (flags === null) return;
  if (flags.os !== nativeOs() && flags.root === undefined)
    die('connect', 2, `--os ${flags.os} on ${nativeOs()} needs --root (it would write this machine's own files)`);
  const log = connectLogger();
  const paths = connectPaths(flags.os, flags.root);
  const store = new StateStore(paths.statePath);
  const deps: SessionDeps = { log, runner: runnerFor(flags.os, log), paths, store };

  const previous = readState('connect', store);
  if (previous) {
    if (stateProcessAlive(previous))
      die(
        'connect',
        1,
        `already connected (pid ${previous.pid}, since ${previous.startedAt}); run \`clusterdns disconnect\` first`,
      );
    log.warn(`a previous connect (pid ${previous.pid}) did not exit cleanly; undoing what it changed first`);
    if (!(await undoFromState(previous, { ...deps, runner: runnerFor(previous.os, log) })))
      die('connect', 1, 'could not undo the previous run; see above');
  }

  const session = new ConnectSession(flags, deps);
  let exiting = false;
  const shutdown = (why: string, code: number) => {
    if (exiting) return;
    exiting = true;
    log.info(`${why}: disconnecting`);
    void session.stop().then((ok) => {
      log.info(ok ? 'disconnected; everything restored' : 'disconnected with errors; see above');
      process.exit(ok ? code : 1);
    });
  };
  process.on('SIGINT', () => shutdown('SIGINT', 0));
  process.on('SIGTERM', () => shutdown('SIGTERM', 0));
  process.on('SIGHUP', () => shutdown('SIGHUP', 0));
  // A closed stdout (the terminal or a supervisor went away) must not stop the undo on exit.
  process.stdout.on('error', () => {});
  process.stderr.on('error', () => {});
  process.on('uncaughtException', (err) => {
    if (exiting) return;
    log.fatal(`unexpected error: ${err.stack ?? err.message}`);
    shutdown('error', 1);
  });
  try {
    await session.start();
  } catch (err) {
    log.error(`cannot connect: ${(err as Error).message}`);
    shutdown('start failed', 1);
    return;
  }
  if (exiting) return;
  log.info(
    `connected: ${flags.domains.join(', ')} -> ${formatServer(flags.server)}${flags.routesUrl ? `, hosts entries from ${flags.routesUrl.origin}${flags.routesUrl.pathname}` : ''} (pid ${process.pid}; stop with Ctrl-C or \`clusterdns disconnect\`)`,
  );
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

export async function runDisconnect(argv: string[]): Promise<void> {
  const flags = roleFlags(
    'disconnect',
    DISCONNECT_USAGE,
    () => parseDisconnectFlags(argv),
    ConnectFlagError,
    (code, m) => die('disconnect', code, m),
  );
  if (flags === null) return;
  const log = connectLogger();
  const paths = connectPaths(flags.os, flags.root);
  const store = new StateStore(paths.statePath);
  const deps = (os: TargetOs): SessionDeps => ({ log, runner: runnerFor(os, log), paths, store });

  let state = readState('disconnect', store);
  if (state && stateProcessAlive(state)) {
    if (flags.cleanup)
      die(
        'disconnect',
        1,
        `connect (pid ${state.pid}) is still running; run \`clusterdns disconnect\` without --cleanup to stop it`,
      );
    const pid = state.pid;
    const running = state;
    log.info(`stopping connect (pid ${pid})`);
    try {
      process.kill(pid, 'SIGTERM');
    } catch (err) {
      die('disconnect', 1, `cannot signal pid ${pid}: ${(err as Error).message}`);
    }
    const deadline = Date.now() + flags.timeoutMs;
    while (stateProcessAlive(running)) {
      if (Date.now() > deadline)
        die('disconnect', 1, `connect (pid ${pid}) did not exit within ${flags.timeoutMs / 1000} s`);
      await sleep(50);
    }
    state = readState('disconnect', store);
    if (!state) {
      log.info('disconnected');
      return;
    }
    log.warn(`connect (pid ${pid}) exited without undoing everything; finishing from ${store.path}`);
  }
  if (state) {
    if (state.pid !== process.pid)
      log.info(`undoing what connect (pid ${state.pid}, started ${state.startedAt}) left behind`);
    const ok = await undoFromState(state, deps(state.os));
    if (!ok) die('disconnect', 1, 'some changes could not be undone; see above');
    log.info('disconnected; everything restored');
    return;
  }
  // Neither a state file nor a hosts file here: most likely not the --root connect ran with.
  if (!existsSync(paths.hosts)) {
    die(
      'disconnect',
      1,
      `found no state file (${store.path}) and no hosts file (${paths.hosts}): nothing to disconnect there${flags.root !== undefined ? '; is --root the one connect ran with?' : ''}`,
    );
  }
  const swept = await sweepLeftovers(flags.os, deps(flags.os));
  if (!swept) die('disconnect', 1, 'could not clean up; see above');
  log.info(
    `nothing was connected: no state file at ${store.path}${swept === 'cleaned' ? '' : `, no cluster block in ${paths.hosts}`}`,
  );
}
