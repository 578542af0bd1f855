// Preload (`--import`) for bench/alloc.mjs: V8's sampling heap profiler, counting the objects
// the young and old collections freed too (what a DNS server allocates per query is almost all
// short-lived). SIGUSR2 marks the start of the measured window (after start-up and warm-up);
// on exit CLUSTERDNS_ALLOC_PROFILE gets the bytes sampled since the mark: in all, per
// allocating function (self) and per innermost frame in clusterdns's own code.
import { Session } from 'node:inspector';
import { writeFileSync } from 'node:fs';

const out = process.env.CLUSTERDNS_ALLOC_PROFILE;
if (out) {
  const session = new Session();
  session.connect();
  session.post('HeapProfiler.startSampling', {
    samplingInterval: Number(process.env.CLUSTERDNS_ALLOC_INTERVAL ?? 1024),
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: true,
  });
  const where = (cf) =>
    `${cf.functionName || '(anonymous)'} ${cf.url.replace(/^.*\/dist\/src\//, 'src/').replace(/^.*\/node_modules\//, '')}:${cf.lineNumber + 1}`;
  const summarize = (head) => {
    const self = new Map();
    const ours = new Map();
    let total = 0;
    const stack = [];
    const walk = (n) => {
      // The profiler's own work (the protocol's JSON at the mark) is not the server's.
      if (n.callFrame.url.startsWith('node:inspector') || n.callFrame.url.endsWith('alloc-profile.mjs')) return;
      stack.push(n.callFrame);
      if (n.selfSize > 0) {
        total += n.selfSize;
        const k = where(n.callFrame);
        self.set(k, (self.get(k) ?? 0) + n.selfSize);
        let mine = '(no frame of ours)';
        for (let i = stack.length - 1; i >= 0; i--)
          if (stack[i].url.includes('/dist/src/')) {
            mine = where(stack[i]);
            break;
          }
        ours.set(mine, (ours.get(mine) ?? 0) + n.selfSize);
      }
      for (const c of n.children) walk(c);
      stack.pop();
    };
    walk(head);
    return { total, self, ours };
  };
  const profile = () => {
    let r = null;
    // An in-process session answers synchronously.
    session.post('HeapProfiler.getSamplingProfile', (err, res) => {
      if (!err) r = summarize(res.profile.head);
    });
    return r;
  };
  let mark = { total: 0, self: new Map(), ours: new Map() };
  process.on('SIGUSR2', () => {
    mark = profile() ?? mark;
  });
  process.on('exit', () => {
    const now = profile();
    if (!now) return;
    const diff = (a, b) =>
      [...a]
        .map(([k, v]) => [k, v - (b.get(k) ?? 0)])
        .filter(([, v]) => v > 0)
        .sort((x, y) => y[1] - x[1])
        .slice(0, 30);
    writeFileSync(
      out,
      JSON.stringify({
        bytes: now.total - mark.total,
        self: diff(now.self, mark.self),
        ours: diff(now.ours, mark.ours),
      }),
    );
  });
}
