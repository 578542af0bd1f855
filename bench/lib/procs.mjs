// Every process the benchmark starts goes through here, so that all of them (and their
// children, e.g. clusterdns's cluster workers) are killed on normal exit, on errors and on
// Ctrl-C. Each child gets its own process group (detached), and we signal the group.

import { spawn } from 'node:child_process';
import { openSync, closeSync, readFileSync, readdirSync } from 'node:fs';

const live = new Map(); // pid -> { name, child, exited: Promise<void> }

/**
 * Starts a long-running process. `pin` is a CPU list for taskset (or null).
 * stdout/stderr go to logFile so a failing server can be diagnosed.
 */
export function startProcess(name, cmd, args, { pin = null, logFile, env, cwd } = {}) {
  const argv = pin != null ? ['-c', String(pin), cmd, ...args] : args;
  const bin = pin != null ? 'taskset' : cmd;
  const fd = logFile ? openSync(logFile, 'a') : 'ignore';
  const child = spawn(bin, argv, {
    detached: true,
    stdio: ['ignore', fd, fd],
    env: env ?? process.env,
    cwd,
  });
  if (typeof fd === 'number') closeSync(fd);
  const exited = new Promise((resolve) => {
    child.once('exit', (code, signal) => {
      const e = live.get(child.pid);
      if (e) e.status = { code, signal };
      live.delete(child.pid);
      resolve({ code, signal });
    });
    child.once('error', (err) => {
      live.delete(child.pid);
      resolve({ code: null, signal: null, error: err });
    });
  });
  const entry = { name, child, exited, pid: child.pid, commandLine: [bin, ...argv].join(' ') };
  if (child.pid) live.set(child.pid, entry);
  return entry;
}

/**
 * Sets the CPU affinity of every thread of a running process (`taskset -a -p`): for servers that
 * pin their own threads after start, over the affinity they were started with.
 */
export async function pinThreads(pid, cpus) {
  const r = await runCommand('taskset', ['-a', '-p', '-c', String(cpus), String(pid)]);
  if (r.code !== 0) throw new Error(`taskset -a -p -c ${cpus} ${pid}: ${r.stderr.trim()}`);
}

/** Runs a short command to completion, capturing its output; tracked like the servers. */
export function runCommand(cmd, args, { pin = null, timeoutMs = 0 } = {}) {
  const argv = pin != null ? ['-c', String(pin), cmd, ...args] : args;
  const bin = pin != null ? 'taskset' : cmd;
  return new Promise((resolve, reject) => {
    const child = spawn(bin, argv, { detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    const entry = { name: cmd, child, pid: child.pid };
    if (child.pid) live.set(child.pid, entry);
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    let timer = null;
    if (timeoutMs > 0) timer = setTimeout(() => killGroup(child.pid, 'SIGKILL'), timeoutMs);
    child.once('error', (e) => {
      if (timer) clearTimeout(timer);
      live.delete(child.pid);
      reject(e);
    });
    child.once('close', (code, signal) => {
      if (timer) clearTimeout(timer);
      live.delete(child.pid);
      resolve({ code, signal, stdout: out, stderr: err });
    });
  });
}

function killGroup(pid, signal) {
  if (!pid) return;
  try {
    process.kill(-pid, signal);
  } catch {
    try {
      process.kill(pid, signal);
    } catch {
      /* already gone */
    }
  }
}

/** SIGTERM the process group, wait up to graceMs, then SIGKILL it. */
export async function stopProcess(entry, graceMs = 3000) {
  if (!entry) return;
  const pids = [entry.pid, ...descendants(entry.pid)];
  killGroup(entry.pid, 'SIGTERM');
  let timer;
  const timedOut = await Promise.race([
    entry.exited.then(() => false),
    new Promise((r) => (timer = setTimeout(() => r(true), graceMs))),
  ]);
  clearTimeout(timer);
  if (timedOut) killGroup(entry.pid, 'SIGKILL');
  // Children that outlived their parent (e.g. a cluster worker) are still in the group.
  killGroup(entry.pid, 'SIGKILL');
  for (const p of pids) {
    try {
      process.kill(p, 'SIGKILL');
    } catch {
      /* gone */
    }
  }
}

export async function stopAll() {
  await Promise.all([...live.values()].map((e) => (e.exited ? stopProcess(e) : killGroup(e.pid, 'SIGKILL'))));
}

/** Last resort, synchronous (process 'exit' handler): SIGKILL every group still alive. */
export function killAllSync() {
  for (const e of live.values()) killGroup(e.pid, 'SIGKILL');
  live.clear();
}

/** All descendants of pid, found through /proc/<pid>/stat's ppid field. */
export function descendants(pid) {
  const parentOf = new Map();
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'latin1');
      // pid (comm) state ppid ...; comm may contain spaces and parentheses.
      const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      parentOf.set(Number(d), Number(rest[1]));
    } catch {
      /* raced with exit */
    }
  }
  const out = [];
  const want = new Set([pid]);
  let grew = true;
  while (grew) {
    grew = false;
    for (const [p, pp] of parentOf) {
      if (want.has(pp) && !want.has(p)) {
        want.add(p);
        out.push(p);
        grew = true;
      }
    }
  }
  return out;
}

/** A `Name:   N kB` field of /proc/PID/status, in KiB (0 when the process is gone). */
export function statusKiB(pid, field) {
  try {
    const m = new RegExp(`^${field}:\\s+(\\d+)`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'latin1'));
    return m ? Number(m[1]) : 0;
  } catch {
    return 0;
  }
}

/** VmRSS in KiB of pid plus all its descendants. */
export function treeRssKiB(pid) {
  let total = 0;
  for (const p of [pid, ...descendants(pid)]) total += statusKiB(p, 'VmRSS');
  return total;
}
