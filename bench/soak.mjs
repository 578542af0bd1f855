#!/usr/bin/env node
// The soak (RELIABILITY.md): clusterdns with `kubernetes` (against the test API server, run in
// this process) and `cache 30`, under dnsperf at a fixed share of its measured maximum, while
// 1,000 Services a minute change and the Corefile is rewritten and reloaded every minute. It
// reports lost queries next to unbound's at the same rate (measured in the same run), wrong
// answers (a checker compares sampled answers with the API state), RSS over time and p99.
//
//   npm run soak -- --minutes 10            # the run (builds first)
//   node bench/soak.mjs --minutes 1 --json out.json
//
// Options: --minutes N (10), --workers N (CPUs), --load PERCENT (70), --changes-per-minute N
// (1000), --reload-seconds S (60; the first reload comes at S/2), --probe-seconds S (10),
// --peer-seconds S (min(60, run)), --no-peer, --check-qps N (100), --lag-ms MS (2000),
// --namespaces N (20) --per-namespace N (100), --json FILE, --keep (keep the temp dir).
// Every process it starts is stopped when it ends, fails or is interrupted.

import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import dgram from 'node:dgram';
import dnsPacket from 'dns-packet';
import { descendants, killAllSync, startProcess, statusKiB, stopAll, stopProcess, treeRssKiB } from './lib/procs.mjs';
import { runDnsperf } from './lib/dnsperf.mjs';
import { cpuSnapshot, otherCpuPercent } from './lib/cpu.mjs';
import { machineInfo, machineLine } from './lib/report.mjs';
import { waitAnswering } from './lib/check.mjs';
import { SoakCluster } from './lib/soak-cluster.mjs';
import { SoakChecker } from './lib/soak-checker.mjs';
import { latencySummary, renderReport, rssTrend } from './lib/soak-report.mjs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');

const { values: opt } = parseArgs({
  options: {
    minutes: { type: 'string', default: '10' },
    workers: { type: 'string', default: String(availableParallelism()) },
    load: { type: 'string', default: '70' },
    'changes-per-minute': { type: 'string', default: '1000' },
    'reload-seconds': { type: 'string', default: '60' },
    'probe-seconds': { type: 'string', default: '10' },
    'peer-seconds': { type: 'string' },
    'no-peer': { type: 'boolean', default: false },
    'check-qps': { type: 'string', default: '100' },
    'lag-ms': { type: 'string', default: '2000' },
    namespaces: { type: 'string', default: '20' },
    'per-namespace': { type: 'string', default: '100' },
    json: { type: 'string' },
    keep: { type: 'boolean', default: false },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (opt.help) {
  process.stdout.write(
    readFileSync(fileURLToPath(import.meta.url), 'utf8')
      .split('\n')
      .slice(1, 16)
      .map((l) => l.replace(/^\/\/ ?/, ''))
      .join('\n') + '\n',
  );
  process.exit(0);
}
const num = (name) => {
  const v = Number(opt[name]);
  if (!Number.isFinite(v) || v <= 0) {
    console.error(`--${name}: "${opt[name]}" is not a positive number`);
    process.exit(2);
  }
  return v;
};
const cfg = {
  minutes: num('minutes'),
  workers: Math.floor(num('workers')),
  loadPercent: num('load'),
  changesPerMinute: num('changes-per-minute'),
  reloadSeconds: num('reload-seconds'),
  probeSeconds: Math.ceil(num('probe-seconds')),
  peerSeconds:
    opt['peer-seconds'] === undefined ? Math.min(60, Math.ceil(num('minutes') * 60)) : Math.ceil(num('peer-seconds')),
  checkQps: num('check-qps'),
  lagMs: num('lag-ms'),
  namespaces: Math.floor(num('namespaces')),
  perNamespace: Math.floor(num('per-namespace')),
};

const log = (s) => process.stderr.write(`[soak ${new Date().toISOString().slice(11, 19)}] ${s}\n`);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ---- cleanup: every process we start dies with us ---------------------------------------
let tmp = null;
let api = null;
let cleaning = null;
const timers = new Set();
function cleanup() {
  cleaning ??= (async () => {
    for (const t of timers) clearInterval(t);
    await stopAll();
    await api?.close().catch(() => {});
    if (tmp && (opt.keep || process.exitCode)) log(`kept ${tmp} (Corefile, query file, server logs)`);
    else if (tmp) rmSync(tmp, { recursive: true, force: true });
  })();
  return cleaning;
}
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(sig, () => {
    log(`${sig}: stopping every process the soak started`);
    process.exitCode = 1;
    void cleanup().finally(() => process.exit(sig === 'SIGINT' ? 130 : 143));
  });
}
process.on('exit', () => killAllSync());
// Started by a test or a script that went away: stop too, taking everything down with us.
const parentPid = process.ppid;
const parentWatch = setInterval(() => {
  if (process.ppid === parentPid) return;
  log('the parent process is gone: stopping');
  process.exitCode = 1;
  void cleanup().finally(() => process.exit(1));
}, 1000);
parentWatch.unref();

function onPath(bin) {
  return (process.env.PATH ?? '').split(':').some((d) => d && existsSync(join(d, bin)));
}

/** One A query with dns-packet; resolves to the rcode, or null on timeout. */
function ask(port, name, timeoutMs = 500) {
  return new Promise((res) => {
    const s = dgram.createSocket('udp4');
    const t = setTimeout(() => {
      s.close();
      res(null);
    }, timeoutMs);
    s.on('message', (m) => {
      clearTimeout(t);
      s.close();
      try {
        res(dnsPacket.decode(m).rcode);
      } catch {
        res('garbage');
      }
    });
    s.send(dnsPacket.encode({ type: 'query', id: 1, questions: [{ type: 'A', name }] }), port, '127.0.0.1');
  });
}

/** nodejs_heap_size_used_bytes from /metrics (the workers' sum), in KiB; null when unreadable. */
async function heapUsedKiB(metricsPort) {
  try {
    const text = await (
      await fetch(`http://127.0.0.1:${metricsPort}/metrics`, { signal: AbortSignal.timeout(3000) })
    ).text();
    const m = /^nodejs_heap_size_used_bytes(?:\{[^}]*\})? (\S+)$/m.exec(text);
    return m ? Number(m[1]) / 1024 : null;
  } catch {
    return null;
  }
}

function corefileText(port, metricsPort, apiUrl, generation) {
  // Each reload really changes the configuration: the kubernetes TTL alternates 5 / 7.
  return `# soak configuration, generation ${generation}
.:${port} {
    bind 127.0.0.1
    errors
    prometheus 127.0.0.1:${metricsPort}
    cache 30
    kubernetes cluster.local in-addr.arpa {
        endpoint ${apiUrl}
        ttl ${generation % 2 === 0 ? 5 : 7}
    }
}
`;
}

function unboundConf(port, dir, threads, localData) {
  return (
    [
      'server:',
      '  interface: 127.0.0.1',
      `  port: ${port}`,
      '  do-ip6: no',
      `  num-threads: ${threads}`,
      ...(threads > 1 ? ['  so-reuseport: yes'] : []),
      '  module-config: "iterator"',
      '  do-daemonize: no',
      '  chroot: ""',
      '  username: ""',
      '  use-syslog: no',
      '  logfile: ""',
      '  pidfile: ""',
      '  verbosity: 0',
      `  directory: "${dir}"`,
      '  access-control: 127.0.0.0/8 allow',
      '  local-zone: "cluster.local." static',
      ...localData,
      'remote-control:',
      '  control-enable: no',
    ].join('\n') + '\n'
  );
}

async function main() {
  const started = Date.now();
  for (const tool of ['dnsperf']) if (!onPath(tool)) throw new Error(`${tool} is not installed (.ci/run installs it)`);
  const kubeapiJs = join(root, 'dist/test/helpers/kubeapi.js');
  if (!existsSync(kubeapiJs))
    throw new Error('dist/test/helpers/kubeapi.js is missing: run `npm run soak` (it builds first) or `npm run build`');
  const { KubeApiServer } = await import(pathToFileURL(kubeapiJs).href);
  const { freePort } = await import(pathToFileURL(join(root, 'dist/test/helpers/ports.js')).href);
  tmp = mkdtempSync(join(tmpdir(), 'clusterdns-soak-'));
  const machine = machineLine(await machineInfo());
  log(`machine: ${machine}`);

  // ---- the cluster and the server --------------------------------------------------------
  api = await KubeApiServer.create({ bookmarkIntervalMs: 10_000 });
  const cluster = new SoakCluster(api, { namespaces: cfg.namespaces, perNamespace: cfg.perNamespace });
  cluster.populate();
  const port = await freePort();
  const metricsPort = await freePort();
  const corefile = join(tmp, 'Corefile');
  let generation = 0;
  writeFileSync(corefile, corefileText(port, metricsPort, api.url, generation));
  const serverLog = join(tmp, 'clusterdns.log');
  const server = startProcess(
    'clusterdns',
    process.execPath,
    [join(root, 'bin/clusterdns'), '-conf', corefile, '-workers', String(cfg.workers), '-quiet'],
    {
      logFile: serverLog,
      cwd: tmp,
      // Should this process be killed outright, the server stops by itself.
      env: { ...process.env, CLUSTERDNS_EXIT_WITH_PARENT: '1' },
    },
  );
  let serverExit = null;
  server.exited.then((s) => (serverExit = s));
  const probeName = cluster.live[0].fqdn.slice(0, -1);
  for (let i = 0; ; i++) {
    if (serverExit)
      throw new Error(`clusterdns exited (${JSON.stringify(serverExit)}):\n${readFileSync(serverLog, 'utf8')}`);
    if ((await ask(port, probeName)) === 'NOERROR') break;
    if (i > 100) throw new Error(`clusterdns did not answer:\n${readFileSync(serverLog, 'utf8')}`);
    await sleep(200);
  }
  log(
    `clusterdns (${cfg.workers} workers) answers on 127.0.0.1:${port}; ${cluster.live.length} Services in ${cfg.namespaces} namespaces`,
  );
  const queryFile = cluster.writeQueryFile(tmp);

  // ---- the maximum, then unbound at 70% of it ------------------------------------------------
  const probe = await runDnsperf({ port, queryFile, seconds: cfg.probeSeconds });
  const rate = Math.max(100, Math.floor((probe.qps * cfg.loadPercent) / 100));
  log(`maximum: ${Math.round(probe.qps)} QPS over ${cfg.probeSeconds} s; soak rate ${rate} QPS (${cfg.loadPercent}%)`);
  let peer = null;
  let peerSkipped = null;
  if (opt['no-peer']) peerSkipped = '--no-peer';
  else if (!onPath('unbound')) peerSkipped = 'unbound is not installed';
  else {
    const peerPort = await freePort();
    const conf = join(tmp, 'unbound.conf');
    writeFileSync(conf, unboundConf(peerPort, tmp, cfg.workers, cluster.localData()));
    const unbound = startProcess('unbound', 'unbound', ['-d', '-c', conf], { logFile: join(tmp, 'unbound.log') });
    try {
      await waitAnswering(peerPort, probeName, 10_000);
      const r = await runDnsperf({
        port: peerPort,
        queryFile,
        seconds: cfg.peerSeconds,
        outstanding: 1000,
        maxQps: rate,
      });
      peer = {
        seconds: cfg.peerSeconds,
        sent: r.sent,
        completed: r.completed,
        lost: r.lost,
        qps: r.qps,
        rcodes: r.rcodes,
      };
      log(`unbound at ${rate} QPS for ${cfg.peerSeconds} s: ${r.lost} of ${r.sent} lost`);
    } finally {
      await stopProcess(unbound);
    }
  }

  // ---- the soak ----------------------------------------------------------------------------
  const seconds = Math.ceil(cfg.minutes * 60);
  const checker = new SoakChecker({ port, cluster, qps: cfg.checkQps, lagMs: cfg.lagMs });
  const rssSamples = [];
  const t0 = Date.now();
  // RSS of the process tree from /proc, and the workers' JS heap in use from /metrics (summed):
  // RSS that grows while the heap does not is the allocator, not a leak.
  const heapSamples = [];
  const sampleRss = () => {
    const atS = Math.round((Date.now() - t0) / 1000);
    rssSamples.push({
      atS,
      kib: treeRssKiB(server.pid),
      perProcessKiB: [server.pid, ...descendants(server.pid)].map((p) => statusKiB(p, 'VmRSS')),
    });
    void heapUsedKiB(metricsPort).then((kib) => kib !== null && heapSamples.push({ atS, kib }));
  };
  const reloads = [];
  const reload = () => {
    generation++;
    writeFileSync(corefile, corefileText(port, metricsPort, api.url, generation));
    process.kill(server.pid, 'SIGUSR1');
    reloads.push({ atS: Math.round((Date.now() - t0) / 1000), generation });
    log(`reload ${generation}: Corefile rewritten (kubernetes ttl ${generation % 2 === 0 ? 5 : 7}), SIGUSR1`);
  };
  sampleRss();
  const rssTimer = setInterval(sampleRss, 10_000);
  timers.add(rssTimer);
  let reloadTimer = null;
  const firstReload = setTimeout(
    () => {
      reload();
      reloadTimer = setInterval(reload, cfg.reloadSeconds * 1000);
      timers.add(reloadTimer);
    },
    (cfg.reloadSeconds * 1000) / 2,
  );
  const changesBefore = { ...cluster.changes };
  cluster.startChurn(cfg.changesPerMinute);
  await checker.start();
  const cpu0 = cpuSnapshot([server.pid]);
  log(`soak: ${seconds} s at ${rate} QPS, ${cfg.changesPerMinute} changes/min, checker at ${cfg.checkQps} QPS`);
  const soak = await runDnsperf({ port, queryFile, seconds, outstanding: 1000, maxQps: rate });
  const cpu1 = cpuSnapshot([server.pid]);
  clearTimeout(firstReload);
  clearInterval(reloadTimer);
  cluster.stopChurn();
  await checker.stop();
  clearInterval(rssTimer);
  sampleRss();
  if (serverExit) throw new Error(`clusterdns exited during the soak (${JSON.stringify(serverExit)})`);
  await stopProcess(server);
  const logText = readFileSync(serverLog, 'utf8');
  const errorLines = logText.split('\n').filter((l) => l.includes('[ERROR]') || l.includes('[FATAL]'));

  const report = {
    config: cfg,
    machine,
    startedAt: new Date(started).toISOString(),
    wallSeconds: Math.round((Date.now() - started) / 1000),
    corefileShape:
      '.:PORT { bind 127.0.0.1; errors; prometheus; cache 30; kubernetes cluster.local in-addr.arpa { endpoint TEST-API; ttl 5|7 } }',
    cluster: {
      namespaces: cfg.namespaces,
      initialServices: cfg.namespaces * cfg.perNamespace,
      changes: cluster.changeCount - (changesBefore.modified + changesBefore.deleted + changesBefore.created),
      modified: cluster.changes.modified - changesBefore.modified,
      deleted: cluster.changes.deleted - changesBefore.deleted,
      created: cluster.changes.created - changesBefore.created,
    },
    reloads,
    reloadsApplied: (logText.match(/\[INFO\] Reloading complete/g) ?? []).length,
    probe: { seconds: cfg.probeSeconds, qps: probe.qps, lost: probe.lost },
    rate,
    soak: {
      seconds,
      sent: soak.sent,
      completed: soak.completed,
      lost: soak.lost,
      qps: soak.qps,
      rcodes: soak.rcodes,
      avgLatencyMs: soak.avgLatencyS * 1000,
    },
    peer,
    peerSkipped,
    otherWorkPercent: Math.round(otherCpuPercent(cpu0, cpu1)),
    checker: {
      qps: cfg.checkQps,
      timeoutMs: checker.timeoutMs,
      lagMs: checker.lagMs,
      windowMs: checker.windowMs,
      sent: checker.sent,
      answered: checker.answered,
      lost: checker.lost,
      right: checker.right,
      wrong: checker.wrong,
      servfail: checker.servfail,
      otherRcode: checker.otherRcode,
      late: checker.late,
      maxStalenessMs: checker.maxStalenessMs,
      wrongSamples: checker.wrongSamples,
    },
    latency: latencySummary(checker),
    rss: rssTrend(rssSamples),
    rssSamples,
    heap: rssTrend(heapSamples),
    heapSamples,
    serverLog: {
      errors: errorLines.length,
      panics: (logText.match(/plugin failed/g) ?? []).length,
      sample: errorLines.slice(0, 3),
    },
  };
  process.stdout.write(renderReport(report));
  if (opt.json) writeFileSync(opt.json, JSON.stringify(report, null, 2) + '\n');
}

main()
  .catch((e) => {
    process.exitCode = 1;
    log(`failed: ${e.stack ?? e}`);
  })
  .finally(() => cleanup());
