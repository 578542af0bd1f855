// Running `ip` and `iptables`: always execFile with an argument array, never a shell, so no
// flag value can become shell syntax. Failures are values (exit code + stderr), not throws.

import { execFile, spawnSync, type ChildProcess } from 'node:child_process';

export interface CommandResult {
  /** Exit status; -1 when the program could not be run at all (missing, killed, timed out). */
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs FILE with ARGS (and INPUT on stdin, for iptables-restore). */
export type CommandRunner = (file: string, args: readonly string[], input?: string) => Promise<CommandResult>;
export type SyncCommandRunner = (file: string, args: readonly string[], input?: string) => CommandResult;

const TIMEOUT_MS = 20_000;

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

export const execRunner: CommandRunner = (file, args, input) =>
  new Promise((resolve) => {
    const child = execFile(file, [...args], { timeout: TIMEOUT_MS, encoding: 'utf8' }, (err, stdout, stderr) => {
      running.delete(child);
      if (!err) return resolve({ code: 0, stdout, stderr });
      const code = typeof err.code === 'number' ? err.code : -1;
      resolve({ code, stdout, stderr: stderr || err.message });
    });
    running.add(child);
    child.stdin?.on('error', () => {}); // a program that exits without reading: its exit status says why
    child.stdin?.end(input ?? '');
  });

/** For the process 'exit' hook, where nothing asynchronous runs any more. */
export const execRunnerSync: SyncCommandRunner = (file, args, input) => {
  const r = spawnSync(file, [...args], { timeout: TIMEOUT_MS, encoding: 'utf8', input: input ?? '' });
  if (r.error) return { code: -1, stdout: r.stdout ?? '', stderr: r.error.message };
  return { code: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
};
