// Starts the real clusterdns binary for end-to-end tests and stops it cleanly.

import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { buildQuery, sendUdp } from './dns.js';
import { freePort } from './ports.js';

export const BIN = resolve('bin/clusterdns');

export interface RunningServer {
  port: number;
  dir: string;
  corefile: string;
  proc: ChildProcess;
  output(): string;
  /** Resolves when `text` appears in the output (or rejects after timeoutMs). */
  waitFor(text: string | RegExp, timeoutMs?: number): Promise<void>;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

export interface StartOptions {
  /** Corefile text; `PORT` is replaced with the chosen port. */
  corefile: string;
  /** Extra files written into the server's directory first (name -> content). */
  files?: Record<string, string>;
  args?: string[];
  workers?: number;
  env?: Record<string, string>;
  /** A name to query until it answers (default: wait for the banner). */
  probe?: string;
  /** Do not wait for start-up (for tests of failing starts). */
  noWait?: boolean;
  port?: number;
  /** Run bin/clusterdns itself (its #! line and the flags it sets) instead of `node bin/clusterdns`. */
  launcher?: boolean;
}

/** The server could not bind a port it was given: another process took it after freePort(). */
const isPortTaken = (e: unknown): boolean => e instanceof Error && /address already in use/.test(e.message);

/**
 * Runs `start` (which picks its ports with freePort()) up to 3 times while it fails because a
 * parallel test took a port between freePort() and the bind.
 */
export async function retryWhilePortTaken<T>(start: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await start();
    } catch (e) {
      if (attempt >= 3 || !isPortTaken(e)) throw e;
    }
  }
}

export async function startServer(o: StartOptions): Promise<RunningServer> {
  // A port the caller chose is not retried; one freePort() found may be taken before the bind.
  return o.port !== undefined ? startOnce(o) : retryWhilePortTaken(() => startOnce(o));
}

async function startOnce(o: StartOptions): Promise<RunningServer> {
  const port = o.port ?? (await freePort());
  const dir = mkdtempSync(join(tmpdir(), 'clusterdns-e2e-'));
  for (const [name, content] of Object.entries(o.files ?? {}))
    writeFileSync(join(dir, name), content.replaceAll('PORT', String(port)));
  const corefile = join(dir, 'Corefile');
  writeFileSync(corefile, o.corefile.replaceAll('PORT', String(port)));
  const args = ['-conf', corefile, '-workers', String(o.workers ?? 1), ...(o.args ?? [])];
  const proc = spawn(o.launcher ? BIN : process.execPath, o.launcher ? args : [BIN, ...args], {
    cwd: dir,
    env: { ...process.env, CLUSTERDNS_EXIT_WITH_PARENT: '1', ...o.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const waiters: Array<() => void> = [];
  const onData = (d: Buffer) => {
    out += d.toString();
    for (const w of waiters.splice(0)) w();
  };
  proc.stdout.on('data', onData);
  proc.stderr.on('data', onData);
  let exited: number | null | undefined;
  const exitP = new Promise<number | null>((r) =>
    proc.on('exit', (code) => {
      exited = code;
      for (const w of waiters.splice(0)) w();
      r(code);
    }),
  );
  const s: RunningServer = {
    port,
    dir,
    corefile,
    proc,
    output: () => out,
    waitFor(text, timeoutMs = 10000) {
      return new Promise((res, rej) => {
        const deadline = setTimeout(
          () => rej(new Error(`timed out waiting for ${String(text)}; output:\n${out}`)),
          timeoutMs,
        );
        const check = () => {
          if (typeof text === 'string' ? out.includes(text) : text.test(out)) {
            clearTimeout(deadline);
            res();
          } else if (exited !== undefined) {
            clearTimeout(deadline);
            rej(new Error(`server exited (${exited}) before ${String(text)}; output:\n${out}`));
          } else waiters.push(check);
        };
        check();
      });
    },
    async stop(signal = 'SIGTERM') {
      if (exited !== undefined) return exited;
      proc.kill(signal);
      const t = setTimeout(() => proc.kill('SIGKILL'), 10000);
      const code = await exitP;
      clearTimeout(t);
      return code;
    },
  };
  if (o.noWait) return s;
  try {
    await waitUntilServing(s, o, () => exited !== undefined);
  } catch (e) {
    await s.stop('SIGKILL'); // a server that never answered is not left running
    throw e;
  }
  return s;
}

async function waitUntilServing(s: RunningServer, o: StartOptions, hasExited: () => boolean): Promise<void> {
  const port = s.port;
  if (o.probe) {
    const deadline = Date.now() + 15000;
    for (;;) {
      try {
        await sendUdp(port, buildQuery(o.probe, 1), 300);
        break;
      } catch (e) {
        if (hasExited() || Date.now() > deadline) {
          throw new Error(`server did not answer: ${(e as Error).message}\n${s.output()}`, { cause: e });
        }
      }
    }
  } else {
    await s.waitFor(/clusterdns-\d/, 15000);
  }
}
