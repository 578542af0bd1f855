// The `mix` workload (issue 11 (d)): the workload's cluster names as a Pod's resolver asks for
// them, 80% `<name> A` for Services that exist, 10% `<name> AAAA` for the same Services (they
// are IPv4 single-stack, so NOERROR with no records: NODATA), and 10% names that do not exist
// (NXDOMAIN): Services missing from an existing namespace and the search-path expansions of an
// external name (`<ext>.<ns>.svc.cluster.local`, `<ext>.svc.cluster.local`,
// `<ext>.cluster.local`), as glibc/musl produce them with ndots:5.
//
// clusterdns (the `kubernetes` plugin over the same 10,000-Service manifest as the
// `kubernetes` scenario) and every peer (unbound-mix, dnsmasq-mix, kresd-mix in servers.mjs)
// answer the same query file; samples(ctx) checks an A answer, a NODATA and each kind of
// NXDOMAIN with dig on every server before it is measured.
//
// Names that are empty non-terminals in the cluster (`ns-3.svc.cluster.local`) are avoided on
// purpose: they are NODATA in Kubernetes DNS and unbound, but NXDOMAIN from kresd's policy.

import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { seededRandom } from './workload.mjs';

const cache = new WeakMap(); // workload -> { queryFile, nxNames, samples }

/** NXDOMAIN names, four kinds in turn; `perNamespace` is where the workload's Service numbers end. */
export function nxNames(workload, count = 1000) {
  const namespaces = new Set(workload.records.map((r) => r.name.split('.')[1]));
  const nsList = [...namespaces];
  const perNamespace = workload.records.length / nsList.length;
  const out = [];
  for (let i = 0; i < count; i++) {
    const ns = nsList[i % nsList.length];
    const ext = `api-${i}.example.com`;
    switch (i % 4) {
      case 0:
        out.push(`svc-${perNamespace + i}.${ns}.svc.cluster.local`);
        break; // no such Service
      case 1:
        out.push(`${ext}.${ns}.svc.cluster.local`);
        break; // search path, first domain
      case 2:
        out.push(`${ext}.svc.cluster.local`);
        break; // second
      default:
        out.push(`${ext}.cluster.local`);
        break; // third
    }
  }
  return out;
}

/**
 * Writes queries-mix.txt next to the workload's files (once per workload) and returns
 * { queryFile, nxNames, samples, shares }.
 */
export function mixWorkload(ctx, { queries = 100_000, nxShare = 0.1, aaaaShare = 0.1, seed = 20261130 } = {}) {
  const w = ctx.workload;
  let m = cache.get(w);
  if (m) return m;
  const nx = nxNames(w);
  const rnd = seededRandom(seed);
  const lines = new Array(queries);
  const counts = { A: 0, AAAA: 0, NXDOMAIN: 0 };
  for (let i = 0; i < queries; i++) {
    const r = rnd();
    if (r < nxShare) {
      lines[i] = `${nx[Math.floor(rnd() * nx.length)]} A`;
      counts.NXDOMAIN++;
    } else if (r < nxShare + aaaaShare) {
      lines[i] = `${w.records[Math.floor(rnd() * w.records.length)].name} AAAA`;
      counts.AAAA++;
    } else {
      lines[i] = `${w.records[Math.floor(rnd() * w.records.length)].name} A`;
      counts.A++;
    }
  }
  const queryFile = join(ctx.dir, 'queries-mix.txt');
  writeFileSync(queryFile, lines.join('\n') + '\n');
  const rec = w.records;
  const samples = [
    { name: rec[0].name, type: 'A', data: rec[0].ip, ttl: w.ttl },
    { name: rec[rec.length - 1].name, type: 'A', data: rec[rec.length - 1].ip, ttl: w.ttl },
    { name: rec[777].name, type: 'AAAA', data: null }, // NODATA
    ...nx.slice(0, 4).map((name) => ({ name, type: 'A', status: 'NXDOMAIN' })),
    { name: nx[5], type: 'AAAA', status: 'NXDOMAIN' },
  ];
  m = { queryFile, nxNames: nx, samples, counts };
  cache.set(w, m);
  return m;
}

export const mixQueries = (ctx) => mixWorkload(ctx).queryFile;
export const mixSamples = (ctx) => mixWorkload(ctx).samples;
