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
// To come (when the plugins exist): `kubernetes` with 10,000 Services from the test API
// server, `cache` hits (cache + forward to a peer), and the `forward` path (cache off).

export const scenarios = [
  {
    name: 'hosts',
    description: 'answers from the hosts plugin (2,000 names, TTL 30)',
    corefile: (ctx) =>
      `cluster.local:${ctx.port} {\n    bind 127.0.0.1\n    hosts ${ctx.workload.hostsFile} {\n        ttl ${ctx.workload.ttl}\n    }\n}\n`,
    queries: (ctx) => ctx.workload.queryFile,
    targets: { pinnedVsUnbound: 0.5, unpinnedBeatsPinned: true },
  },
];
