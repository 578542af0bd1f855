#!/usr/bin/env node
// Hit ratio of the cache's eviction policy (SIEVE, the real CacheStore from dist/) against
// CoreDNS's (256 shards of cap/256 entries, a random entry of the full shard evicted) and
// plain LRU for reference, on Zipf-distributed query names. TTLs are left out: this
// measures only what capacity pressure does.
//
//   npm run build && node bench/cache-eviction.mjs [--requests 2000000] [--keys 1000000] [--capacity 9984] [--seed 42]

import { parseArgs } from 'node:util';
import { CacheEntry, CacheStore } from '../dist/src/plugins/cache/store.js';
import { seededRandom as rng } from './lib/workload.mjs';

const { values } = parseArgs({
  options: {
    requests: { type: 'string', default: '2000000' },
    keys: { type: 'string', default: '1000000' },
    capacity: { type: 'string', default: '9984' },
    seed: { type: 'string', default: '42' },
  },
});
const REQUESTS = Number(values.requests);
const KEYS = Number(values.keys);
const CAPACITY = Number(values.capacity);

/** Zipf(alpha) over KEYS ranks, sampled by binary search in the CDF. */
function zipfSampler(alpha, random) {
  const cdf = new Float64Array(KEYS);
  let sum = 0;
  for (let i = 0; i < KEYS; i++) {
    sum += 1 / Math.pow(i + 1, alpha);
    cdf[i] = sum;
  }
  return () => {
    const u = random() * sum;
    let lo = 0;
    let hi = KEYS - 1;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (cdf[mid] < u) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  };
}

/** A request stream: Zipf names, with a share of names never seen again (random subdomains, search-path misses). */
function workload(alpha, oneHitShare, seed) {
  const random = rng(seed);
  const zipf = zipfSampler(alpha, random);
  // Ranks are shuffled into names so popularity is not correlated with the hash.
  const perm = new Uint32Array(KEYS);
  for (let i = 0; i < KEYS; i++) perm[i] = i;
  for (let i = KEYS - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    const t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
  const names = new Array(REQUESTS);
  let unique = 0;
  for (let i = 0; i < REQUESTS; i++) {
    if (oneHitShare > 0 && random() < oneHitShare) names[i] = `once${unique++}.example.org.`;
    else names[i] = `k${perm[zipf()]}.example.org.`;
  }
  return names;
}

const reply = {
  body: Buffer.alloc(0),
  an: 0,
  ns: 0,
  ar: 0,
  flags: 0x8180,
  ttlOffsets: new Uint16Array(0),
  questionEnd: 12,
};

function runSieve(names) {
  const store = new CacheStore({ successCapacity: CAPACITY, denialCapacity: 1 });
  let hits = 0;
  for (const name of names) {
    const e = store.find(name, 1, 1, 0);
    if (e !== null) {
      e.visited = true; // what a hit does in CacheHandler
      hits++;
    } else {
      store.insert(new CacheEntry(name, 1, 1, 0, 0, reply, 3600, 0, 3_600_000), -1);
    }
  }
  return hits / names.length;
}

// FNV-1 (as CoreDNS's hash/fnv New64, low 32 bits suffice for the shard index).
function fnv1(s) {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h = Math.imul(h, 0x01000193) >>> 0;
    h ^= s.charCodeAt(i);
  }
  return h >>> 0;
}

function runCoreDns(names, seed) {
  const random = rng(seed);
  const shardCap = Math.max(Math.floor(CAPACITY / 256), 4);
  const shards = Array.from({ length: 256 }, () => ({ index: new Map(), keys: [] }));
  let hits = 0;
  for (const name of names) {
    const sh = shards[fnv1(name) & 255];
    if (sh.index.has(name)) {
      hits++;
      continue;
    }
    if (sh.keys.length >= shardCap) {
      // Go map iteration starts at a random place: the evicted entry is effectively random.
      const i = Math.floor(random() * sh.keys.length);
      const victim = sh.keys[i];
      const last = sh.keys.pop();
      if (i < sh.keys.length) {
        sh.keys[i] = last;
        sh.index.set(last, i);
      }
      sh.index.delete(victim);
    }
    sh.index.set(name, sh.keys.length);
    sh.keys.push(name);
  }
  return hits / names.length;
}

function runLru(names) {
  const m = new Map();
  let hits = 0;
  for (const name of names) {
    if (m.has(name)) {
      hits++;
      m.delete(name);
      m.set(name, true);
      continue;
    }
    if (m.size >= CAPACITY) m.delete(m.keys().next().value);
    m.set(name, true);
  }
  return hits / names.length;
}

const pct = (x) => `${(x * 100).toFixed(2)}%`;
const cases = [
  { alpha: 0.7, oneHit: 0 },
  { alpha: 0.9, oneHit: 0 },
  { alpha: 1.0, oneHit: 0 },
  { alpha: 1.2, oneHit: 0 },
  { alpha: 0.9, oneHit: 0.3 },
];
console.log(
  `requests ${REQUESTS}, distinct names ${KEYS}, capacity ${CAPACITY} (CoreDNS: 256 shards x ${Math.max(Math.floor(CAPACITY / 256), 4)})`,
);
console.log('| workload | SIEVE (clusterdns) | random-in-shard (CoreDNS) | LRU | SIEVE - CoreDNS |');
console.log('|---|---|---|---|---|');
for (const c of cases) {
  const names = workload(c.alpha, c.oneHit, Number(values.seed));
  const s = runSieve(names);
  const r = runCoreDns(names, Number(values.seed) + 1);
  const l = runLru(names);
  const label = `Zipf ${c.alpha}${c.oneHit ? `, ${c.oneHit * 100}% one-time names` : ''}`;
  console.log(`| ${label} | ${pct(s)} | ${pct(r)} | ${pct(l)} | ${((s - r) * 100).toFixed(2)} pt |`);
}
