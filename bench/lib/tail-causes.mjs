// What the slow queries of a latency run met (issue 23 point 3): intervals of time, of several
// kinds, on the latency client's clock (CLOCK_MONOTONIC ns), lined up with each recorded
// query's time in flight. Kinds any server has: the recording client's own stalls and the
// server thread waiting for its core (sampled from /proc here); clusterdns's own, from
// lib/gc-observer.mjs and lib/loop-observer.mjs: GC pauses, batches of the native UDP path
// (the batching delay), and the loop's other work (timers, other sockets, V8 tasks).

import { readFileSync, readdirSync } from 'node:fs';
import { cpuStatField } from './steal.mjs';

const r2 = (x) => Math.round(x * 100) / 100;

/** lib/loop-observer.mjs's file → { batch, other, timer, self, young: [[startNs, endNs, a, b]], labels }. */
export function readLoopLog(file) {
  const out = { batch: [], other: [], timer: [], self: [], young: [], labels: [] };
  let b;
  try {
    b = readFileSync(file);
  } catch {
    return out;
  }
  const f = new Float64Array(b.buffer, b.byteOffset, Math.floor(b.length / 8));
  const kinds = [null, out.batch, out.other, out.timer, out.self, out.young];
  for (let i = 0; i + 5 <= f.length; i += 5) kinds[f[i]]?.push([f[i + 1], f[i + 1] + f[i + 2], f[i + 3], f[i + 4]]);
  for (const k of [out.batch, out.other, out.timer, out.self]) k.sort((x, y) => x[0] - y[0]);
  try {
    out.labels = JSON.parse(readFileSync(`${file}.labels.json`, 'utf8'));
  } catch {
    /* no timers ran */
  }
  return out;
}

/**
 * Samples how long thread `tid` of `pid` waited for a CPU while runnable (/proc/PID/task/TID/
 * schedstat, field 2), every `everyMs`. stop() → [[startNs, endNs, waitedFraction]] on
 * process.hrtime's clock: the share of each sampling interval the thread spent in the run queue.
 */
export function sampleCoreWait(pid, tid, everyMs = 1) {
  const path = `/proc/${pid}/task/${tid}/schedstat`;
  const read = () => {
    try {
      return Number(readFileSync(path, 'latin1').split(' ')[1]);
    } catch {
      return NaN;
    }
  };
  const out = [];
  let lastT = Number(process.hrtime.bigint());
  let lastW = read();
  const timer = setInterval(() => {
    const w = read();
    const t = Number(process.hrtime.bigint());
    if (Number.isFinite(w) && Number.isFinite(lastW) && t > lastT && w > lastW)
      out.push([lastT, t, Math.min(1, (w - lastW) / (t - lastT))]);
    lastT = t;
    lastW = w;
  }, everyMs);
  return () => {
    clearInterval(timer);
    return out;
  };
}

/** Run time (ms, from /proc schedstat) of each of a process's threads, by thread id (empty: not Linux, or gone). */
export function threadsRunMs(pid) {
  const out = new Map();
  try {
    for (const t of readdirSync(`/proc/${pid}/task`)) {
      try {
        out.set(t, Number(readFileSync(`/proc/${pid}/task/${t}/schedstat`, 'latin1').split(' ')[0]) / 1e6);
      } catch {
        /* the thread ended */
      }
    }
  } catch {
    /* not Linux, or gone */
  }
  return out;
}

/**
 * threadsRunMs() of every thread but `tid`: for clusterdns V8's helpers (parallel scavenges,
 * concurrent marking and sweeping, TurboFan compiling), libuv's pool, and the event loop when
 * the addon's answer thread is the serving one; for Knot its other workers. Pinned with the
 * server, they take CPU 1 from its serving thread while they run.
 */
export function otherThreadsRunMs(pid, tid) {
  const out = threadsRunMs(pid);
  out.delete(String(tid));
  return out;
}

/** How long the threads of `after` ran since `before` (threads started since count from 0). */
export function ranSince(before, after) {
  let ms = 0;
  for (const [t, v] of after) ms += v - (before.get(t) ?? 0);
  return ms;
}

/**
 * ranSince() by thread name: "main" for the process's first thread (Node's event loop), else
 * /proc/PID/task/TID/comm (the addon's "udp-answers"; Node leaves V8's and libuv's helpers
 * "node"); largest first; names read at the end (threads gone by then count under their id).
 */
export function ranSinceByName(pid, before, after) {
  const by = new Map();
  for (const [t, v] of after) {
    let name = t;
    try {
      name = t === String(pid) ? 'main' : readFileSync(`/proc/${pid}/task/${t}/comm`, 'latin1').trim();
    } catch {
      /* the thread ended */
    }
    by.set(name, (by.get(name) ?? 0) + v - (before.get(t) ?? 0));
  }
  return [...by].filter(([, ms]) => ms >= 0.5).sort((a, b) => b[1] - a[1]);
}

/** `intervals` ([start, end, ...], sorted by start) with the parts inside `cuts` (sorted, disjoint) removed. */
export function subtract(intervals, cuts) {
  const out = [];
  let c = 0;
  for (const iv of intervals) {
    let s = iv[0];
    const e = iv[1];
    while (c < cuts.length && cuts[c][1] <= s) c++;
    for (let k = c; k < cuts.length && cuts[k][0] < e; k++) {
      if (cuts[k][0] > s) out.push([s, cuts[k][0], ...iv.slice(2)]);
      s = Math.max(s, cuts[k][1]);
    }
    if (s < e) out.push([s, e, ...iv.slice(2)]);
  }
  return out;
}

/** Sum of the overlap of [s, e] with sorted `iv` ([start, end, weight?]); `ends` is the running max of the ends. */
function overlapMs(iv, ends, s, e, weighted) {
  let lo = 0;
  let hi = iv.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (ends[mid] <= s) lo = mid + 1;
    else hi = mid;
  }
  let sum = 0;
  for (let k = lo; k < iv.length && iv[k][0] < e; k++) {
    const o = Math.min(e, iv[k][1]) - Math.max(s, iv[k][0]);
    if (o > 0) sum += weighted ? o * iv[k][2] : o;
  }
  return sum / 1e6;
}

/**
 * For every counted query of `raw` (lib/gc-trace.mjs readRaw), how many ms of each kind of
 * interval its time in flight overlapped. kinds: { name: { iv: [[startNs, endNs, w?]], weighted } },
 * on the absolute clock. A query met a kind when the overlap is ≥ `metMs`; its cause is the
 * kind it overlapped most, if that is ≥ a quarter of its latency (else "none found").
 */
export function attribute(raw, kinds, { timeoutNs = 2e9, metMs = 0.25 } = {}) {
  const names = Object.keys(kinds);
  const prepared = names.map((k) => {
    const iv = kinds[k].iv;
    const ends = new Float64Array(iv.length);
    let m = -Infinity;
    iv.forEach((x, i) => (ends[i] = m = Math.max(m, x[1])));
    return { iv, ends, weighted: kinds[k].weighted === true };
  });
  const from = Math.ceil(raw.skipS * raw.rate);
  const lat = [];
  const over = [];
  for (let i = from; i < raw.send.length; i++) {
    const l = Number.isNaN(raw.lat[i]) ? timeoutNs : raw.lat[i];
    const s = raw.startNs + raw.send[i];
    lat.push(l / 1e6);
    over.push(prepared.map((p) => overlapMs(p.iv, p.ends, s, s + l, p.weighted)));
  }
  const sorted = Float64Array.from(lat).sort();
  const q = (p) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
  const p99 = q(99);
  const p999 = q(99.9);
  const group = (pred) => {
    const idx = [];
    for (let i = 0; i < lat.length; i++) if (pred(lat[i])) idx.push(i);
    const met = {};
    const cause = { 'none found': 0 };
    names.forEach((k, j) => {
      met[k] = idx.length ? r2((100 * idx.filter((i) => over[i][j] >= metMs).length) / idx.length) : NaN;
      cause[k] = 0;
    });
    for (const i of idx) {
      let best = -1;
      for (let j = 0; j < names.length; j++) if (best < 0 || over[i][j] > over[i][best]) best = j;
      if (best >= 0 && over[i][best] >= lat[i] / 4) cause[names[best]]++;
      else cause['none found']++;
    }
    for (const k of Object.keys(cause)) cause[k] = idx.length ? r2((100 * cause[k]) / idx.length) : NaN;
    return { queries: idx.length, metPercent: met, causePercent: cause };
  };
  return {
    metMs,
    p50Ms: r2(q(50)),
    p99Ms: r2(p99),
    p999Ms: r2(p999),
    kinds: names,
    all: group(() => true),
    atLeastP99: group((l) => l >= p99),
    atLeastP999: group((l) => l >= p999),
  };
}

/** Percentile of values `v` weighted by `w` (both arrays). */
function weightedPct(v, w, p) {
  const order = v.map((_, i) => i).sort((a, b) => v[a] - v[b]);
  const total = w.reduce((a, b) => a + b, 0);
  let acc = 0;
  for (const i of order) {
    acc += w[i];
    if (acc >= (p / 100) * total) return v[i];
  }
  return NaN;
}

/**
 * The serving thread over [t0, t1] (ns): batches (the batching delay every datagram of a batch
 * waits: the batch's duration, as a distribution over datagrams), the loop's other work (its
 * longest stretches: the event-loop lag a datagram arriving then waits out), and the timers
 * that took the most time, by where they were scheduled.
 */
export function loopSummary(loop, t0, t1) {
  const inRun = (x) => x[0] >= t0 && x[0] < t1;
  const seconds = (t1 - t0) / 1e9;
  const batches = loop.batch.filter(inRun);
  const dur = batches.map((b) => (b[1] - b[0]) / 1e6);
  const n = batches.map((b) => b[2]);
  const datagrams = n.reduce((a, b) => a + b, 0);
  const sentWith = batches.reduce((a, b) => a + b[3], 0);
  const other = loop.other.filter(inRun).map((o) => (o[1] - o[0]) / 1e6);
  const sortedOther = Float64Array.from(other).sort();
  const timers = new Map();
  for (const t of loop.timer.filter(inRun)) {
    const name = loop.labels[t[2]] ?? `timer ${t[2]}`;
    const e = timers.get(name) ?? { calls: 0, totalMs: 0, cpuMs: 0, maxMs: 0 };
    const d = (t[1] - t[0]) / 1e6;
    e.calls++;
    e.totalMs += d;
    e.cpuMs += t[3] / 1e6;
    e.maxMs = Math.max(e.maxMs, d);
    timers.set(name, e);
  }
  const young = loop.young.filter(inRun).map((y) => y[2] / 2 ** 20);
  return {
    youngMB: young.length ? { min: r2(Math.min(...young)), max: r2(Math.max(...young)) } : null,
    batches: batches.length,
    datagrams,
    perBatch: batches.length ? r2(datagrams / batches.length) : NaN,
    answeredLaterPercent: datagrams ? r2((100 * (datagrams - sentWith)) / datagrams) : NaN,
    batchMs: {
      p50: r2(weightedPct(dur, n, 50)),
      p99: r2(weightedPct(dur, n, 99)),
      p999: r2(weightedPct(dur, n, 99.9)),
      max: r2(dur.reduce((a, b) => (b > a ? b : a), 0)), // not Math.max(...dur): a quiet run has more batches than the stack has room for arguments
    },
    batchShareOfRunPercent: r2((100 * dur.reduce((a, b) => a + b, 0)) / (seconds * 1000)),
    other: {
      perSecondMs: r2(other.reduce((a, b) => a + b, 0) / seconds),
      stretches: other.length,
      over1ms: other.filter((x) => x >= 1).length,
      p99Ms: r2(sortedOther.length ? sortedOther[Math.ceil(0.99 * sortedOther.length) - 1] : 0),
      maxMs: r2(sortedOther.length ? sortedOther[sortedOther.length - 1] : 0),
    },
    timers: [...timers.entries()]
      .sort((a, b) => b[1].totalMs - a[1].totalMs)
      .slice(0, 5)
      .map(([name, e]) => ({ name, calls: e.calls, totalMs: r2(e.totalMs), cpuMs: r2(e.cpuMs), maxMs: r2(e.maxMs) })),
  };
}

/**
 * The UDP sockets in /proc/net/udp's text: { localPort, remotePort (0: not connected), rx (bytes
 * waiting in its receive queue), drops (receive-buffer drops) }.
 */
export function udpSockets(text) {
  const out = [];
  for (const line of text.split('\n')) {
    const f = line.trim().split(/\s+/);
    if (f.length < 13 || !/^\d+:$/.test(f[0])) continue;
    out.push({
      localPort: parseInt(f[1].split(':')[1], 16),
      remotePort: parseInt(f[2].split(':')[1], 16),
      rx: parseInt(f[4].split(':')[1], 16),
      drops: Number(f[f.length - 1]),
    });
  }
  return out;
}

/** Bytes waiting in the receive queue of the UDP socket bound to `port` (/proc/net/udp), or NaN. */
export function udpRxQueue(text, port) {
  let most = NaN;
  for (const u of udpSockets(text)) if (u.localPort === port && u.remotePort === 0 && !(u.rx <= most)) most = u.rx;
  return most;
}

/** CPU `cpu`'s idle time in /proc/stat's text, in ticks (10 ms), or NaN. */
export function idleTicks(text, cpu) {
  return cpuStatField(text, cpu, 3);
}

/** Syscalls a thread sleeps in to wait for a socket's data (x86-64 numbers). */
export const WAITS_FOR_DATA = new Set([
  7, // poll
  23, // select
  45, // recvfrom
  47, // recvmsg
  232, // epoll_wait
  270, // pselect6
  271, // ppoll
  281, // epoll_pwait
  299, // recvmmsg
  441, // epoll_pwait2
]);

/** A thread asleep ('S'), or woken by the data and not yet run ('R'), in one of those syscalls. */
const WAITING = new Set(['S', 'R']);

/**
 * Stretches of a frozen core in samples `[{ t (ns), rx (bytes waiting in the server's socket),
 * ran (ns, all the server's threads), state (the serving thread's, /proc stat), syscall (the
 * number it is in, or -1), idle (the core's idle ticks, 10 ms) }]`: from a sample to the next,
 * datagrams waited in the socket, not one of the server's threads ran, and the serving thread was
 * in a wait for data (WAITS_FOR_DATA), asleep or woken and not yet run (a stopped thread, 'T', or
 * one in the kernel's uninterruptible wait, 'D', does not count); kept when ≥ minMs and the core
 * was idle throughout (its idle ticks grew by the stretch's length, less one tick).
 * → [[startNs, endNs]].
 */
export function frozenStretches(samples, minMs = 30) {
  const out = [];
  let start = -1;
  const close = (k) => {
    if (start < 0) return;
    const a = samples[start];
    const b = samples[k];
    const ms = (b.t - a.t) / 1e6;
    if (ms >= minMs && (b.idle - a.idle) * 10 >= ms - 10) out.push([a.t, b.t]);
    start = -1;
  };
  for (let k = 1; k < samples.length; k++) {
    const p = samples[k - 1];
    const c = samples[k];
    const frozen =
      p.rx > 0 &&
      c.rx > 0 &&
      c.ran === p.ran &&
      WAITING.has(p.state) &&
      WAITING.has(c.state) &&
      WAITS_FOR_DATA.has(c.syscall);
    if (frozen && start < 0) start = k - 1;
    else if (!frozen) close(k - 1);
  }
  close(samples.length - 1);
  return out;
}

/**
 * The server's core asleep while queries wait in its socket (issue 23 point 3, BENCHMARKS.md
 * "A frozen core"): sampled every `everyMs`, the bytes waiting in the server's socket on `port`
 * (/proc/net/udp), the run time of all its threads (/proc/PID/task/*\/schedstat), its serving
 * thread's state and syscall (/proc/PID/task/TID/stat, syscall) and CPU `cpu`'s idle ticks
 * (/proc/stat); frozenStretches() picks the stretches. A sleeping thread is woken as soon as a
 * datagram reaches the socket it waits on, and a woken thread runs at once on an idle core: a
 * stretch with all of that true is no server's doing (its core, idle to the guest, was not
 * running; on this VM, the host's: in the stalls caught here the thread was woken, 'R', and
 * waited 74 ms for a core the guest counted as idle). stop() → [[startNs, endNs]] on process.hrtime's clock
 * (the latency client's). onLongWait(samples): called with every stretch ≥ minMs of datagrams
 * waiting, frozen or not.
 */
export function sampleFrozenCore(pid, tid, port, { cpu = 1, everyMs = 1, minMs = 30, onLongWait = null } = {}) {
  const read = (path) => {
    try {
      return readFileSync(path, 'latin1');
    } catch {
      return '';
    }
  };
  // The rest is read only while datagrams wait (a few reads of /proc per ms on the clients' core).
  const sample = () => {
    const t = Number(process.hrtime.bigint());
    const rx = udpRxQueue(read('/proc/net/udp'), port);
    if (!(rx > 0)) return { t, rx: 0, ran: NaN, state: '', syscall: -1, idle: NaN };
    let ran = 0;
    for (const ms of threadsRunMs(pid).values()) ran += ms;
    const st = read(`/proc/${pid}/task/${tid}/stat`);
    const sc = read(`/proc/${pid}/task/${tid}/syscall`);
    return {
      t,
      rx,
      ran,
      state: st.slice(st.lastIndexOf(')') + 2, st.lastIndexOf(')') + 3),
      syscall: /^\d+/.test(sc) ? Number(sc.split(' ')[0]) : -1,
      idle: idleTicks(read('/proc/stat'), cpu),
    };
  };
  // Only the samples of a stretch with datagrams waiting are kept, so a long run holds little.
  const kept = [];
  const out = [];
  let last = sample();
  const flush = () => {
    if (kept.length > 1) {
      out.push(...frozenStretches(kept, minMs));
      // onLongWait: every stretch ≥ minMs of datagrams waiting (any server drains its socket in
      // far less), frozen or not, with its samples: what --keep writes down, to see which test failed.
      if (onLongWait && (kept[kept.length - 1].t - kept[0].t) / 1e6 >= minMs) onLongWait(kept.slice());
    }
    kept.length = 0;
  };
  const timer = setInterval(() => {
    const s = sample();
    const candidate = last.rx > 0 && s.rx > 0; // datagrams waiting from one sample to the next
    if (candidate) {
      if (kept.length === 0) kept.push(last);
      kept.push(s);
    } else if (kept.length) {
      kept.push(s);
      flush();
    }
    last = s;
  }, everyMs);
  return () => {
    clearInterval(timer);
    flush();
    return out;
  };
}
