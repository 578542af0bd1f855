// The forward plugin's metrics under CoreDNS's names. Queries count into plain numbers kept
// per upstream (`to`), turned into samples only when /metrics is scraped. The counts live at
// module level so they keep counting across reloads, as Prometheus expects.

import { rcodeToString } from '../../dns/constants.js';
import { defineCollected, histogramSamples, type Sample } from '../../metrics/collected.js';
import { DURATION_BUCKETS } from '../../server/stats.js';

/** CoreDNS's plugin.TimeBuckets (0.25 ms doubling to 8.192 s), shared with the server's own histogram. */
export const TIME_BUCKETS: readonly number[] = DURATION_BUCKETS;

/** Header rcodes as CoreDNS labels them (dns.RcodeToString, else the number). */
const RCODE_LABELS: readonly string[] = Array.from({ length: 16 }, (_, r) => {
  const s = rcodeToString(r);
  return s.startsWith('RCODE') ? String(r) : s;
});

/** `proto` label values, by index: connHits[0] is UDP. */
export const PROTO_LABELS = ['udp', 'tcp', 'tcp-tls'] as const;

/** Counts for one upstream address, shared by every forward instance that uses it. */
export class UpstreamStats {
  /** Tries sent (coredns_forward_requests_total). */
  requests = 0;
  /** Replies by rcode. */
  readonly responses = new Float64Array(16);
  /** Per rcode: how many replies fell in each bucket (not cumulative; last slot is +Inf). */
  readonly durationBuckets: Array<Float64Array | null> = new Array<Float64Array | null>(16).fill(null);
  readonly durationSums = new Float64Array(16);
  healthcheckFailures = 0;
  /** By PROTO_LABELS index. */
  readonly connHits = new Float64Array(3);
  readonly connMisses = new Float64Array(3);

  constructor(readonly to: string) {}

  /** One reply with `rcode` after `seconds`. */
  observe(rcode: number, seconds: number): void {
    this.responses[rcode]!++;
    let b = this.durationBuckets[rcode];
    if (b === null || b === undefined) {
      b = new Float64Array(TIME_BUCKETS.length + 1);
      this.durationBuckets[rcode] = b;
    }
    let i = 0;
    while (i < TIME_BUCKETS.length && seconds > TIME_BUCKETS[i]!) i++;
    b[i]!++;
    this.durationSums[rcode]! += seconds;
  }
}

const statsByTo = new Map<string, UpstreamStats>();

/** The counters for upstream address `to` ("127.0.0.1:53"), created on first use. */
export function upstreamStats(to: string): UpstreamStats {
  let s = statsByTo.get(to);
  if (s === undefined) {
    s = new UpstreamStats(to);
    statsByTo.set(to, s);
  }
  return s;
}

/** Process-wide counters without labels. */
export const forwardTotals = {
  healthcheckBroken: 0,
  maxConcurrentRejects: 0,
};

type Labels = Record<string, string | number>;

function perUpstream(pick: (s: UpstreamStats) => number, labels: (s: UpstreamStats) => Labels): () => Sample[] {
  return () => {
    const out: Sample[] = [];
    for (const s of statsByTo.values()) {
      const v = pick(s);
      if (v !== 0) out.push({ labels: labels(s), value: v });
    }
    return out;
  };
}

function perRcode(labels: (s: UpstreamStats, rcode: string) => Labels): () => Sample[] {
  return () => {
    const out: Sample[] = [];
    for (const s of statsByTo.values()) {
      for (let r = 0; r < 16; r++)
        if (s.responses[r] !== 0) out.push({ labels: labels(s, RCODE_LABELS[r]!), value: s.responses[r]! });
    }
    return out;
  };
}

function durations(name: string, labels: (s: UpstreamStats, rcode: string) => Labels): () => Sample[] {
  return () => {
    const out: Sample[] = [];
    for (const s of statsByTo.values()) {
      for (let r = 0; r < 16; r++) {
        const b = s.durationBuckets[r];
        if (b) out.push(...histogramSamples(name, labels(s, RCODE_LABELS[r]!), TIME_BUCKETS, b, 0, s.durationSums[r]!));
      }
    }
    return out;
  };
}

function perProto(which: 'connHits' | 'connMisses') {
  return (): Sample[] => {
    const out: Sample[] = [];
    for (const s of statsByTo.values()) {
      for (let p = 0; p < PROTO_LABELS.length; p++) {
        const v = s[which][p]!;
        if (v !== 0) out.push({ labels: { proxy_name: 'forward', to: s.to, proto: PROTO_LABELS[p]! }, value: v });
      }
    }
    return out;
  };
}

// Current names (plugin/pkg/proxy and plugin/forward in CoreDNS 1.14).
const PROXY_DURATION = 'coredns_proxy_request_duration_seconds';
defineCollected(
  PROXY_DURATION,
  'Histogram of the time each request took.',
  'histogram',
  durations(PROXY_DURATION, (s, rcode) => ({ proxy_name: 'forward', to: s.to, rcode })),
);
defineCollected(
  'coredns_proxy_healthcheck_failures_total',
  'Counter of the number of failed healthchecks.',
  'counter',
  perUpstream(
    (s) => s.healthcheckFailures,
    (s) => ({ proxy_name: 'forward', to: s.to }),
  ),
);
defineCollected(
  'coredns_proxy_conn_cache_hits_total',
  'Counter of connection cache hits per upstream and protocol.',
  'counter',
  perProto('connHits'),
);
defineCollected(
  'coredns_proxy_conn_cache_misses_total',
  'Counter of connection cache misses per upstream and protocol.',
  'counter',
  perProto('connMisses'),
);
defineCollected(
  'coredns_forward_healthcheck_broken_total',
  'Counter of the number of complete failures of the healthchecks.',
  'counter',
  () => [{ labels: {}, value: forwardTotals.healthcheckBroken }],
);
defineCollected(
  'coredns_forward_max_concurrent_rejects_total',
  'Counter of the number of queries rejected because the concurrent queries were at maximum.',
  'counter',
  () => [{ labels: {}, value: forwardTotals.maxConcurrentRejects }],
);

// Deprecated in CoreDNS but still exported there, so dashboards built on them keep working.
const FORWARD_DURATION = 'coredns_forward_request_duration_seconds';
defineCollected(
  'coredns_forward_requests_total',
  'Counter of requests made per upstream.',
  'counter',
  perUpstream(
    (s) => s.requests,
    (s) => ({ to: s.to }),
  ),
);
defineCollected(
  'coredns_forward_responses_total',
  'Counter of responses received per upstream.',
  'counter',
  perRcode((s, rcode) => ({ to: s.to, rcode })),
);
defineCollected(
  FORWARD_DURATION,
  'Histogram of the time each request took.',
  'histogram',
  durations(FORWARD_DURATION, (s, rcode) => ({ to: s.to, rcode })),
);
defineCollected(
  'coredns_forward_healthcheck_failures_total',
  'Counter of the number of failed healthchecks.',
  'counter',
  perUpstream(
    (s) => s.healthcheckFailures,
    (s) => ({ to: s.to }),
  ),
);
