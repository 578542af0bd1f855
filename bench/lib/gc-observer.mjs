// Preloaded into a server by bench/latency.mjs --gc (`node --import <this file> bin/clusterdns ...`)
// to log every GC pause with a timestamp on CLOCK_MONOTONIC (process.hrtime.bigint()), the
// clock the latency client stamps its queries with, so that pauses and slow queries can be
// lined up. Does nothing unless CLUSTERDNS_GC_LOG names the file to append to.
//
// One line per GC: `<pid> <start ns, monotonic> <duration ns> <kind>` (kind: minor, major,
// incremental, weakcb). The observer runs off the hot path: V8 reports GCs to Node, which
// queues the entries and hands them over in batches; the lines are written once a second.

import { appendFileSync } from 'node:fs';
import { PerformanceObserver, constants, performance } from 'node:perf_hooks';

const file = process.env.CLUSTERDNS_GC_LOG;
if (file) {
  // performance.now() and process.hrtime.bigint() are both uv_hrtime(): one offset maps them.
  const originNs = process.hrtime.bigint() - BigInt(Math.round(performance.now() * 1e6));
  const kinds = {
    [constants.NODE_PERFORMANCE_GC_MINOR]: 'minor',
    [constants.NODE_PERFORMANCE_GC_MAJOR]: 'major',
    [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: 'incremental',
    [constants.NODE_PERFORMANCE_GC_WEAKCB]: 'weakcb',
  };
  let pending = [];
  const flush = () => {
    if (pending.length === 0) return;
    const text = pending.join('');
    pending = [];
    try {
      appendFileSync(file, text);
    } catch {
      /* the bench went away */
    }
  };
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      const start = originNs + BigInt(Math.round(e.startTime * 1e6));
      pending.push(
        `${process.pid} ${start} ${Math.round(e.duration * 1e6)} ${kinds[e.detail?.kind] ?? e.detail?.kind}\n`,
      );
    }
  }).observe({ entryTypes: ['gc'] });
  setInterval(flush, 1000).unref();
  process.on('exit', flush);
}
