// Stalls of a server's serving thread between its wakeup system call's return and its next
// system call (issue 23 point 3), and the kernel's DAMON monitor that causes them on this kind of
// machine.
//
// A serving thread sleeps in epoll_wait/epoll_pwait/poll, wakes with its socket readable, and
// calls recvmmsg/recvmsg a few µs later. `perf record` of the thread's raw_syscalls and
// sched_switch events shows where that does not hold: a gap after the wakeup's return with no
// context switch and no other event on its CPU, during which datagrams pile up. Measured with
// this module (BENCHMARKS.md, "DAMON"), such gaps come every ~0.5 s for a Node process, 0.4–1.4 ms
// each, and not for a C server (Knot, a 30-line C echo server): DAMON's physical-address
// monitoring (kdamond, `sample_us` 500000 here) ages sampled pages, and the thread's next return
// to user space pays for it in proportion to what it maps. With DAMON off they are gone.
//
// startReturnTrace(tid, file) runs `perf record -k mono` (CLOCK_MONOTONIC: the latency client's
// clock) pinned to CPU 0; readReturnStalls(file) → the gaps as [[startNs, endNs]] and a summary.
// damonState() reads /sys/kernel/mm/damon/admin; pauseDamon() turns every running kdamond off
// and returns what puts them back.

import { spawnSync } from 'node:child_process';
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startProcess, stopProcess } from './procs.mjs';

/** System calls a serving thread sleeps in (x86_64): poll, select, epoll_wait, pselect6, ppoll, epoll_pwait, epoll_pwait2. */
const WAIT_CALLS = new Set([7, 23, 232, 270, 271, 281, 441]);

/** null when `perf` can record tracepoints here, else why not. */
export function perfUnavailable() {
  const r = spawnSync('perf', ['list', 'tracepoint'], { encoding: 'utf8', timeout: 20_000 });
  if (r.error) return `perf not found (${r.error.code}); Debian's linux-perf has it`;
  if (!/raw_syscalls:sys_exit/.test(r.stdout))
    return 'perf lists no raw_syscalls tracepoints (not root, or no tracefs)';
  return null;
}

/**
 * Records thread `tid`'s system calls and context switches into `file` (perf's messages into
 * `${file}.log`) until stop(), which resolves once perf has written the file (it finishes on
 * SIGTERM as on SIGINT). Started like the servers (lib/procs.mjs), so an aborted bench stops it too.
 */
export function startReturnTrace(tid, file) {
  const events = ['raw_syscalls:sys_enter', 'raw_syscalls:sys_exit', 'sched:sched_switch'].flatMap((e) => ['-e', e]);
  const proc = startProcess('perf', 'perf', ['record', '-q', '-k', 'mono', '-t', String(tid), ...events, '-o', file], {
    pin: 0,
    logFile: `${file}.log`,
  });
  return async () => {
    await stopProcess(proc, 10_000);
    let err = '';
    try {
      err = readFileSync(`${file}.log`, 'utf8');
    } catch {
      /* perf wrote nothing */
    }
    return { err };
  };
}

/**
 * The gaps ≥ `minMs` between a wakeup's return (a wait call returning events) and the thread's
 * next system call, with no context switch between: [[startNs, endNs]] on CLOCK_MONOTONIC, and
 * { wakeups, seconds, count, perSecond, p50Ms, maxMs, spacingS (median time between gaps) }.
 */
export function readReturnStalls(file, opts) {
  const r = spawnSync('perf', ['script', '-i', file, '--ns', '-F', 'time,event,trace'], {
    encoding: 'utf8',
    maxBuffer: 1 << 30,
  });
  if (r.status !== 0) throw new Error(`perf script: ${r.stderr.trim().split('\n').pop()}`);
  return parseReturnStalls(r.stdout, opts);
}

/** readReturnStalls on `perf script --ns -F time,event,trace` output. */
export function parseReturnStalls(text, { minMs = 0.2 } = {}) {
  const line = /^\s*(\d+)\.(\d{9}):\s+(\S+):\s+(.*)$/;
  const stalls = [];
  let wakeups = 0;
  let first = null;
  let last = null;
  let woke = null; // ns of the last wakeup's return, until the thread's next event
  for (const l of text.split('\n')) {
    const m = line.exec(l);
    if (!m) continue;
    const ns = Number(m[1]) * 1e9 + Number(m[2]);
    first ??= ns;
    last = ns;
    const ev = m[3];
    if (ev === 'raw_syscalls:sys_exit') {
      const x = /^NR (\d+) = (-?\d+)/.exec(m[4]);
      if (x && WAIT_CALLS.has(Number(x[1])) && Number(x[2]) > 0) {
        wakeups++;
        woke = ns;
        continue;
      }
    }
    if (woke !== null && ev === 'raw_syscalls:sys_enter' && ns - woke >= minMs * 1e6) stalls.push([woke, ns]);
    woke = null;
  }
  const seconds = first === null ? 0 : (last - first) / 1e9;
  const d = stalls.map(([a, b]) => (b - a) / 1e6).sort((a, b) => a - b);
  const gaps = stalls
    .slice(1)
    .map(([a], i) => (a - stalls[i][0]) / 1e9)
    .sort((a, b) => a - b);
  const r2 = (x) => Math.round(x * 100) / 100;
  return {
    stalls,
    summary: {
      wakeups,
      seconds: r2(seconds),
      count: stalls.length,
      perSecond: seconds > 0 ? r2(stalls.length / seconds) : 0,
      p50Ms: d.length ? r2(d[Math.floor(d.length / 2)]) : null,
      maxMs: d.length ? r2(d[d.length - 1]) : null,
      spacingS: gaps.length ? r2(gaps[Math.floor(gaps.length / 2)]) : null,
    },
  };
}

const DAMON = '/sys/kernel/mm/damon/admin/kdamonds';
const read = (p) => {
  try {
    return readFileSync(p, 'utf8').trim();
  } catch {
    return null;
  }
};

/** The kernel's DAMON monitors: [{ index, state, operations, sampleUs, aggrUs, actions }], [] when none. */
export function damonState() {
  let ids;
  try {
    ids = readdirSync(DAMON).filter((n) => /^\d+$/.test(n));
  } catch {
    return [];
  }
  return ids.map((i) => {
    const c = join(DAMON, i, 'contexts', '0');
    let actions = [];
    try {
      actions = readdirSync(join(c, 'schemes'))
        .filter((n) => /^\d+$/.test(n))
        .map((s) => read(join(c, 'schemes', s, 'action')));
    } catch {
      /* no schemes */
    }
    return {
      index: Number(i),
      state: read(join(DAMON, i, 'state')),
      operations: read(join(c, 'operations')),
      sampleUs: Number(read(join(c, 'monitoring_attrs', 'intervals', 'sample_us'))),
      aggrUs: Number(read(join(c, 'monitoring_attrs', 'intervals', 'aggr_us'))),
      actions,
    };
  });
}

/** One line for the report: "DAMON off", or each running monitor's operations and intervals. */
export function damonLine(state = damonState()) {
  if (state.some((d) => d.state === null)) return 'DAMON present, its state unreadable (not root)';
  const on = state.filter((d) => d.state === 'on');
  if (!on.length) return state.length ? 'DAMON present, off' : 'no DAMON';
  return on
    .map(
      (d) =>
        `DAMON kdamond.${d.index} on (${d.operations}, sample ${d.sampleUs / 1000} ms, aggregate ${d.aggrUs / 1000} ms${d.actions.length ? `, schemes: ${d.actions.join(', ')}` : ''})`,
    )
    .join('; ');
}

/**
 * Turns every running kdamond off (root only); returns restore(), which turns the same ones on
 * again with the configuration they had (sysfs keeps it while off). Throws when it cannot.
 */
export function pauseDamon() {
  const all = damonState();
  if (all.some((d) => d.state === null)) throw new Error('--pause-damon: cannot read the DAMON monitors (root needed)');
  const on = all.filter((d) => d.state === 'on');
  const off = [];
  let restored = false;
  const restore = () => {
    if (restored) return;
    restored = true;
    for (const d of off) {
      try {
        writeFileSync(join(DAMON, String(d.index), 'state'), 'on');
      } catch (e) {
        process.stderr.write(`could not turn kdamond.${d.index} back on: ${e.message}\n`);
      }
    }
  };
  try {
    for (const d of on) {
      writeFileSync(join(DAMON, String(d.index), 'state'), 'off');
      off.push(d);
    }
  } catch (e) {
    restore(); // the ones already off (a second monitor refused): none stays off
    throw new Error(`--pause-damon: ${e.message}`, { cause: e });
  }
  return restore;
}
