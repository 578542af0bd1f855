// Time the hypervisor took a CPU away from this machine (steal), per CPU, for the latency bench
// (issue 23 point 3). On a virtual machine a vCPU can stand still because the host runs something
// else; inside the guest nothing shows it (the server's thread is "running", its run-queue wait
// does not grow, no other task ran), yet every query in hand waits. The kernel adds up that time
// per CPU from the paravirtual steal clock and /proc/stat shows it (8th value of each `cpuN`
// line, in USER_HZ ticks: 10 ms on Linux x86-64, whatever the kernel's HZ). 10 ms is too coarse
// to blame one query, so the bench uses it per 5 s window and per run: how much of the server's
// core the host took in each window, beside that window's p99 (BENCHMARKS.md, "steal").

import { readFileSync } from 'node:fs';

/** ms per /proc/stat tick (USER_HZ is 100 on every Linux x86-64 and arm64 build). */
export const TICK_MS = 10;

/** Value `i` (0: user, 3: idle, 7: steal) of CPU `cpu`'s line in /proc/stat's text, in ticks, or NaN when not there. */
export function cpuStatField(text, cpu, i) {
  const m = new RegExp(`^cpu${cpu} (.*)$`, 'm').exec(text);
  if (!m) return NaN;
  const f = m[1].trim().split(/\s+/);
  return f.length > i ? Number(f[i]) : NaN;
}

/** The steal ticks of CPU `cpu` in /proc/stat's text, or NaN when that CPU or its steal field is not there. */
export function parseSteal(text, cpu) {
  return cpuStatField(text, cpu, 7);
}

function readSteal(cpu) {
  try {
    return parseSteal(readFileSync('/proc/stat', 'latin1'), cpu);
  } catch {
    return NaN; // not Linux
  }
}

/**
 * Samples CPU `cpu`'s steal every `everyMs` until stop(), which returns { samples: [[tNs, ms]] }:
 * each time the count rose, when (process.hrtime's clock, CLOCK_MONOTONIC like the latency
 * client's) and by how many ms; and { totalMs, seconds } over the whole sampling.
 */
export function sampleSteal(cpu, everyMs = 5) {
  const samples = [];
  const t0 = Number(process.hrtime.bigint());
  const first = readSteal(cpu);
  let last = first;
  const timer = setInterval(() => {
    const s = readSteal(cpu);
    if (s > last) samples.push([Number(process.hrtime.bigint()), (s - last) * TICK_MS]);
    if (Number.isFinite(s)) last = s;
  }, everyMs);
  return () => {
    clearInterval(timer);
    const end = readSteal(cpu);
    const t1 = Number(process.hrtime.bigint());
    if (end > last) samples.push([t1, (end - last) * TICK_MS]);
    return {
      samples,
      totalMs: Number.isFinite(first) && Number.isFinite(end) ? (end - first) * TICK_MS : NaN,
      seconds: (t1 - t0) / 1e9,
    };
  };
}

/** ms of steal counted in [t0Ns, t1Ns) (ns on the sampler's clock). */
export function stealIn(samples, t0Ns, t1Ns) {
  let ms = 0;
  for (const [t, x] of samples) if (t >= t0Ns && t < t1Ns) ms += x;
  return ms;
}

/** Spearman's rank correlation of two equal-length series (NaN when fewer than 3 or either is constant). */
export function spearman(x, y) {
  const n = x.length;
  if (n !== y.length || n < 3) return NaN;
  const rank = (v) => {
    const order = v.map((_, i) => i).sort((a, b) => v[a] - v[b]);
    const r = new Array(n);
    for (let i = 0; i < n;) {
      let j = i;
      while (j + 1 < n && v[order[j + 1]] === v[order[i]]) j++;
      for (let k = i; k <= j; k++) r[order[k]] = (i + j) / 2 + 1; // ties share their mean rank
      i = j + 1;
    }
    return r;
  };
  const rx = rank(x);
  const ry = rank(y);
  const mean = (n + 1) / 2;
  let sxy = 0;
  let sxx = 0;
  let syy = 0;
  for (let i = 0; i < n; i++) {
    sxy += (rx[i] - mean) * (ry[i] - mean);
    sxx += (rx[i] - mean) ** 2;
    syy += (ry[i] - mean) ** 2;
  }
  return sxx && syy ? sxy / Math.sqrt(sxx * syy) : NaN;
}
