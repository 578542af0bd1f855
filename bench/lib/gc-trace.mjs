// GC pauses of a server run with `--trace-gc` (and lib/gc-observer.mjs), and whether the
// latency client's slow queries line up with them.

import { readFileSync } from 'node:fs';

// [pid:0x...]     2841 ms: Scavenge 6.9 (8.6) -> 6.2 (9.1) MB, 0.92 / 0.00 ms  (average mu = ...) allocation failure;
// [pid:0x...]    10234 ms: Mark-Compact 12.1 (15.2) -> 8.3 (14.9) MB, 3.21 / 0.01 ms  (+ 1.2 ms in 15 steps since
//   start of marking, biggest step 0.3 ms, walltime since start of marking 50 ms) (average mu = ...) reason
const LINE =
  /^\[(\d+):0x[0-9a-f]+\]\s+(\d+) ms: (.+?) ([\d.]+) \(([\d.]+)\) -> ([\d.]+) \(([\d.]+)\) MB, (?:pooled: [\d.]+ MB, )?([\d.]+) \/ ([\d.]+) ms(?:\s+\(\+ ([\d.]+) ms in (\d+) steps since start of marking, biggest step ([\d.]+) ms)?/;

/** --trace-gc lines → [{ pid, atMs, kind, pauseMs, externalMs, beforeMB, afterMB, afterCommittedMB, stepsMs, steps, biggestStepMs }]. */
export function parseTraceGc(text) {
  const out = [];
  for (const line of text.split('\n')) {
    const m = LINE.exec(line);
    if (!m) continue;
    out.push({
      pid: Number(m[1]),
      atMs: Number(m[2]),
      kind: m[3],
      beforeMB: Number(m[4]),
      afterMB: Number(m[6]),
      afterCommittedMB: Number(m[7]),
      pauseMs: Number(m[8]),
      externalMs: Number(m[9]),
      stepsMs: m[10] ? Number(m[10]) : 0,
      steps: m[11] ? Number(m[11]) : 0,
      biggestStepMs: m[12] ? Number(m[12]) : 0,
    });
  }
  return out;
}

/** gc-observer.mjs's file → [{ pid, startNs, durNs, kind }] sorted by start (ns as Numbers, monotonic). */
export function readGcLog(file) {
  let text;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return [];
  }
  const out = [];
  for (const line of text.split('\n')) {
    const f = line.trim().split(' ');
    if (f.length < 4) continue;
    out.push({ pid: Number(f[0]), startNs: Number(f[1]), durNs: Number(f[2]), kind: f[3] });
  }
  return out.sort((a, b) => a.startNs - b.startNs);
}

const r2 = (x) => Math.round(x * 100) / 100;

/** Count, total, max and the share of run time of trace-gc pauses, by kind and overall. */
export function summarizeTrace(events, seconds) {
  const byKind = {};
  for (const e of events) {
    const k = (byKind[e.kind] ??= { count: 0, totalMs: 0, maxMs: 0 });
    k.count++;
    k.totalMs += e.pauseMs;
    k.maxMs = Math.max(k.maxMs, e.pauseMs);
  }
  for (const k of Object.values(byKind)) k.totalMs = r2(k.totalMs);
  const pauses = events.map((e) => e.pauseMs).sort((a, b) => a - b);
  const total = pauses.reduce((a, b) => a + b, 0);
  const pct = (p) =>
    pauses.length ? pauses[Math.min(pauses.length - 1, Math.ceil((p / 100) * pauses.length) - 1)] : 0;
  const marking = events.filter((e) => e.steps > 0);
  return {
    count: events.length,
    totalMs: r2(total),
    maxMs: r2(pauses.length ? pauses[pauses.length - 1] : 0),
    p50Ms: r2(pct(50)),
    p99Ms: r2(pct(99)),
    over10ms: pauses.filter((p) => p > 10).length,
    over1ms: pauses.filter((p) => p > 1).length,
    shareOfRunPercent: seconds > 0 ? r2((100 * total) / (seconds * 1000)) : NaN,
    perSecond: seconds > 0 ? r2(events.length / seconds) : NaN,
    byKind,
    // Incremental marking runs in steps on the main thread between the atomic pauses.
    incrementalSteps: marking.length
      ? {
          cycles: marking.length,
          steps: marking.reduce((a, e) => a + e.steps, 0),
          totalMs: r2(marking.reduce((a, e) => a + e.stepsMs, 0)),
          biggestStepMs: Math.max(...marking.map((e) => e.biggestStepMs)),
        }
      : null,
    heapMB: events.length
      ? { min: Math.min(...events.map((e) => e.afterMB)), max: Math.max(...events.map((e) => e.beforeMB)) }
      : null,
  };
}

/** The latency client's --raw file → { startNs, skipS, rate, send: Float64Array, lat: Float64Array } (ns). */
export function readRaw(file) {
  const buf = readFileSync(file);
  const nl = buf.indexOf(10);
  const header = JSON.parse(buf.subarray(0, nl).toString());
  const body = new Float64Array(buf.buffer.slice(buf.byteOffset + nl + 1, buf.byteOffset + buf.length));
  const n = body.length / 2;
  const send = new Float64Array(n);
  const lat = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    send[i] = body[2 * i];
    lat[i] = body[2 * i + 1];
  }
  return {
    startNs: Number(BigInt(header.startNs)),
    skipS: header.skipS,
    rate: header.rate,
    send,
    lat,
    stalls: header.stalls ?? [],
  };
}

/**
 * Marks the queries whose time in flight [sent, sent + latency] overlaps one of `intervals`
 * ([start, end] ns, sorted, disjoint, on the same base as raw.send). Lost queries count as in
 * flight for timeoutNs. Returns a Uint8Array (1: overlaps).
 */
export function overlapping(raw, intervals, timeoutNs = 1e9) {
  const n = raw.send.length;
  const out = new Uint8Array(n);
  let g = 0;
  for (let i = 0; i < n; i++) {
    const s = raw.send[i];
    const e = s + (Number.isNaN(raw.lat[i]) ? timeoutNs : raw.lat[i]);
    while (g < intervals.length && intervals[g][1] <= s) g++; // sends are in order
    for (let k = g; k < intervals.length && intervals[k][0] < e; k++) {
      if (intervals[k][1] > s) {
        out[i] = 1;
        break;
      }
    }
  }
  return out;
}

/**
 * Do the slow queries line up with GC pauses? A query "meets" a pause when the pause overlaps
 * its time in flight [sent, answered] (lost queries: [sent, sent + 1 s]). Compares the share
 * of slow queries (≥ p99, ≥ p99.9) that met a pause with the share of all queries that did,
 * and lists the slowest queries with the pause they met.
 */
export function correlate(raw, gcs, { timeoutNs = 1e9, skip = null } = {}) {
  const from = Math.ceil(raw.skipS * raw.rate);
  const n = raw.send.length;
  const counted = (i) => !skip || !skip[i]; // skip: queries to leave out (e.g. in flight during a client stall)
  const gStart = Float64Array.from(gcs, (g) => g.startNs);
  const gEnd = Float64Array.from(gcs, (g) => g.startNs + g.durNs);
  // Pauses are disjoint and sorted (one process); the first pause that ends after t:
  const firstEndingAfter = (t) => {
    let lo = 0;
    let hi = gEnd.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (gEnd[mid] <= t) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  };
  const met = new Int32Array(n).fill(-1); // index of the (longest) pause met
  const lats = [];
  for (let i = from; i < n; i++) {
    if (!counted(i)) continue;
    const s = raw.startNs + raw.send[i];
    const l = Number.isNaN(raw.lat[i]) ? timeoutNs : raw.lat[i];
    lats.push(l);
    let best = -1;
    for (let g = firstEndingAfter(s); g < gStart.length && gStart[g] < s + l; g++) {
      if (best < 0 || gcs[g].durNs > gcs[best].durNs) best = g;
    }
    met[i] = best;
  }
  const sorted = Float64Array.from(lats).sort();
  const q = (p) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
  const share = (pred) => {
    let all = 0;
    let hit = 0;
    for (let i = from; i < n; i++) {
      if (!counted(i)) continue;
      const l = Number.isNaN(raw.lat[i]) ? timeoutNs : raw.lat[i];
      if (!pred(l)) continue;
      all++;
      if (met[i] >= 0) hit++;
    }
    return { queries: all, metPause: hit, percent: all ? r2((100 * hit) / all) : NaN };
  };
  const p99 = q(99);
  const p999 = q(99.9);
  // Of the queries that met a pause, how many were slow?
  let metAll = 0;
  let metSlow = 0;
  for (let i = from; i < n; i++) {
    if (met[i] < 0 || !counted(i)) continue;
    metAll++;
    if ((Number.isNaN(raw.lat[i]) ? timeoutNs : raw.lat[i]) >= p99) metSlow++;
  }
  const order = [];
  for (let i = from; i < n; i++) if (counted(i)) order.push(i);
  order.sort(
    (a, b) => (Number.isNaN(raw.lat[b]) ? timeoutNs : raw.lat[b]) - (Number.isNaN(raw.lat[a]) ? timeoutNs : raw.lat[a]),
  );
  // The slowest query of each of the 10 worst episodes (queries sent within 100 ms of a slower one are the same episode).
  const episodes = [];
  for (const i of order) {
    if (episodes.length >= 10) break;
    if (episodes.some((j) => Math.abs(raw.send[j] - raw.send[i]) < 100e6)) continue;
    episodes.push(i);
  }
  const slowest = episodes.map((i) => ({
    atS: r2(raw.send[i] / 1e9),
    latencyMs: Number.isNaN(raw.lat[i]) ? 'lost' : r2(raw.lat[i] / 1e6),
    gc: met[i] >= 0 ? `${gcs[met[i]].kind} ${r2(gcs[met[i]].durNs / 1e6)} ms` : null,
  }));
  // Per pause ≥ 1 ms: the slowest query that met it.
  const worstPerPause = new Float64Array(gcs.length);
  for (let i = from; i < n; i++) {
    if (met[i] >= 0 && counted(i))
      worstPerPause[met[i]] = Math.max(worstPerPause[met[i]], Number.isNaN(raw.lat[i]) ? timeoutNs : raw.lat[i]);
  }
  const runFrom = raw.startNs + raw.send[from];
  const runTo = raw.startNs + raw.send[n - 1];
  const longPauses = gcs
    .map((g, k) => ({ g, k }))
    .filter(({ g }) => g.durNs >= 1e6 && g.startNs >= runFrom && g.startNs <= runTo)
    .sort((a, b) => b.g.durNs - a.g.durNs)
    .slice(0, 10)
    .map(({ g, k }) => ({
      atS: r2((g.startNs - raw.startNs) / 1e9),
      kind: g.kind,
      pauseMs: r2(g.durNs / 1e6),
      slowestQueryMs: r2(worstPerPause[k] / 1e6),
    }));
  return {
    p99Ms: r2(p99 / 1e6),
    p999Ms: r2(p999 / 1e6),
    all: share(() => true),
    atLeastP99: share((l) => l >= p99),
    atLeastP999: share((l) => l >= p999),
    slowAmongMet: { queries: metAll, atLeastP99: metSlow, percent: metAll ? r2((100 * metSlow) / metAll) : NaN },
    slowest,
    longPauses,
  };
}
