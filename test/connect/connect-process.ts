// Runs `clusterdns connect` / `disconnect` (the real binary) for end-to-end tests.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { resolve } from 'node:path';

export const BIN = resolve('bin/clusterdns');

export interface ConnectProcess {
  proc: ChildProcess;
  output(): string;
  waitFor(text: string | RegExp, timeoutMs?: number): Promise<void>;
  /** Resolves with the exit code (or the signal name). */
  exited: Promise<number | string>;
}

const live = new Set<ChildProcess>();

/** SIGKILLs every connect a test left running (a failed assertion before its own kill). */
export function killLeftovers(): void {
  for (const p of live) p.kill('SIGKILL');
  live.clear();
}

export function startConnect(
  args: string[],
  env: NodeJS.ProcessEnv,
  wrap: string[] = [],
  cwd?: string,
): ConnectProcess {
  const argv = [...wrap, process.execPath, BIN, 'connect', ...args];
  // Exit with the test process, so a killed test run leaves no connect behind.
  const proc = spawn(argv[0]!, argv.slice(1), {
    env: { ...env, CLUSTERDNS_EXIT_WITH_PARENT: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
    cwd,
  });
  live.add(proc);
  proc.on('exit', () => live.delete(proc));
  let out = '';
  let done: number | string | undefined;
  const waiters: Array<() => void> = [];
  const onData = (d: Buffer) => {
    out += d.toString();
    for (const w of waiters.splice(0)) w();
  };
  proc.stdout.on('data', onData);
  proc.stderr.on('data', onData);
  const exited = new Promise<number | string>((r) =>
    proc.on('exit', (code, signal) => {
      done = code ?? signal ?? -1;
      for (const w of waiters.splice(0)) w();
      r(done);
    }),
  );
  return {
    proc,
    output: () => out,
    exited,
    waitFor(text, timeoutMs = 20_000) {
      return new Promise((res, rej) => {
        const timer = setTimeout(
          () => rej(new Error(`timed out waiting for ${String(text)}; output:\n${out}`)),
          timeoutMs,
        );
        const check = () => {
          if (typeof text === 'string' ? out.includes(text) : text.test(out)) {
            clearTimeout(timer);
            res();
          } else if (done !== undefined) {
            clearTimeout(timer);
            rej(new Error(`connect exited (${done}) before ${String(text)}; output:\n${out}`));
          } else waiters.push(check);
        };
        check();
      });
    },
  };
}

export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

export function runCli(args: string[], env: NodeJS.ProcessEnv, wrap: string[] = [], cwd?: string): Promise<RunResult> {
  const argv = [...wrap, process.execPath, BIN, ...args];
  return new Promise((res) => {
    execFile(argv[0]!, argv.slice(1), { env, timeout: 30_000, cwd }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : -1) : 0;
      res({ code, stdout, stderr });
    });
  });
}

export async function until(what: string, cond: () => boolean, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
