// Network namespaces for the node-local tests: created per test file (`cdns-test-<random>-...`),
// everything inside them reached with `ip netns exec`, and deleted in after() hooks. The host's
// own interfaces and tables are never touched.

import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  execRunner,
  type CommandResult,
  type CommandRunner,
  type SyncCommandRunner,
  execRunnerSync,
} from '../../src/sys/exec.js';

/** Why namespaces cannot be used here, or null when they can (probed by really making one). */
export async function netnsUnavailable(): Promise<string | null> {
  if (process.platform !== 'linux') return 'network namespaces need Linux';
  if (process.getuid?.() !== 0) return 'creating network namespaces needs root';
  const probe = `cdns-test-probe-${randomBytes(4).toString('hex')}`;
  const r = await execRunner('ip', ['netns', 'add', probe]);
  if (r.code !== 0) return `ip netns add is not permitted here: ${r.stderr.trim()}`;
  const ipt = await execRunner('ip', ['netns', 'exec', probe, 'iptables', '-w', '5', '-t', 'raw', '-L', '-n']);
  await execRunner('ip', ['netns', 'del', probe]);
  if (ipt.code !== 0) return `iptables does not work inside a namespace here: ${ipt.stderr.trim()}`;
  return null;
}

export function randomTag(): string {
  return randomBytes(3).toString('hex');
}

export class TestNetns {
  private constructor(readonly name: string) {}

  static async create(name: string): Promise<TestNetns> {
    await mustRun('ip', ['netns', 'add', name]);
    const ns = new TestNetns(name);
    await ns.must('ip', ['link', 'set', 'lo', 'up']);
    return ns;
  }

  exec(file: string, args: readonly string[]): Promise<CommandResult> {
    return execRunner('ip', ['netns', 'exec', this.name, file, ...args]);
  }

  async must(file: string, args: readonly string[]): Promise<string> {
    const r = await this.exec(file, args);
    if (r.code !== 0) throw new Error(`[${this.name}] ${file} ${args.join(' ')}: exit ${r.code}: ${r.stderr}`);
    return r.stdout;
  }

  /** A command runner whose `ip`/`iptables` act inside this namespace. */
  get runner(): CommandRunner {
    return (file, args) => this.exec(file, args);
  }

  get runnerSync(): SyncCommandRunner {
    return (file, args) => execRunnerSync('ip', ['netns', 'exec', this.name, file, ...args]);
  }

  /** Kills the processes left in the namespace (all started by the test), then deletes it. */
  async destroy(): Promise<void> {
    const pids = await execRunner('ip', ['netns', 'pids', this.name]);
    for (const pid of pids.stdout.split(/\s+/).filter(Boolean).map(Number)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        /* already gone */
      }
    }
    await execRunner('ip', ['netns', 'del', this.name]);
  }
}

async function mustRun(file: string, args: readonly string[]): Promise<void> {
  const r = await execRunner(file, args);
  if (r.code !== 0) throw new Error(`${file} ${args.join(' ')}: exit ${r.code}: ${r.stderr}`);
}

/** A veth pair from `a` (addrA) to `b` (addrB), e.g. 10.250.7.1/30 and 10.250.7.2/30. */
export async function linkNamespaces(a: TestNetns, b: TestNetns, addrA: string, addrB: string): Promise<void> {
  await a.must('ip', ['link', 'add', 'cdv0', 'type', 'veth', 'peer', 'name', 'cdv1', 'netns', b.name]);
  await a.must('ip', ['addr', 'add', addrA, 'dev', 'cdv0']);
  await b.must('ip', ['addr', 'add', addrB, 'dev', 'cdv1']);
  await a.must('ip', ['link', 'set', 'cdv0', 'up']);
  await b.must('ip', ['link', 'set', 'cdv1', 'up']);
}

export interface NsProcess {
  proc: ChildProcess;
  output(): string;
  waitFor(text: string | RegExp, timeoutMs?: number): Promise<void>;
  /** Resolves with the exit code (null when killed by a signal) and the signal. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  stop(signal?: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Runs `file args` inside the namespace, capturing stdout and stderr together. */
export function spawnIn(ns: TestNetns, file: string, args: readonly string[], env: NodeJS.ProcessEnv = {}): NsProcess {
  const proc = spawn('ip', ['netns', 'exec', ns.name, file, ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let done = false;
  const waiters: Array<() => void> = [];
  const wake = () => {
    for (const w of waiters.splice(0)) w();
  };
  proc.stdout.on('data', (d: Buffer) => {
    out += d.toString();
    wake();
  });
  proc.stderr.on('data', (d: Buffer) => {
    out += d.toString();
    wake();
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    proc.on('exit', (code, signal) => {
      done = true;
      wake();
      resolve({ code, signal });
    }),
  );
  return {
    proc,
    output: () => out,
    exited,
    waitFor(text, timeoutMs = 10_000) {
      return new Promise((resolve, reject) => {
        const t = setTimeout(
          () => reject(new Error(`timed out waiting for ${String(text)}; output:\n${out}`)),
          timeoutMs,
        );
        const check = () => {
          if (typeof text === 'string' ? out.includes(text) : text.test(out)) {
            clearTimeout(t);
            resolve();
          } else if (done) {
            clearTimeout(t);
            reject(new Error(`process exited before ${String(text)}; output:\n${out}`));
          } else waiters.push(check);
        };
        check();
      });
    },
    async stop(signal = 'SIGTERM') {
      if (!done) proc.kill(signal);
      const t = setTimeout(() => proc.kill('SIGKILL'), 10_000);
      const r = await exited;
      clearTimeout(t);
      return r;
    },
  };
}
