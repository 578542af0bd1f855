// How each server under test is configured and started. Every server serves the same
// workload (lib/workload.mjs) on its own 127.0.0.1 high port.
//
// A server definition: { name, kind, optional, unpinnedByDefault?, forScenario?, label(ctx),
// start(ctx) → process entry, ready(ctx, proc)? (awaited once it answers), queries(ctx), samples(ctx)?,
// setup(ctx)? }. ctx = { root, dir,
// port, workload, mode, pin, workers, startProcess, nodeArgs?, env? }.

import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import dgram from 'node:dgram';
import net from 'node:net';
import { pinThreads, startProcess } from './procs.mjs';
import { waitAnswering } from './check.mjs';
import { mixQueries, mixSamples } from './mix.mjs';

function logFile(ctx, name) {
  return join(ctx.dir, `${name}-${ctx.mode}.log`);
}

function onPath(bin) {
  for (const d of (process.env.PATH ?? '').split(':')) if (d && existsSync(join(d, bin))) return true;
  return false;
}

/**
 * The node flags a build's bin/clusterdns starts a server with: its #! line's NODE_OPTIONS, then
 * the flags it puts on node's command line. Benches that start `node FLAGS bin/clusterdns` (so
 * that they can add their own flags, or pin the process) take them from here, so that each build
 * is measured with the flags it ships (README "Node flags"), not a copy kept in the bench.
 */
export function launcherNodeArgs(root) {
  const line = readFileSync(join(root, 'bin/clusterdns'), 'utf8').split('\n', 1)[0];
  const words = (s) => (s ?? '').split(/\s+/).filter((w) => w.startsWith('-'));
  const env = /"NODE_OPTIONS=([^"$]*)/.exec(line)?.[1];
  const cli = /\snode((?:\s+-\S+)*)\s*$/.exec(line)?.[1];
  if (cli === undefined) throw new Error(`${root}/bin/clusterdns: no node command in its #! line`);
  return [...words(env), ...words(cli)];
}

export function clusterdnsServer(scenario) {
  return {
    name: `clusterdns-${scenario.name}`,
    kind: 'clusterdns',
    scenario,
    optional: false,
    label: (ctx) => `clusterdns \`${scenario.name}\` (${ctx.workers} worker${ctx.workers > 1 ? 's' : ''})`,
    queries: (ctx) => scenario.queries(ctx),
    samples: scenario.samples,
    setup: scenario.setup,
    start(ctx) {
      const conf = join(ctx.dir, `Corefile-${scenario.name}-${ctx.mode}`);
      const root = scenario.root?.() ?? ctx.root;
      writeFileSync(conf, scenario.corefile(ctx));
      // ctx.nodeArgs (e.g. --trace-gc) and ctx.env are for bench scripts that observe the server.
      return startProcess(
        this.name,
        process.execPath,
        // As deployed (bin/clusterdns, npm start, the image): the build's own launcher flags.
        [
          ...launcherNodeArgs(root),
          ...(ctx.nodeArgs ?? []),
          join(root, 'bin/clusterdns'),
          '-conf',
          conf,
          '-workers',
          String(ctx.workers),
          '-quiet',
        ],
        { pin: ctx.pin, logFile: logFile(ctx, this.name), cwd: ctx.root, env: ctx.env },
      );
    },
  };
}

export const unbound = {
  name: 'unbound',
  kind: 'peer',
  optional: false,
  available: () => (onPath('unbound') ? null : 'unbound is not installed'),
  label: (ctx) => (ctx.workers > 1 ? `unbound (${ctx.workers} threads, so-reuseport)` : 'unbound (1 thread)'),
  queries: (ctx) => ctx.workload.queryFile,
  start(ctx) {
    const w = ctx.workload;
    const lines = [
      'server:',
      '  interface: 127.0.0.1',
      `  port: ${ctx.port}`,
      '  do-ip6: no',
      `  num-threads: ${ctx.workers}`,
      ...(ctx.workers > 1 ? ['  so-reuseport: yes'] : []),
      '  module-config: "iterator"',
      '  do-daemonize: no',
      '  chroot: ""',
      '  username: ""',
      '  use-syslog: no',
      '  logfile: ""',
      '  pidfile: ""',
      '  verbosity: 0',
      `  directory: "${ctx.dir}"`,
      '  access-control: 127.0.0.0/8 allow',
      '  local-zone: "cluster.local." static',
      ...(this.extraLines ?? []),
      ...w.records.map((r) => `  local-data: "${r.name}. ${w.ttl} IN A ${r.ip}"`),
      'remote-control:',
      '  control-enable: no',
    ];
    const conf = join(ctx.dir, `${this.name}-${ctx.mode}.conf`);
    writeFileSync(conf, lines.join('\n') + '\n');
    return startProcess(this.name, 'unbound', ['-d', '-c', conf], { pin: ctx.pin, logFile: logFile(ctx, this.name) });
  },
};

export const dnsmasq = {
  name: 'dnsmasq',
  kind: 'peer',
  optional: false,
  unpinnedByDefault: false, // single-threaded: unpinned adds little; --all measures it

  available: () => (onPath('dnsmasq') || existsSync('/usr/sbin/dnsmasq') ? null : 'dnsmasq is not installed'),
  label: () => 'dnsmasq',
  queries: (ctx) => ctx.workload.queryFile,
  start(ctx) {
    const w = ctx.workload;
    const lines = [
      'no-resolv',
      'no-hosts',
      'local=/cluster.local/',
      ...w.records.map((r) => `host-record=${r.name},${r.ip},${w.ttl}`),
    ];
    const conf = join(ctx.dir, `${this.name}-${ctx.mode}.conf`);
    writeFileSync(conf, lines.join('\n') + '\n');
    return startProcess(
      this.name,
      'dnsmasq',
      [
        '-k',
        '-C',
        conf,
        `--port=${ctx.port}`,
        '--listen-address=127.0.0.1',
        '--bind-interfaces',
        '--user=root',
        `--pid-file=${join(ctx.dir, `${this.name}-${ctx.mode}.pid`)}`,
        '--log-facility=-',
      ],
      { pin: ctx.pin, logFile: logFile(ctx, this.name) },
    );
  },
};

// kresd: blocks .local names unless told to pass them, the hints module has one TTL for
// all its records, and queries without RD are REFUSED (dnsperf and dig set RD).
export const kresd = {
  name: 'kresd',
  kind: 'peer',
  optional: true,
  unpinnedByDefault: false,

  available: () => (onPath('kresd') || existsSync('/usr/sbin/kresd') ? null : 'kresd is not installed'),
  label: () => 'kresd',
  queries: (ctx) => ctx.workload.queryFile,
  start(ctx) {
    const rundir = join(ctx.dir, `${this.name}-${ctx.mode}`);
    mkdirSync(rundir, { recursive: true });
    const conf = join(rundir, 'config.lua');
    writeFileSync(
      conf,
      [
        `net.listen('127.0.0.1', ${ctx.port}, { kind = 'dns' })`,
        "modules = { 'hints > iterate' }",
        `hints.add_hosts('${ctx.workload.hostsFile}')`,
        `hints.ttl(${ctx.workload.ttl})`,
        ...(this.policyLines?.(ctx) ?? ["policy.add(policy.suffix(policy.PASS, {todname('cluster.local.')}))"]),
        "trust_anchors.remove('.')",
        'cache.size = 20 * MB',
        '',
      ].join('\n'),
    );
    return startProcess(this.name, 'kresd', ['-n', '-c', conf, rundir], {
      pin: ctx.pin,
      logFile: logFile(ctx, this.name),
    });
  },
};

export const bareNode = {
  name: 'bare-node',
  kind: 'ceiling',
  optional: false,
  label: (ctx) => `bare Node responder (${ctx.workers > 1 ? `${ctx.workers} workers` : '1 process'})`,
  queries: (ctx) => ctx.workload.queryFile,
  start(ctx) {
    return startProcess(
      this.name,
      process.execPath,
      [
        join(ctx.root, 'bench/bare-responder.mjs'),
        '--port',
        String(ctx.port),
        '--hosts',
        ctx.workload.hostsFile,
        '--ttl',
        String(ctx.workload.ttl),
        '--workers',
        String(ctx.workers),
      ],
      { pin: ctx.pin, logFile: logFile(ctx, this.name) },
    );
  },
};

/** Writes Knot's config and the cluster.local zone (SOA, NS and the workload's A records) into `dir`. */
function knotConfig(ctx, dir, port) {
  mkdirSync(dir, { recursive: true });
  const w = ctx.workload;
  const zone = join(dir, 'cluster.local.zone');
  writeFileSync(
    zone,
    [
      '$ORIGIN cluster.local.',
      `@ ${w.ttl} IN SOA ns.dns.cluster.local. hostmaster.cluster.local. 1 7200 1800 86400 ${w.ttl}`,
      `@ ${w.ttl} IN NS ns.dns.cluster.local.`,
      `ns.dns ${w.ttl} IN A 127.0.0.1`,
      ...w.records.map((r) => `${r.name}. ${w.ttl} IN A ${r.ip}`),
      '',
    ].join('\n'),
  );
  const conf = join(dir, 'knot.conf');
  writeFileSync(
    conf,
    [
      'server:',
      `  rundir: "${dir}"`,
      '  user: root:root',
      `  listen: 127.0.0.1@${port}`,
      // One thread per kind, as one pinned core gets: the per-core comparison.
      '  udp-workers: 1',
      '  tcp-workers: 1',
      '  background-workers: 1',
      'database:',
      `  storage: "${dir}"`,
      'control:',
      `  listen: "${join(dir, 'knot.sock')}"`,
      'log:',
      '  - target: stderr',
      '    any: warning',
      'template:',
      '  - id: default',
      `    storage: "${dir}"`,
      '    zonefile-sync: -1',
      '    journal-content: none',
      'zone:',
      '  - domain: cluster.local',
      `    file: "${zone}"`,
      '',
    ].join('\n'),
  );
  return conf;
}

const knotAvailable = () =>
  onPath('knotd') || existsSync('/usr/sbin/knotd') ? null : 'knotd is not installed (Debian: knot)';
const knotd = () => (onPath('knotd') ? 'knotd' : '/usr/sbin/knotd');

// Knot DNS, authoritative for cluster.local with the workload's names: the fastest server
// measured here per query, the mark the issue sets for clusterdns's CPU and tail.
export const knot = {
  name: 'knot',
  kind: 'peer',
  optional: true,
  unpinnedByDefault: false, // one UDP worker: the per-core comparison is the pinned one
  available: knotAvailable,
  label: () => 'Knot DNS (authoritative zone, 1 UDP worker)',
  queries: (ctx) => ctx.workload.queryFile,
  start(ctx) {
    const conf = knotConfig(ctx, join(ctx.dir, `${this.name}-${ctx.mode}`), ctx.port);
    return startProcess(this.name, knotd(), ['-c', conf], { pin: ctx.pin, logFile: logFile(ctx, this.name) });
  },
  // Knot pins UDP worker i to CPU i % ncpus itself once it starts (its udp_master), over the
  // affinity taskset gave it: its one worker would run on CPU 0 beside dnsperf. Once it
  // answers, put every thread back where the bench pinned the server.
  async ready(ctx, proc) {
    await pinThreads(proc.pid, ctx.pin ?? `0-${cpus().length - 1}`);
  },
};

/**
 * An upstream for forwarding measurements: Knot DNS (the bare Node responder if knotd is
 * missing) serving the workload on its own port. Pinned, it runs on CPU 0 with the load
 * generator, not on the server's CPU 1: there it would take the server's core (and its
 * cycles would show as the forwarder's lost throughput), while on CPU 0 it costs ~7 µs a
 * query next to dnsperf, far below what saturates that core at forwarding rates. Sets
 * ctx.upstreamPort; ctx.upstream = { pid, name } for scripts that measure it directly.
 */
export async function startUpstream(ctx) {
  const port = await freePort(new Set([ctx.port]));
  const name = `upstream-${ctx.mode}-${ctx.port}`;
  const pin = ctx.pin == null ? null : 0;
  const logFile = join(ctx.dir, `${name}.log`);
  const proc =
    knotAvailable() === null
      ? startProcess(name, knotd(), ['-c', knotConfig(ctx, join(ctx.dir, name), port)], { pin, logFile })
      : startProcess(
          name,
          process.execPath,
          [
            join(ctx.root, 'bench/bare-responder.mjs'),
            '--port',
            String(port),
            '--hosts',
            ctx.workload.hostsFile,
            '--ttl',
            String(ctx.workload.ttl),
          ],
          { pin, logFile },
        );
  ctx.upstreamPort = port;
  ctx.upstream = { pid: proc.pid, name: knotAvailable() === null ? 'Knot DNS' : 'bare Node responder', port };
  await waitAnswering(
    port,
    ctx.workload.records[0].name,
    20000,
    () => proc.child.exitCode === null && proc.child.signalCode === null,
  );
}

/** Sample checks of the data only, for servers whose TTLs legitimately differ (caches off or counting down). */
export const dataSamples = (ctx) =>
  ctx.workload.records.slice(0, 5).map((r) => ({ name: r.name, type: 'A', data: r.ip }));

// Forwarders with their caches off, to compare clusterdns's forward path like for like.
export const dnsmasqForward = {
  name: 'dnsmasq-forward',
  kind: 'peer',
  optional: true,
  unpinnedByDefault: false,
  available: () => (onPath('dnsmasq') || existsSync('/usr/sbin/dnsmasq') ? null : 'dnsmasq is not installed'),
  label: () => 'dnsmasq forwarding, cache off',
  queries: (ctx) => ctx.workload.queryFile,
  setup: startUpstream,
  start(ctx) {
    const conf = join(ctx.dir, `dnsmasq-forward-${ctx.mode}.conf`);
    writeFileSync(
      conf,
      ['no-resolv', 'no-hosts', 'cache-size=0', `server=127.0.0.1#${ctx.upstreamPort}`, ''].join('\n'),
    );
    return startProcess(
      this.name,
      'dnsmasq',
      [
        '-k',
        '-C',
        conf,
        `--port=${ctx.port}`,
        '--listen-address=127.0.0.1',
        '--bind-interfaces',
        '--user=root',
        `--pid-file=${join(ctx.dir, `dnsmasq-forward-${ctx.mode}.pid`)}`,
        '--log-facility=-',
      ],
      { pin: ctx.pin, logFile: logFile(ctx, this.name) },
    );
  },
};

export const unboundForward = {
  name: 'unbound-forward',
  kind: 'peer',
  optional: true,
  unpinnedByDefault: false,
  available: () => (onPath('unbound') || existsSync('/usr/sbin/unbound') ? null : 'unbound is not installed'),
  label: () => 'unbound forwarding, cache off',
  queries: (ctx) => ctx.workload.queryFile,
  samples: dataSamples, // cache-max-ttl 0 gives TTL 0
  setup: startUpstream,
  // unbound has no switch for its cache: the smallest caches it takes, and nothing kept
  // (cache-max-ttl 0), so every query goes to the upstream.
  cacheLines: [
    '  cache-max-ttl: 0',
    '  cache-max-negative-ttl: 0',
    '  msg-cache-size: 0',
    '  rrset-cache-size: 0',
    '  msg-cache-slabs: 1',
    '  rrset-cache-slabs: 1',
  ],
  start(ctx) {
    const conf = join(ctx.dir, `${this.name}-${ctx.mode}.conf`);
    writeFileSync(
      conf,
      [
        'server:',
        `  interface: 127.0.0.1@${ctx.port}`,
        '  do-daemonize: no',
        '  chroot: ""',
        '  username: ""',
        '  pidfile: ""',
        '  use-syslog: no',
        `  directory: "${ctx.dir}"`,
        '  num-threads: 1',
        '  do-not-query-localhost: no',
        ...this.cacheLines,
        '  prefetch: no',
        '  module-config: "iterator"',
        '  access-control: 127.0.0.0/8 allow',
        'forward-zone:',
        '  name: "."',
        `  forward-addr: 127.0.0.1@${ctx.upstreamPort}`,
        '',
      ].join('\n'),
    );
    return startProcess(this.name, 'unbound', ['-d', '-c', conf], { pin: ctx.pin, logFile: logFile(ctx, this.name) });
  },
};

// The same forwarder with its default caches, next to clusterdns `cache` (cache + forward).
export const unboundForwardCache = {
  ...unboundForward,
  name: 'unbound-forward-cache',
  label: () => 'unbound forwarding, cache on',
  samples: dataSamples, // TTLs count down
  cacheLines: [],
};

// The peers of the `mix` scenario (lib/mix.mjs): the same servers and names, asked the mix's
// query file (A, AAAA for IPv4-only names, NXDOMAIN names). Measured pinned only by default,
// and only when clusterdns-mix is (forScenario).
export const unboundMix = {
  ...unbound,
  name: 'unbound-mix',
  forScenario: 'mix', // bench/run.mjs runs it only with clusterdns-mix (or when named)
  unpinnedByDefault: false,
  label: (ctx) => `${unbound.label(ctx)}, \`mix\` queries`,
  queries: mixQueries,
  samples: mixSamples,
  // Negative answers carry the zone's SOA, as from clusterdns (static local-zone alone sends none).
  extraLines: [
    '  local-data: "cluster.local. 30 IN SOA ns.dns.cluster.local. hostmaster.cluster.local. 1 7200 1800 86400 30"',
  ],
};

export const dnsmasqMix = {
  ...dnsmasq,
  name: 'dnsmasq-mix',
  forScenario: 'mix', // bench/run.mjs runs it only with clusterdns-mix (or when named)
  label: () => 'dnsmasq, `mix` queries',
  queries: mixQueries,
  samples: mixSamples,
};

// kresd has no authoritative zone for its hints: a name the hints module does not know is sent
// to the iterator (SERVFAIL here, offline). So only the workload's names pass the policy, and
// every other name under .local gets kresd's built-in NXDOMAIN for .local (special-use names).
export const kresdMix = {
  ...kresd,
  name: 'kresd-mix',
  forScenario: 'mix', // bench/run.mjs runs it only with clusterdns-mix (or when named)
  label: () => 'kresd, `mix` queries',
  queries: mixQueries,
  samples: mixSamples,
  policyLines: (ctx) => [
    'local known = {}',
    `for line in io.lines('${ctx.workload.hostsFile}') do`,
    "  local _, name = line:match('^(%S+)%s+(%S+)')",
    "  if name then known[todname(name .. '.')] = true end",
    'end',
    'policy.add(function(_, query) if known[query:name()] then return policy.PASS end end)',
  ],
};

export const peers = [
  unbound,
  dnsmasq,
  kresd,
  knot,
  bareNode,
  dnsmasqForward,
  unboundForward,
  unboundForwardCache,
  unboundMix,
  dnsmasqMix,
  kresdMix,
];

/** A port in 20000–59999 that is free for both UDP and TCP on 127.0.0.1. */
export async function freePort(taken = new Set()) {
  for (let i = 0; i < 200; i++) {
    const port = 20000 + Math.floor(Math.random() * 40000);
    if (taken.has(port)) continue;
    if ((await canBindUdp(port)) && (await canBindTcp(port))) {
      taken.add(port);
      return port;
    }
  }
  throw new Error('no free port found');
}

function canBindUdp(port) {
  return new Promise((resolve) => {
    const s = dgram.createSocket('udp4');
    s.once('error', () => resolve(false));
    s.bind(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

function canBindTcp(port) {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}
