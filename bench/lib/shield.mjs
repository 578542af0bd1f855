// Keeps the rest of the machine off the server's core for a latency run (issue 23 point 3), as
// `cset shield` or `isolcpus` would: every task the kernel lets move (user processes, and kernel
// threads that are not bound to one CPU) that may run on that core is moved to the other CPUs
// for the run and given its own affinity back at the end. The bench pins the servers and its
// clients itself; this is for what it did not start.
//
// Why (BENCHMARKS.md, "kdamond on the server's core"): on this machine kind the kernel's DAMON
// thread `kdamond.0` wakes every 0.5 s and runs for up to 4 ms, and the scheduler puts it on the
// least busy CPU, which is the server's (the client and dnsperf keep CPU 0 busier). Every server
// measured then waits up to 4 ms twice a second: that set every server's p99.9 (2–4 ms) and, for
// the server that drains its backlog slower, p99 too. Per-CPU kernel threads (ksoftirqd/1,
// kworker/1:*, migration/1) cannot move and stay; unbound workqueue threads refuse to move
// (PF_NO_SETAFFINITY) and stay too. Linux only; needs the right to set other users' affinity
// (root) for tasks that are not ours.

import { readdirSync, readFileSync } from 'node:fs';
import { spawnSync } from 'node:child_process';

/** "0-1,3" → [0, 1, 3]. */
export function parseCpuList(text) {
  const out = [];
  for (const part of text.trim().split(',')) {
    if (!part) continue;
    const [a, b] = part.split('-').map(Number);
    if (!Number.isInteger(a) || (b !== undefined && !Number.isInteger(b))) throw new Error(`bad CPU list "${text}"`);
    for (let c = a; c <= (b ?? a); c++) out.push(c);
  }
  return out;
}

function readTask(pid, tid) {
  try {
    const status = readFileSync(`/proc/${pid}/task/${tid}/status`, 'latin1');
    const allowed = /^Cpus_allowed_list:\s*(.*)$/m.exec(status)?.[1];
    const name = /^Name:\s*(.*)$/m.exec(status)?.[1] ?? '?';
    return allowed === undefined ? null : { pid, tid, name, allowed };
  } catch {
    return null; // gone meanwhile
  }
}

/** Every thread of the machine (or of the processes `only` names) with its name and allowed CPUs. */
function allTasks(only) {
  const tasks = [];
  for (const pid of only ?? readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    let tids;
    try {
      tids = readdirSync(`/proc/${pid}/task`);
    } catch {
      continue;
    }
    for (const tid of tids) {
      const t = readTask(pid, tid);
      if (t) tasks.push(t);
    }
  }
  return tasks;
}

function setAffinity(tid, cpus) {
  const r = spawnSync('taskset', ['-p', '-c', cpus, String(tid)], { encoding: 'utf8' });
  return r.status === 0;
}

/**
 * Moves every movable task allowed on `cpu` (but for the processes in `except`; only those in
 * `only` when given, for tests) to the machine's other CPUs. Returns { moved: [{tid, name}], stayed: [names that may run there and would not
 * move], restore() } — restore gives each moved task the affinity it had (tasks gone meanwhile
 * are skipped).
 */
export function shieldCpu(cpu, { except = [], only = null } = {}) {
  // Not kthreadd (pid 2): the kernel threads it starts during the run (a kdamond that
  // --pause-damon turns on again, new workers) would keep the narrowed affinity after the restore.
  const skip = new Set(['2', ...except.map(String)]);
  const moved = [];
  const stayed = [];
  for (const t of allTasks(only?.map(String) ?? null)) {
    if (skip.has(t.pid)) continue;
    let cpus;
    try {
      cpus = parseCpuList(t.allowed);
    } catch {
      continue;
    }
    if (!cpus.includes(cpu)) continue;
    const rest = cpus.filter((c) => c !== cpu);
    if (rest.length === 0) {
      stayed.push(t.name); // bound to this CPU: a per-CPU kernel thread, or pinned by its owner
      continue;
    }
    if (setAffinity(t.tid, rest.join(','))) moved.push(t);
    else stayed.push(t.name);
  }
  let restored = false;
  const restore = () => {
    if (restored) return;
    restored = true;
    for (const t of moved) setAffinity(t.tid, t.allowed); // a task gone meanwhile just fails
  };
  return { moved: moved.map((t) => ({ tid: Number(t.tid), name: t.name })), stayed, restore };
}

/** "7 tasks moved off CPU 1 for the run (kdamond.0, …)" for the report's machine line. */
export function shieldLine(cpu, shield) {
  const names = [...new Set(shield.moved.map((t) => t.name))];
  const shown = names.slice(0, 6).join(', ') + (names.length > 6 ? `, … ${names.length - 6} more` : '');
  return `CPU ${cpu} shielded: ${shield.moved.length} other tasks moved off it for the run${shown ? ` (${shown})` : ''}, their own affinity back at the end; ${shield.stayed.length} that cannot move stayed (per-CPU kernel threads, workqueue workers)`;
}
