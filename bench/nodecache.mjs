#!/usr/bin/env node
// Node-local cache benchmark: cluster-name lookups through `clusterdns nodecache` (cache warm)
// against the same lookups sent straight to the cluster DNS, in the same run, with dnsperf.
//
//   sudo node bench/nodecache.mjs [--rounds 3] [--seconds 10] [--rate 2000] [--keep]
//
// Topology (network namespaces made here, deleted on exit, nothing else touched):
//   [cdns-bench-X-node] agent on 169.254.20.10 + 10.96.0.10 (iptables NOTRACK rules), dnsperf
//        10.250.N.1/30 ── veth ── 10.250.N.2/30 [cdns-bench-X-dns] clusterdns serving the demo
//        cluster (examples/demo/cluster.yaml) with the kubernetes plugin, -workers 1.
// Pinned: both servers under `taskset -c 1`, dnsperf under `taskset -c 0` (2-core machine).
// Two loads per target: closed loop (-q 100, max QPS) and an open-loop fixed rate (--rate QPS,
// latency when not saturated). Rounds are interleaved, the starting target rotating; medians.

import { execFile, spawn } from 'node:child_process';
import { randomBytes, randomInt } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, cpus, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs, promisify } from 'node:util';

const run = promisify(execFile);
const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const BIN = join(root, 'bin/clusterdns');

const { values: flags } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    seconds: { type: 'string', default: '10' },
    rate: { type: 'string', default: '2000' },
    keep: { type: 'boolean' },
    help: { type: 'boolean', short: 'h' },
  },
});
if (flags.help) {
  process.stdout.write('usage: sudo node bench/nodecache.mjs [--rounds N] [--seconds S] [--rate QPS] [--keep]\n');
  process.exit(0);
}
const rounds = Number(flags.rounds);
const seconds = Number(flags.seconds);
const rate = Number(flags.rate);
if (process.getuid?.() !== 0) {
  console.error('bench/nodecache.mjs makes network namespaces and iptables rules: run it as root');
  process.exit(2);
}
if (!existsSync(join(root, 'dist/src/cli.js'))) {
  console.error('dist/ is missing: npm run build first');
  process.exit(2);
}

const tag = randomBytes(3).toString('hex');
const NODE = `cdns-bench-${tag}-node`;
const DNS = `cdns-bench-${tag}-dns`;
const third = randomInt(0, 256);
const fourth = randomInt(0, 64) * 4;
const nodeAddr = `10.250.${third}.${fourth + 1}`;
const dnsAddr = `10.250.${third}.${fourth + 2}`;
const dir = mkdtempSync(join(tmpdir(), 'nodecache-bench-'));
const children = [];

const inNs = (ns, file, args) => run('ip', ['netns', 'exec', ns, file, ...args], { maxBuffer: 16 << 20 });

function startIn(ns, name, args, env) {
  const log = join(dir, `${name}.log`);
  const child = spawn('ip', ['netns', 'exec', ns, 'taskset', '-c', '1', ...args], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  child.on('exit', () => writeFileSync(log, out));
  children.push(child);
  return { child, output: () => out };
}

async function cleanup() {
  for (const c of children) if (c.exitCode === null) c.kill('SIGTERM');
  await new Promise((r) => setTimeout(r, 1500));
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  for (const ns of [NODE, DNS]) await run('ip', ['netns', 'del', ns]).catch(() => {});
  if (!flags.keep) rmSync(dir, { recursive: true, force: true });
}
process.on('SIGINT', () => void cleanup().then(() => process.exit(130)));

async function waitFor(what, fn, ms = 15000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await fn().catch(() => false)) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what}`);
}

function parseDnsperf(text) {
  const num = (re) => Number(re.exec(text)?.[1] ?? NaN);
  return {
    qps: num(/Queries per second:\s+([\d.]+)/),
    avgMs: num(/Average Latency \(s\):\s+([\d.]+)/) * 1000,
    minMs: num(/Average Latency \(s\):\s+[\d.]+ \(min ([\d.]+)/) * 1000,
    maxMs: num(/Average Latency \(s\):.*max ([\d.]+)\)/) * 1000,
    sdMs: num(/Latency StdDev \(s\):\s+([\d.]+)/) * 1000,
    lost: num(/Queries lost:\s+(\d+)/),
    completed: num(/Queries completed:\s+(\d+)/),
    noerror: num(/NOERROR (\d+)/),
  };
}

/** CPU seconds (user + system) a process has used so far, from /proc (100 ticks/s). */
function cpuSeconds(pid) {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) / 100;
}

let serverPids = [];

async function dnsperf(server, queryFile, mode) {
  const cpu0 = serverPids.reduce((a, pid) => a + cpuSeconds(pid), 0);
  const load = mode === 'max' ? ['-q', '100', '-Q', '1000000'] : ['-q', '100', '-Q', String(rate)];
  const { stdout } = await inNs(NODE, 'taskset', [
    '-c',
    '0',
    'dnsperf',
    '-s',
    server,
    '-p',
    '53',
    '-d',
    queryFile,
    '-c',
    '4',
    '-T',
    '1',
    ...load,
    '-l',
    String(seconds),
  ]);
  const r = parseDnsperf(stdout);
  if (!Number.isFinite(r.qps)) throw new Error(`dnsperf against ${server} failed:\n${stdout}`);
  // Both servers' CPU per answered query: robust when other jobs share the machine.
  r.cpuUsPerQuery = ((serverPids.reduce((a, pid) => a + cpuSeconds(pid), 0) - cpu0) * 1e6) / Math.max(1, r.completed);
  r.load = Number(readFileSync('/proc/loadavg', 'utf8').split(' ')[0]);
  return r;
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

async function main() {
  // Namespaces, veth, kube-proxy stand-in (DNAT for the kube-dns IP, conntrack on).
  for (const ns of [NODE, DNS]) {
    await run('ip', ['netns', 'add', ns]);
    await inNs(ns, 'ip', ['link', 'set', 'lo', 'up']);
  }
  await inNs(NODE, 'ip', ['link', 'add', 'cdv0', 'type', 'veth', 'peer', 'name', 'cdv1', 'netns', DNS]);
  await inNs(NODE, 'ip', ['addr', 'add', `${nodeAddr}/30`, 'dev', 'cdv0']);
  await inNs(DNS, 'ip', ['addr', 'add', `${dnsAddr}/30`, 'dev', 'cdv1']);
  await inNs(NODE, 'ip', ['link', 'set', 'cdv0', 'up']);
  await inNs(DNS, 'ip', ['link', 'set', 'cdv1', 'up']);
  await inNs(NODE, 'ip', ['route', 'add', 'default', 'via', dnsAddr]);
  for (const proto of ['udp', 'tcp']) {
    await inNs(NODE, 'iptables', [
      '-w',
      '5',
      '-t',
      'nat',
      '-A',
      'OUTPUT',
      '-d',
      '10.96.0.10/32',
      '-p',
      proto,
      '--dport',
      '53',
      '-j',
      'DNAT',
      '--to-destination',
      `${dnsAddr}:53`,
    ]);
  }
  await inNs(NODE, 'iptables', [
    '-w',
    '5',
    '-A',
    'INPUT',
    '-m',
    'conntrack',
    '--ctstate',
    'ESTABLISHED,RELATED',
    '-j',
    'ACCEPT',
  ]);

  writeFileSync(
    join(dir, 'cluster.Corefile'),
    `.:53 {\n    bind ${dnsAddr}\n    kubernetes cluster.local in-addr.arpa ip6.arpa {\n        manifests ${join(root, 'examples/demo/cluster.yaml')}\n        pods insecure\n        fallthrough in-addr.arpa ip6.arpa\n    }\n    prometheus 127.0.0.1:9153\n}\n`,
  );
  const cluster = startIn(DNS, 'cluster', [
    process.execPath,
    BIN,
    '-conf',
    join(dir, 'cluster.Corefile'),
    '-workers',
    '1',
    '-quiet',
  ]);
  writeFileSync(join(dir, 'resolv.conf'), `nameserver ${dnsAddr}\n`);
  const agent = startIn(
    NODE,
    'agent',
    [
      process.execPath,
      BIN,
      'nodecache',
      '-localip',
      '169.254.20.10,10.96.0.10',
      '-conf',
      join(dir, 'Corefile'),
      '-upstreamsvc',
      'kube-dns-upstream',
      '-resolvconf',
      join(dir, 'resolv.conf'),
      '-pidfile',
      join(dir, 'pid'),
      '-metrics-listen-address',
      '127.0.0.1:9353',
      '-quiet',
    ],
    { KUBE_DNS_UPSTREAM_SERVICE_HOST: dnsAddr },
  );
  await waitFor(
    'the cluster DNS',
    async () =>
      (
        await inNs(NODE, 'dig', [`@${dnsAddr}`, '+short', '+time=1', '+tries=1', 'backend.default.svc.cluster.local'])
      ).stdout.trim() === '10.96.120.15',
  );
  await waitFor(
    'the agent',
    async () =>
      existsSync(join(dir, 'pid')) || (agent.child.exitCode !== null && Promise.reject(new Error(agent.output()))),
  );
  serverPids = [agent.child.pid, cluster.child.pid];

  // Cluster names from the demo cluster: Services (one A), a headless Service (three A), the API.
  const names = [
    'backend.default.svc.cluster.local',
    'frontend.default.svc.cluster.local',
    'kubernetes.default.svc.cluster.local',
    'kube-dns.kube-system.svc.cluster.local',
    'mysql.default.svc.cluster.local',
    'mysql-0.mysql.default.svc.cluster.local',
  ];
  const queryFile = join(dir, 'queries.txt');
  writeFileSync(queryFile, names.map((n) => `${n} A\n`).join(''));
  for (const n of names) {
    const direct = (await inNs(NODE, 'dig', [`@${dnsAddr}`, '+short', n])).stdout.trim().split('\n').sort().join();
    const via = (await inNs(NODE, 'dig', ['@169.254.20.10', '+short', n])).stdout.trim().split('\n').sort().join();
    if (!direct || direct !== via) throw new Error(`${n}: agent answered ${via}, cluster DNS ${direct}`);
  }

  const targets = [
    { name: 'agent @169.254.20.10 (link-local)', server: '169.254.20.10' },
    { name: 'agent @10.96.0.10 (kube-dns IP, NOTRACK)', server: '10.96.0.10' },
    { name: `cluster DNS direct @${dnsAddr}`, server: dnsAddr },
  ];
  const results = new Map(targets.map((t) => [t.name, { max: [], fixed: [] }]));
  await dnsperf('169.254.20.10', queryFile, 'fixed').catch(() => {}); // warm-up
  for (let r = 0; r < rounds; r++) {
    for (let i = 0; i < targets.length; i++) {
      const t = targets[(i + r) % targets.length];
      for (const mode of ['max', 'fixed']) {
        const res = await dnsperf(t.server, queryFile, mode);
        results.get(t.name)[mode].push(res);
        process.stderr.write(
          `round ${r + 1} ${t.name} ${mode}: ${res.qps.toFixed(0)} qps, avg ${res.avgMs.toFixed(3)} ms, lost ${res.lost}, ${res.cpuUsPerQuery.toFixed(1)} µs CPU/query, load ${res.load}\n`,
        );
      }
    }
  }
  const metrics = (await inNs(NODE, 'curl', ['-s', 'http://127.0.0.1:9253/metrics'])).stdout;
  const sum = (re) => [...metrics.matchAll(re)].reduce((a, m) => a + Number(m[1]), 0);
  const hits = sum(/^coredns_cache_hits_total\{[^}]*\} (\S+)$/gm);
  const misses = sum(/^coredns_cache_misses_total\{[^}]*\} (\S+)$/gm);

  const cpu = cpus()[0]?.model ?? 'unknown CPU';
  const lines = [
    `Node-local cache benchmark — ${new Date().toISOString().slice(0, 10)}, ${cpu}, ${availableParallelism()} CPUs, node ${process.version}`,
    `dnsperf -s SERVER -p 53 -d queries.txt -c 4 -T 1 -q 100 {-Q 1000000 (max) | -Q ${rate} (fixed)} -l ${seconds}; ${rounds} rounds interleaved, medians;`,
    `${names.length} cluster names (A); servers pinned to CPU 1, dnsperf to CPU 0; the agent and the cluster DNS are one Node process each.`,
    '',
    '| target | max QPS | avg latency at max (ms) | avg latency at ' +
      rate +
      ' QPS (ms) | stddev at ' +
      rate +
      ' QPS (ms) | max latency at ' +
      rate +
      ' QPS (ms) | server CPU µs/query at max | lost | 1-min load |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const t of targets) {
    const r = results.get(t.name);
    const lost = [...r.max, ...r.fixed].reduce((a, x) => a + x.lost, 0);
    lines.push(
      `| ${t.name} | ${median(r.max.map((x) => x.qps)).toFixed(0)} | ${median(r.max.map((x) => x.avgMs)).toFixed(3)} | ${median(r.fixed.map((x) => x.avgMs)).toFixed(3)} | ${median(r.fixed.map((x) => x.sdMs)).toFixed(3)} | ${median(r.fixed.map((x) => x.maxMs)).toFixed(2)} | ${median(r.max.map((x) => x.cpuUsPerQuery)).toFixed(1)} | ${lost} | ${median([...r.max, ...r.fixed].map((x) => x.load)).toFixed(1)} |`,
    );
  }
  lines.push(
    '',
    `agent cache: ${hits} hits, ${misses} misses (${((100 * hits) / Math.max(1, hits + misses)).toFixed(3)}% hits; the cluster DNS gives TTL 5, so each name is refetched over TCP every 5 s)`,
  );
  process.stdout.write(lines.join('\n') + '\n');
  void cluster;
}

main()
  .catch((e) => {
    console.error(e instanceof Error ? e.message : e);
    process.exitCode = 1;
  })
  .finally(() => cleanup());
