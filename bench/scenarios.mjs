// clusterdns configurations to measure. Each scenario becomes one server in the table,
// named `clusterdns-<name>`, measured side by side with the peers on the same workload.
//
// A scenario is { name, description, corefile(ctx), queries(ctx), samples?(ctx), setup?(ctx),
// targets? }:
//   corefile(ctx)  → the Corefile text; ctx.port is the port to serve on, ctx.dir a temp dir,
//                    ctx.workload the generated names (see lib/workload.mjs).
//   queries(ctx)   → path of the dnsperf query file for this scenario.
//   samples(ctx)   → [{name, type, data, ttl}] to check with dig before measuring
//                    (default: the workload's sample records).
//   setup(ctx)     → optional async hook that starts what the scenario needs (a test API
//                    server for `kubernetes`, an upstream for `forward`); start processes
//                    through ctx.startProcess so that they are cleaned up. May return a
//                    string to skip the scenario with that reason.
//   targets        → optional { pinnedVsUnbound: 0.5, unpinnedBeatsPinned: true } checked
//                    and printed after the tables.
//
// The upstream for `cache` and `forward` is Knot DNS serving the same names on its own
// port (lib/servers.mjs startUpstream): pinned runs put it on CPU 0 with dnsperf, not on the
// server's core, so it is not the limit; its CPU is not counted in clusterdns's column.

import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { dataSamples, startUpstream } from './lib/servers.mjs';
import { sampleRecords } from './lib/workload.mjs';
import { mixQueries, mixSamples } from './lib/mix.mjs';

/** 10,000 Services (the workload's 2,000 plus filler) with 5 endpoints each, as one JSON List. */
export function writeClusterManifest(ctx, fileName = 'cluster.json') {
  const items = [];
  const namespaces = new Set();
  const add = (ns, name, ip, endpoints) => {
    namespaces.add(ns);
    items.push({
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name, namespace: ns },
      spec: { clusterIP: ip, clusterIPs: [ip], ports: [{ name: 'http', port: 80, protocol: 'TCP' }] },
    });
    items.push({
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: { name: `${name}-1`, namespace: ns, labels: { 'kubernetes.io/service-name': name } },
      addressType: 'IPv4',
      ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
      endpoints: endpoints.map((a) => ({ addresses: [a], conditions: { ready: true } })),
    });
  };
  let e = 0;
  const eps = () =>
    Array.from({ length: 5 }, () => {
      e++;
      return `10.${128 + (e >> 16)}.${(e >> 8) & 255}.${e & 255}`;
    });
  for (const r of ctx.workload.records) {
    const [svc, ns] = r.name.split('.');
    add(ns, svc, r.ip, eps());
  }
  for (let i = ctx.workload.records.length; i < 10_000; i++)
    add(`filler-${i % 50}`, `svc-${i}`, `10.97.${i >> 8}.${i & 255}`, eps());
  for (const ns of namespaces) items.push({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } });
  const file = join(ctx.dir, fileName);
  writeFileSync(file, JSON.stringify({ apiVersion: 'v1', kind: 'List', items }));
  return file;
}

/** The workload's query file with the cluster suffix swapped, for the rewrite scenario. */
function customDomainQueries(ctx) {
  const file = join(ctx.dir, 'queries-example-org.txt');
  writeFileSync(file, readFileSync(ctx.workload.queryFile, 'utf8').replaceAll('.svc.cluster.local', '.example.org'));
  return file;
}

const kubernetesBlock = (ctx) =>
  `    kubernetes cluster.local {\n        manifests ${ctx.manifest}\n        ttl ${ctx.workload.ttl}\n    }\n`;

export const scenarios = [
  {
    name: 'hosts',
    description: 'answers from the hosts plugin (2,000 names, TTL 30)',
    corefile: (ctx) =>
      `cluster.local:${ctx.port} {\n    bind 127.0.0.1\n    hosts ${ctx.workload.hostsFile} {\n        ttl ${ctx.workload.ttl}\n    }\n}\n`,
    queries: (ctx) => ctx.workload.queryFile,
    targets: { pinnedVsUnbound: 0.5, unpinnedBeatsPinned: true, cpuVsKnot: 1.15 },
  },
  {
    name: 'hosts-prometheus',
    description: 'hosts with the prometheus plugin on: what counting every query costs',
    corefile: (ctx) =>
      `cluster.local:${ctx.port} {\n    bind 127.0.0.1\n    prometheus 127.0.0.1:0\n    hosts ${ctx.workload.hostsFile} {\n        ttl ${ctx.workload.ttl}\n    }\n}\n`,
    queries: (ctx) => ctx.workload.queryFile,
  },
  {
    // The `hosts` row served by the build in $BENCH_BASE_ROOT, like `kubernetes-base`.
    name: 'hosts-base',
    description: 'the `hosts` row served by the build in $BENCH_BASE_ROOT (before/after in one run)',
    root: () => process.env.BENCH_BASE_ROOT,
    setup: async () => (process.env.BENCH_BASE_ROOT ? undefined : 'BENCH_BASE_ROOT is not set'),
    corefile: (ctx) =>
      `cluster.local:${ctx.port} {\n    bind 127.0.0.1\n    hosts ${ctx.workload.hostsFile} {\n        ttl ${ctx.workload.ttl}\n    }\n}\n`,
    queries: (ctx) => ctx.workload.queryFile,
  },
  {
    name: 'kubernetes',
    description: 'the kubernetes plugin (manifests mode): 10,000 Services, 50,000 endpoints, ttl 30',
    setup: async (ctx) => {
      ctx.manifest = writeClusterManifest(ctx);
    },
    corefile: (ctx) =>
      `cluster.local:${ctx.port} {\n    bind 127.0.0.1\n    kubernetes {\n        manifests ${ctx.manifest}\n        ttl ${ctx.workload.ttl}\n    }\n}\n`,
    queries: (ctx) => ctx.workload.queryFile,
    targets: { pinnedVsUnbound: 0.5, cpuVsKnot: 1.15 },
  },
  {
    // The same `kubernetes` row served by another build (BENCH_BASE_ROOT: a checkout of the base
    // commit, built): the before/after of a change in one interleaved run.
    name: 'kubernetes-base',
    description: 'the `kubernetes` row served by the build in $BENCH_BASE_ROOT (before/after in one run)',
    root: () => process.env.BENCH_BASE_ROOT,
    setup: async (ctx) => {
      if (!process.env.BENCH_BASE_ROOT) return 'BENCH_BASE_ROOT is not set';
      ctx.manifest = writeClusterManifest(ctx, 'cluster-base.json');
    },
    corefile: (ctx) =>
      `cluster.local:${ctx.port} {\n    bind 127.0.0.1\n    kubernetes {\n        manifests ${ctx.manifest}\n        ttl ${ctx.workload.ttl}\n    }\n}\n`,
    queries: (ctx) => ctx.workload.queryFile,
  },
  {
    name: 'rewrite',
    description: 'rewrite (a custom domain onto svc.cluster.local, answer auto) in front of the `kubernetes` row',
    setup: async (ctx) => {
      ctx.manifest = writeClusterManifest(ctx, 'cluster-rewrite.json');
    },
    corefile: (ctx) =>
      `example.org:${ctx.port} {\n    bind 127.0.0.1\n    rewrite name regex (.*)\\.example\\.org {1}.svc.cluster.local answer auto\n${kubernetesBlock(ctx)}}\n`,
    queries: customDomainQueries,
    samples: (ctx) =>
      sampleRecords(ctx.workload.records).map((r) => ({
        name: r.name.replace('.svc.cluster.local', '.example.org'),
        type: 'A',
        data: r.ip,
        ttl: ctx.workload.ttl,
      })),
  },
  {
    name: 'template',
    description: 'template: every name of the workload answered from a regex and a Go template',
    corefile: (ctx) =>
      `cluster.local:${ctx.port} {\n    bind 127.0.0.1\n    template IN A cluster.local {\n` +
      `        match "^svc-(?P<n>[0-9]+)[.]ns-(?P<m>[0-9]+)[.]svc[.]cluster[.]local[.]$"\n` +
      `        answer "{{ .Name }} ${ctx.workload.ttl} IN A 10.200.{{ .Group.m }}.{{ .Group.n }}"\n    }\n}\n`,
    queries: (ctx) => ctx.workload.queryFile,
    samples: (ctx) =>
      sampleRecords(ctx.workload.records).map((r) => {
        const [, n, m] = /^svc-(\d+)\.ns-(\d+)\./.exec(r.name);
        return { name: r.name, type: 'A', data: `10.200.${m}.${n}`, ttl: ctx.workload.ttl };
      }),
  },
  {
    // Compare with unbound-mix / dnsmasq-mix / kresd-mix (same query file), not with `unbound`.
    name: 'mix',
    description: 'kubernetes (10,000 Services) asked a mix: 80% A, 10% AAAA (NODATA), 10% NXDOMAIN names',
    setup: async (ctx) => {
      // Its own copy, so that writing it never touches the file the `kubernetes` row serves.
      ctx.manifest = writeClusterManifest(ctx, 'cluster-mix.json');
    },
    corefile: (ctx) =>
      `cluster.local:${ctx.port} {\n    bind 127.0.0.1\n    kubernetes {\n        manifests ${ctx.manifest}\n        ttl ${ctx.workload.ttl}\n    }\n}\n`,
    queries: mixQueries,
    samples: mixSamples,
  },
  {
    name: 'cache',
    description: 'cache hits: cache 3600 in front of forward to an upstream with the same names',
    setup: startUpstream,
    // Cached TTLs count down between the checks before and after the load: check the data only.
    samples: dataSamples,
    corefile: (ctx) =>
      `cluster.local:${ctx.port} {\n    bind 127.0.0.1\n    cache 3600\n    forward . 127.0.0.1:${ctx.upstreamPort}\n}\n`,
    queries: (ctx) => ctx.workload.queryFile,
    targets: { pinnedVsUnbound: 0.5, cpuVsKnot: 1.15 },
  },
  {
    // The `cache` row served by the build in $BENCH_BASE_ROOT (before/after in one run).
    name: 'cache-base',
    description: 'the `cache` row served by the build in $BENCH_BASE_ROOT (before/after in one run)',
    root: () => process.env.BENCH_BASE_ROOT,
    setup: async (ctx) => {
      if (!process.env.BENCH_BASE_ROOT) return 'BENCH_BASE_ROOT is not set';
      await startUpstream(ctx);
    },
    samples: dataSamples,
    corefile: (ctx) =>
      `cluster.local:${ctx.port} {\n    bind 127.0.0.1\n    cache 3600\n    forward . 127.0.0.1:${ctx.upstreamPort}\n}\n`,
    queries: (ctx) => ctx.workload.queryFile,
  },
  {
    name: 'kubernetes-cache',
    description: 'cache hits in front of the kubernetes plugin (10,000 Services, ttl 30)',
    setup: async (ctx) => {
      ctx.manifest = writeClusterManifest(ctx, 'cluster-cache.json');
    },
    samples: dataSamples,
    corefile: (ctx) => `cluster.local:${ctx.port} {\n    bind 127.0.0.1\n    cache\n${kubernetesBlock(ctx)}}\n`,
    queries: (ctx) => ctx.workload.queryFile,
  },
  {
    name: 'kubernetes-cache-base',
    description: 'the `kubernetes-cache` row served by the build in $BENCH_BASE_ROOT (before/after in one run)',
    root: () => process.env.BENCH_BASE_ROOT,
    setup: async (ctx) => {
      if (!process.env.BENCH_BASE_ROOT) return 'BENCH_BASE_ROOT is not set';
      ctx.manifest = writeClusterManifest(ctx, 'cluster-cache-base.json');
    },
    samples: dataSamples,
    corefile: (ctx) => `cluster.local:${ctx.port} {\n    bind 127.0.0.1\n    cache\n${kubernetesBlock(ctx)}}\n`,
    queries: (ctx) => ctx.workload.queryFile,
  },
  {
    name: 'forward',
    description: 'the forward path, no cache: every query goes to the upstream',
    setup: startUpstream,
    corefile: (ctx) =>
      `cluster.local:${ctx.port} {\n    bind 127.0.0.1\n    forward . 127.0.0.1:${ctx.upstreamPort}\n}\n`,
    queries: (ctx) => ctx.workload.queryFile,
    targets: { pinnedVsUnbound: 0.5, cpuVsUnboundForward: 0.5 },
  },
  {
    // The `forward` row served by the build in BENCH_BASE_ROOT, as kubernetes-base.
    name: 'forward-base',
    description: 'the `forward` row served by the build in $BENCH_BASE_ROOT (before/after in one run)',
    root: () => process.env.BENCH_BASE_ROOT,
    setup: async (ctx) => {
      if (!process.env.BENCH_BASE_ROOT) return 'BENCH_BASE_ROOT is not set';
      return startUpstream(ctx);
    },
    corefile: (ctx) =>
      `cluster.local:${ctx.port} {\n    bind 127.0.0.1\n    forward . 127.0.0.1:${ctx.upstreamPort}\n}\n`,
    queries: (ctx) => ctx.workload.queryFile,
  },
];

// `rewrite` served by the build in $BENCH_BASE_ROOT as well (`hosts-base` and `cache-base` are
// above), as `kubernetes-base` is: the before/after of a hot-path change in one interleaved run.
const rewrite = scenarios.find((x) => x.name === 'rewrite');
scenarios.push({
  ...rewrite,
  name: 'rewrite-base',
  description: 'the `rewrite` row served by the build in $BENCH_BASE_ROOT (before/after in one run)',
  root: () => process.env.BENCH_BASE_ROOT,
  targets: undefined,
  setup: async (ctx) => {
    if (!process.env.BENCH_BASE_ROOT) return 'BENCH_BASE_ROOT is not set';
    ctx.manifest = writeClusterManifest(ctx, 'cluster-rewrite-base.json');
  },
});
