// Figures of a soak run: latency percentiles per window, the RSS trend, and the text report.

export function percentile(values, p) {
  if (values.length === 0) return NaN;
  const sorted = Float64Array.from(values).sort();
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i];
}

/** Least-squares slope of y over x. */
export function slope(points) {
  const n = points.length;
  if (n < 2) return 0;
  let sx = 0;
  let sy = 0;
  for (const p of points) {
    sx += p.x;
    sy += p.y;
  }
  const mx = sx / n;
  const my = sy / n;
  let num = 0;
  let den = 0;
  for (const p of points) {
    num += (p.x - mx) * (p.y - my);
    den += (p.x - mx) ** 2;
  }
  return den === 0 ? 0 : num / den;
}

/**
 * RSS samples [{ atS, kib }] → first, last, max and the slope in MiB per minute. The slope
 * leaves out the first minute when the run is long enough (start-up growth: JIT, caches filling).
 */
export function rssTrend(samples) {
  if (samples.length === 0) return null;
  const mib = (k) => Math.round((k / 1024) * 10) / 10;
  const settled = samples.length > 8 ? samples.filter((s) => s.atS >= 60) : samples;
  const perMinute = slope(settled.map((s) => ({ x: s.atS / 60, y: s.kib / 1024 })));
  return {
    firstMiB: mib(samples[0].kib),
    lastMiB: mib(samples[samples.length - 1].kib),
    maxMiB: mib(Math.max(...samples.map((s) => s.kib))),
    growthMiB: mib(samples[samples.length - 1].kib - samples[0].kib),
    slopeMiBPerMinute: Math.round(perMinute * 100) / 100,
    slopeFrom: settled[0].atS,
  };
}

export function latencySummary(checker) {
  const r2 = (x) => Math.round(x * 100) / 100;
  const windows = checker.windows.map((w) => ({
    startS: w.startMs / 1000,
    queries: w.latencies.length + w.lost,
    lost: w.lost,
    p50Ms: r2(percentile(w.latencies, 50)),
    p99Ms: r2(percentile(w.latencies, 99)),
    maxMs: r2(w.latencies.length ? Math.max(...w.latencies) : NaN),
  }));
  // The last window is cut short by the end of the run: it is shown but not judged.
  const full = windows.filter((w) => w.queries >= (checker.qps * checker.windowMs) / 2000);
  const p99s = full.map((w) => w.p99Ms).filter(Number.isFinite);
  return {
    p50Ms: r2(percentile(checker.latencies, 50)),
    p99Ms: r2(percentile(checker.latencies, 99)),
    p999Ms: r2(percentile(checker.latencies, 99.9)),
    maxMs: r2(checker.latencies.length ? Math.max(...checker.latencies) : NaN),
    windowP99MedianMs: r2(percentile(p99s, 50)),
    windowP99MaxMs: r2(p99s.length ? Math.max(...p99s) : NaN),
    windows,
  };
}

const pct = (part, whole) => (whole > 0 ? `${((100 * part) / whole).toFixed(3)}%` : 'n/a');

export function renderReport(r) {
  const lines = [];
  const L = (s = '') => lines.push(s);
  L(
    `# clusterdns soak: ${r.config.minutes} min, ${r.config.workers} worker(s), ${r.config.changesPerMinute} Service changes/min, reload every ${r.config.reloadSeconds} s`,
  );
  L();
  L(`Machine: ${r.machine}. Started ${r.startedAt}; whole run ${r.wallSeconds} s.`);
  L(
    `Cluster: ${r.cluster.initialServices} Services in ${r.cluster.namespaces} namespaces; ${r.cluster.changes} changes during the soak (${r.cluster.modified} new ClusterIPs, ${r.cluster.deleted} deleted, ${r.cluster.created} created); ${r.reloads.length} reloads (${r.reloadsApplied} logged \`Reloading complete\`, once per reload however many workers).`,
  );
  L(`Corefile: ${r.corefileShape}`);
  L();
  L('## Load');
  L(
    `- maximum (closed loop, ${r.probe.seconds} s): ${Math.round(r.probe.qps)} QPS; soak rate ${r.config.loadPercent}% of it: **${r.rate} QPS** (\`dnsperf ... -Q ${r.rate}\`)`,
  );
  L(
    `- clusterdns: ${r.soak.sent} sent, ${r.soak.completed} completed, **${r.soak.lost} lost (${pct(r.soak.lost, r.soak.sent)})**, ${Math.round(r.soak.qps)} QPS achieved; rcodes ${JSON.stringify(r.soak.rcodes)}`,
  );
  if (r.soak.qps < r.rate * 0.95) {
    L(
      `  - dnsperf reached ${Math.round((100 * r.soak.qps) / r.rate)}% of the target rate: with 1,000 queries outstanding it waits for answers, so the server was at its capacity under the soak's conditions (the closed-loop maximum was measured before churn and reloads began)`,
    );
  }
  if (r.peer) {
    L(
      `- unbound at the same rate for ${r.peer.seconds} s: ${r.peer.sent} sent, **${r.peer.lost} lost (${pct(r.peer.lost, r.peer.sent)})**, ${Math.round(r.peer.qps)} QPS`,
    );
  } else L(`- unbound: not measured (${r.peerSkipped})`);
  L(`- other work on the machine during the soak: ${r.otherWorkPercent}% of both cores`);
  L();
  L('## Answers (own client, fixed rate, checked against the API state)');
  const c = r.checker;
  L(
    `- ${c.sent} queries at ${c.qps}/s: ${c.right} right, **${c.wrong} wrong**, ${c.servfail} SERVFAIL, ${c.otherRcode} other rcodes, ${c.lost} unanswered within ${c.timeoutMs} ms`,
  );
  L(
    `- answers that were already out of date when asked (but within ${c.lagMs} ms of the change, so counted right): ${c.late}; the stalest ${Math.round(c.maxStalenessMs)} ms`,
  );
  for (const w of c.wrongSamples.slice(0, 5)) L(`  - wrong: ${JSON.stringify(w)}`);
  L();
  L('## Latency (own client)');
  const l = r.latency;
  L(
    `- p50 ${l.p50Ms} ms, **p99 ${l.p99Ms} ms**, p99.9 ${l.p999Ms} ms, max ${l.maxMs} ms; per-${c.windowMs / 1000}-s-window p99: median ${l.windowP99MedianMs} ms, worst ${l.windowP99MaxMs} ms`,
  );
  L();
  L('| window | queries | lost | p50 ms | p99 ms | max ms |');
  L('|---:|---:|---:|---:|---:|---:|');
  for (const w of l.windows) L(`| ${w.startS}s | ${w.queries} | ${w.lost} | ${w.p50Ms} | ${w.p99Ms} | ${w.maxMs} |`);
  L();
  L('## Memory (RSS of the clusterdns process tree, every 10 s)');
  const m = r.rss;
  L(
    `- first ${m.firstMiB} MiB, last ${m.lastMiB} MiB, max ${m.maxMiB} MiB, growth ${m.growthMiB} MiB; slope **${m.slopeMiBPerMinute} MiB/min** (from ${m.slopeFrom} s)`,
  );
  L(`- samples (s: MiB): ${r.rssSamples.map((s) => `${s.atS}: ${Math.round(s.kib / 1024)}`).join(', ')}`);
  const last = r.rssSamples[r.rssSamples.length - 1];
  if (last?.perProcessKiB)
    L(
      `- at the end, per process (primary first): ${last.perProcessKiB.map((k) => `${Math.round(k / 1024)} MiB`).join(', ')}`,
    );
  if (r.heap) {
    L(
      `- the workers' JS heap in use (nodejs_heap_size_used_bytes, summed): first ${r.heap.firstMiB} MiB, last ${r.heap.lastMiB} MiB, max ${r.heap.maxMiB} MiB; slope **${r.heap.slopeMiBPerMinute} MiB/min** (from ${r.heap.slopeFrom} s)`,
    );
  }
  L();
  L(
    `Server log: ${r.serverLog.errors} error lines, ${r.serverLog.panics} plugin panics${r.serverLog.sample.length ? `; e.g. ${JSON.stringify(r.serverLog.sample)}` : ''}`,
  );
  return lines.join('\n') + '\n';
}
