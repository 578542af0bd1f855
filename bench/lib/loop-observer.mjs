// Preloaded into a server by bench/latency.mjs --gc (`node --import <this file> bin/clusterdns ...`)
// to record what its serving thread does besides waiting, on CLOCK_MONOTONIC (the clock the
// latency client stamps its queries with), so that slow queries can be lined up with it:
//
//   batch   one call of the native UDP addon's onBatch: from the datagrams read (recvmmsg) to
//           the return, after which their answers leave in one sendmmsg. Every query of the
//           batch waits for all of it: the batching delay.
//   other   the loop's active time between two batches (libuv's idle time subtracted): timers,
//           other sockets, V8's foreground tasks, the batch's sendmmsg. Placed right after the
//           batch before it (libuv runs the rest of an iteration, then blocks in epoll).
//   timer   a setTimeout/setInterval/setImmediate callback of the server taking ≥ 20 µs, with
//           where it was scheduled from (the first frame outside node:), and the CPU time the
//           process used meanwhile (process.cpuUsage; the rest of the wall time it was preempted).
//   self    this observer writing its file (once a second), to be left out.
//   young   once a second: the young generation's size (getHeapSpaceStatistics' new_space), which
//           starts small and grows toward --max-semi-space-size only as objects survive.
//
// Does nothing unless CLUSTERDNS_LOOP_LOG names the file. Records are Float64 × 5:
// kind (1 batch, 2 other, 3 timer, 4 self, 5 young), start ns, duration ns, a, b (batch: datagrams and
// answers sent with the batch; timer: index into the labels written to FILE.labels.json and
// ns on a CPU; young: its size in bytes).

import { appendFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { getHeapSpaceStatistics } from 'node:v8';

const file = process.env.CLUSTERDNS_LOOP_LOG;
if (file) {
  const realSetInterval = globalThis.setInterval;
  const originNs = Number(process.hrtime.bigint()) - performance.now() * 1e6;
  const ns = (ms) => originNs + ms * 1e6;
  const FIELDS = 5;
  const CAP = 1 << 16; // records per buffer, flushed once a second or when full
  let buf = new Float64Array(CAP * FIELDS);
  let n = 0;
  const put = (kind, startMs, endMs, a, b) => {
    if (n === CAP) flush();
    const k = n++ * FIELDS;
    buf[k] = kind;
    buf[k + 1] = ns(startMs);
    buf[k + 2] = (endMs - startMs) * 1e6;
    buf[k + 3] = a;
    buf[k + 4] = b;
  };
  const labels = [];
  const labelOf = new WeakMap();
  const writeLabels = () => {
    try {
      writeFileSync(`${file}.labels.json`, JSON.stringify(labels));
    } catch {
      /* the bench went away */
    }
  };
  function flush() {
    const t0 = performance.now();
    if (n > 0) {
      try {
        appendFileSync(file, new Uint8Array(buf.buffer, 0, n * FIELDS * 8));
      } catch {
        /* the bench went away */
      }
      n = 0;
    }
    put(4, t0, performance.now(), 0, 0);
    const young = getHeapSpaceStatistics().find((x) => x.space_name === 'new_space');
    if (young) put(5, t0, t0, young.space_size, 0);
  }

  // Batches: wrap the callback the server hands to the addon's start(). The addon is a CommonJS
  // module whose exports are read-only: the require cache gets an object that inherits them
  // with its own start(), and the server's require of the same file returns that.
  const root = resolve(dirname(process.argv[1] ?? '.'), '..');
  const addonPath = process.env.CLUSTERDNS_NATIVE_UDP_ADDON || join(root, 'native/build/Release/udpbatch.node');
  let lastEnd = -1;
  let idleAtEnd = 0;
  try {
    const req = createRequire(import.meta.url);
    const addon = req(addonPath);
    const start = addon.start;
    const wrapped = Object.create(addon);
    req.cache[req.resolve(addonPath)].exports = wrapped;
    const wrap = function (sock, onBatch) {
      // Every argument passes through: after the datagrams' count, the answers the addon's own
      // table already put in the out slab (their count and bytes), which the server appends to.
      return start.call(addon, sock, (count, ...rest) => {
        const t0 = performance.now();
        const idle = performance.nodeTiming.idleTime;
        if (lastEnd >= 0) {
          const active = t0 - lastEnd - (idle - idleAtEnd);
          if (active >= 0.02) put(2, lastEnd, lastEnd + active, 0, 0);
        }
        let sent = 0;
        try {
          sent = onBatch(count, ...rest);
        } finally {
          lastEnd = performance.now();
          idleAtEnd = performance.nodeTiming.idleTime;
          put(1, t0, lastEnd, count, sent);
        }
        return sent;
      });
    };
    Object.defineProperty(wrapped, 'start', { value: wrap }); // (an inherited read-only property cannot be assigned)
  } catch (e) {
    process.stderr.write(`loop-observer: no native UDP addon at ${addonPath} (${e.message}): batches not recorded\n`);
  }

  // Timers: time each callback, labelled by where it was scheduled from (once per function).
  const label = (fn) => {
    let i = labelOf.get(fn);
    if (i === undefined) {
      const frames = (new Error().stack ?? '').split('\n').slice(2);
      const at = frames.find((f) => !f.includes('node:') && !f.includes('loop-observer.mjs')) ?? frames[0] ?? '';
      i = labels.length;
      labels.push(
        `${fn.name || '(anonymous)'} ${at
          .trim()
          .replace(/^at /, '')
          .replace(/^.*\/(dist|src)\//, '$1/')
          .replace(/\)$/, '')}`,
      );
      labelOf.set(fn, i);
      writeLabels();
    }
    return i;
  };
  // Timers are few: the process's CPU time around each costs nothing that matters. (On the one
  // core the server is pinned to, no other thread of it runs while the callback does.)
  const cpuNs = () => {
    const u = process.cpuUsage();
    return (u.user + u.system) * 1e3;
  };
  const timed = (fn, i) =>
    function (...args) {
      const c0 = cpuNs();
      const t0 = performance.now();
      try {
        return fn.apply(this, args);
      } finally {
        const t1 = performance.now();
        if (t1 - t0 >= 0.02) put(3, t0, t1, i, cpuNs() - c0);
      }
    };
  for (const name of ['setTimeout', 'setInterval', 'setImmediate']) {
    const orig = globalThis[name];
    const wrapped = function (fn, ...rest) {
      return typeof fn === 'function' ? orig.call(this, timed(fn, label(fn)), ...rest) : orig.call(this, fn, ...rest);
    };
    Object.defineProperties(wrapped, Object.getOwnPropertyDescriptors(orig)); // util.promisify.custom
    globalThis[name] = wrapped;
  }

  realSetInterval(flush, 1000).unref();
  process.on('exit', () => {
    flush();
    writeLabels();
  });
}
