// "A lookup costs the same with 10 Services as with 100,000": the same queries timed against a
// small and a large index, for a repeated name (prepared answer), a first-time name (built from
// the index), and a search-path miss (NXDOMAIN, never kept).
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { QType } from '../../src/dns/constants.js';
import type { Request } from '../../src/server/request.js';
import type { EndpointSliceRecord, ServiceRecord } from '../../src/cluster/objects.js';
import { makeRequest, rig, type Rig } from './harness.js';

const Z = 'cluster.local.';
const NAMESPACES = 100;

function build(services: number): Rig {
  const r = rig('kubernetes cluster.local in-addr.arpa', []);
  for (let n = 0; n < NAMESPACES; n++)
    r.index.apply({ op: 'upsert', kind: 'Namespace', key: `ns-${n}`, value: { name: `ns-${n}` } });
  for (let i = 0; i < services; i++) {
    const ns = `ns-${i % NAMESPACES}`;
    const name = `svc-${i}`;
    const value: ServiceRecord = {
      name,
      namespace: ns,
      kind: 'ClusterIP',
      clusterIPs: [`10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`],
      externalName: '',
      ports: [{ name: 'http', protocol: 'tcp', port: 80 }],
      selector: true,
    };
    r.index.apply({ op: 'upsert', kind: 'Service', key: `${ns}/${name}`, value });
    const slice: EndpointSliceRecord = {
      name: `${name}-abcde`,
      namespace: ns,
      service: name,
      ports: [{ name: 'http', protocol: 'tcp', port: 80 }],
      endpoints: [
        { ips: [`172.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`], hostname: '', podName: '' },
        { ips: [`172.${128 + ((i >> 16) & 127)}.${(i >> 8) & 255}.${i & 255}`], hostname: '', podName: '' },
      ],
      triggerTime: 0,
    };
    r.index.apply({ op: 'upsert', kind: 'EndpointSlice', key: `${ns}/${slice.name}`, value: slice });
  }
  return r;
}

/** Best of several rounds, in ns per query, each query answered from the index (what it prepared is dropped). */
function time(r: Rig, reqs: Array<[Request, string]>, rounds = 5): number {
  let best = Infinity;
  const prepared = r.handler.prepared;
  // Only the time to answer is measured; the answers themselves are checked elsewhere (void).
  for (let k = 0; k < rounds; k++) {
    const t0 = process.hrtime.bigint();
    for (const [q, scope] of reqs) {
      void r.serve(q);
      prepared.store.dropDependencies([scope]);
    }
    const ns = Number(process.hrtime.bigint() - t0) / reqs.length;
    if (ns < best) best = ns;
  }
  return best;
}

function timeHits(r: Rig, req: Request, n = 20000): number {
  void r.serve(req); // warm-up; only the time is measured
  let best = Infinity;
  for (let k = 0; k < 5; k++) {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < n; i++) void r.serve(req);
    best = Math.min(best, Number(process.hrtime.bigint() - t0) / n);
  }
  return best;
}

describe('kubernetes index at scale', () => {
  test('queries cost the same against 10 and 100,000 Services (each with an EndpointSlice)', (t) => {
    const heap0 = process.memoryUsage().heapUsed;
    const large = build(100_000);
    const perObject = (process.memoryUsage().heapUsed - heap0) / 100_000;
    const small = build(10);
    t.diagnostic(`heap per Service + EndpointSlice (projected, indexed): ~${Math.round(perObject)} bytes`);
    assert.ok(perObject < 8192, `memory per Service + slice stays small (${Math.round(perObject)} B)`);

    // The names asked exist in both indexes (svc-0..svc-9), so only the index size differs.
    const first = Array.from({ length: 2000 }, (_, i): [Request, string] => [
      makeRequest(`svc-${i % 10}.ns-${i % 10}.svc.${Z}`, i % 2 ? QType.SRV : QType.A),
      `s:ns-${i % 10}/svc-${i % 10}`,
    ]);
    const misses = Array.from({ length: 2000 }, (_, i): [Request, string] => [
      makeRequest(`www.example${i}.com.ns-${i % 10}.svc.${Z}`, QType.A),
      '',
    ]);
    const ptrs = Array.from({ length: 2000 }, (_, i): [Request, string] => [
      makeRequest(`${i % 10}.0.0.10.in-addr.arpa.`, QType.PTR),
      `p:10.0.0.${i % 10}`,
    ]);
    const hit = makeRequest(`svc-3.ns-3.svc.${Z}`, QType.A);
    const results: Array<[string, number, number]> = [
      ['repeated name (prepared answer)', timeHits(small, hit), timeHits(large, hit)],
      ['first-time A/SRV (built from the index)', time(small, first), time(large, first)],
      ['search-path miss (NXDOMAIN)', time(small, misses), time(large, misses)],
      ['PTR (reverse index)', time(small, ptrs), time(large, ptrs)],
    ];
    for (const [what, s, l] of results) {
      t.diagnostic(`${what}: ${Math.round(s)} ns with 10, ${Math.round(l)} ns with 100,000 Services`);
      assert.ok(l < s * 3 + 2000, `${what}: ${Math.round(l)} ns vs ${Math.round(s)} ns`);
    }
  });
});
