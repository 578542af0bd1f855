// Preloaded into a server by bench/loop-tasks.mjs (`node --import <this file> ...`): times every
// setTimeout/setInterval/setImmediate callback of the serving thread (its synchronous part), by
// where it was scheduled from (the first frame in dist/ or src/), wall time and the process's
// CPU time (process.cpuUsage: other threads of the process, GC helpers and the fs thread pool,
// count too, so a maximum can include a collection that ran meanwhile).
//
// Does nothing unless LOOP_TASKS_OUT names a file. The first SIGUSR2 resets the figures (after
// start-up), the next writes them to LOOP_TASKS_OUT.<pid> as JSON.

import { writeFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';

const out = process.env.LOOP_TASKS_OUT;
if (out) {
  const stats = new Map();
  const cpu = () => {
    const u = process.cpuUsage();
    return (u.user + u.system) / 1000;
  };
  const where = (kind) => {
    const frames = (new Error().stack ?? '').split('\n').slice(1);
    const f = frames.find((l) => /\/(dist|src)\//.test(l) && !l.includes('loop-tasks'));
    const at = f
      ? f
          .trim()
          .replace(/^at /, '')
          .replace(/\(?\/.*?\/(dist|src)\//, '$1/')
          .replace(/\)$/, '')
      : '?';
    return `${kind} ${at}`;
  };
  const note = (label, wall, cpuMs) => {
    let s = stats.get(label);
    if (s === undefined) stats.set(label, (s = { n: 0, cpuSum: 0, cpuMax: 0, max: 0, d: [] }));
    s.n++;
    s.cpuSum += cpuMs;
    if (cpuMs > s.cpuMax) s.cpuMax = cpuMs;
    if (wall > s.max) s.max = wall;
    if (s.d.length < 50_000) s.d.push(wall);
  };
  const timed = (fn, label) =>
    function (...args) {
      const t0 = performance.now();
      const c0 = cpu();
      try {
        return fn.apply(this, args);
      } finally {
        note(label, performance.now() - t0, cpu() - c0);
      }
    };
  const labels = new WeakMap();
  for (const name of ['setTimeout', 'setInterval', 'setImmediate']) {
    const orig = globalThis[name];
    const wrapped = function (fn, ...rest) {
      if (typeof fn !== 'function') return orig.call(this, fn, ...rest);
      let l = labels.get(fn);
      if (l === undefined) labels.set(fn, (l = where(name)));
      return orig.call(this, timed(fn, l), ...rest);
    };
    Object.defineProperties(wrapped, Object.getOwnPropertyDescriptors(orig)); // util.promisify.custom
    globalThis[name] = wrapped;
  }
  let armed = false;
  process.on('SIGUSR2', () => {
    if (!armed) {
      armed = true;
      stats.clear();
      return;
    }
    const rows = [...stats].map(([label, s]) => {
      const d = s.d.slice().sort((a, b) => a - b);
      const q = (p) => d[Math.min(d.length - 1, Math.floor(p * d.length))] ?? 0;
      return { label, n: s.n, p50: q(0.5), p99: q(0.99), max: s.max, cpuMean: s.cpuSum / s.n, cpuMax: s.cpuMax };
    });
    rows.sort((a, b) => b.cpuMean * b.n - a.cpuMean * a.n);
    writeFileSync(`${out}.${process.pid}`, JSON.stringify(rows, null, 1));
  });
}
