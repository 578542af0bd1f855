// Running the OS tools the roles drive (ip, iptables, resolvectl, dscacheutil, powershell):
// always execFile with an argument array, never a shell, so no flag value or cluster data can
// become shell syntax. Failures are values (exit code + stderr), not throws.

import { execFile, spawnSync, type ChildProcess } from 'node:child_process';

export interface CommandResult {
  /** Exit status; 127 when the program is not installed, -1 when it could not run (killed, timed out). */
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs FILE with ARGS (and INPUT on stdin, for iptables-restore). */
export type CommandRunner = (file: string, args: readonly string[], input?: string) => Promise<CommandResult>;
export type SyncCommandRunner = (file: string, args: readonly string[], input?: string) => CommandResult;

const TIMEOUT_MS = 20_000;
/** Output kept from one command (PowerShell's inspection of every interface is the largest). */
const MAX_BUFFER = 4 * 1024 * 1024;

const running = new Set<ChildProcess>();

/**
 * Kills the commands still running (for the exit hook: an iptables-restore finishing after
 * our teardown would leave rules behind with nothing listening). An nft/xtables commit is
 * atomic, so a killed one either happened or did not; the teardown then sees which.
 */
export function killRunningCommands(): void {
  for (const child of running) child.kill('SIGKILL');
  running.clear();
}

function failed(
  file: string,
  err: { code?: string | number | null; message: string },
  stdout: string,
  stderr: string,
): CommandResult {
  if (err.code === 'ENOENT') return { code: 127, stdout: '', stderr: `${file}: not installed` };
  return { code: typeof err.code === 'number' ? err.code : -1, stdout, stderr: stderr || err.message };
}

/** A runner whose commands are killed after `timeoutMs`. */
export function runnerWithTimeout(timeoutMs: number): CommandRunner {
  return (file, args, input) =>
    new Promise((resolve) => {
      const child = execFile(
        file,
        [...args],
        { timeout: timeoutMs, encoding: 'utf8', windowsHide: true, maxBuffer: MAX_BUFFER },
        (err, stdout, stderr) => {
          running.delete(child);
          resolve(err ? failed(file, err, stdout, stderr) : { code: 0, stdout, stderr });
        },
      );
      running.add(child);
      child.stdin?.on('error', () => {}); // a program that exits without reading: its exit status says why
      child.stdin?.end(input ?? '');
    });
}

export const execRunner: CommandRunner = runnerWithTimeout(TIMEOUT_MS);

/** For the process 'exit' hook, where nothing asynchronous runs any more. */
export const execRunnerSync: SyncCommandRunner = (file, args, input) => {
  const r = spawnSync(file, [...args], { timeout: TIMEOUT_MS, encoding: 'utf8', input: input ?? '' });
  if (r.error) return failed(file, r.error, r.stdout ?? '', r.stderr ?? '');
  return { code: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
};

/**
 * For another OS's commands (`connect --os darwin` on Linux, in tests and dry runs): records
 * them and reports success without running anything.
 */
export function recordingRunner(sink: (file: string, args: readonly string[]) => void): CommandRunner {
  return async (file, args) => {
    sink(file, args);
    return { code: 0, stdout: '', stderr: '' };
  };
}

/** `file arg arg` for logs, with arguments that need it in single quotes (as a shell would read them). */
export function formatCommand(file: string, args: readonly string[]): string {
  return [file, ...args].map((a) => (/^[\w@%+=:,./~-]+$/.test(a) ? a : `'${a.replace(/'/g, `'\\''`)}'`)).join(' ');
}
