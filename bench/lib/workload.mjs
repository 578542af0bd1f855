// The workload BENCHMARKS.md describes: 2,000 names svc-N.ns-M.svc.cluster.local
// (20 namespaces × 100), A records 10.96.x.y with TTL 30, and a query file of 100k random
// lines `<name> A` drawn with a seeded RNG so that runs are comparable.

import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** mulberry32: small, fast, good enough for picking names; same seed → same file. */
export function seededRandom(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Record i → 10.96.x.y with x in 1.., y in 1..250 (never .0 or .255). */
export function ipFor(i) {
  return `10.96.${1 + Math.floor(i / 250)}.${1 + (i % 250)}`;
}

/**
 * Writes hosts.txt (hosts-file format) and queries.txt into dir.
 * @returns {{ ttl: number, records: {name: string, ip: string}[], hostsFile: string, queryFile: string, queries: number, seed: number }}
 */
export function makeWorkload(
  dir,
  { namespaces = 20, perNamespace = 100, ttl = 30, queries = 100_000, seed = 20240601 } = {},
) {
  const records = [];
  for (let m = 0; m < namespaces; m++) {
    for (let n = 0; n < perNamespace; n++) {
      records.push({ name: `svc-${n}.ns-${m}.svc.cluster.local`, ip: ipFor(records.length) });
    }
  }
  const hostsFile = join(dir, 'hosts.txt');
  writeFileSync(hostsFile, records.map((r) => `${r.ip} ${r.name}`).join('\n') + '\n');

  const rnd = seededRandom(seed);
  const lines = new Array(queries);
  for (let i = 0; i < queries; i++) lines[i] = `${records[Math.floor(rnd() * records.length)].name} A`;
  const queryFile = join(dir, 'queries.txt');
  writeFileSync(queryFile, lines.join('\n') + '\n');

  return { ttl, records, hostsFile, queryFile, queries, seed };
}

/** A few names to check with dig before measuring: first, last and some in between. */
export function sampleRecords(records, count = 5) {
  const out = [records[0], records[records.length - 1]];
  const rnd = seededRandom(7);
  while (out.length < count) out.push(records[Math.floor(rnd() * records.length)]);
  return out;
}
