// The forward plugin's metrics under CoreDNS's names. Queries count into plain numbers kept
// per upstream (`to`), turned into samples only when /metrics is scraped. The counts are the
// server's (FORWARD_METRICS), so they keep counting across reloads, as Prometheus expects,
// and a second server in the process has its own.

import { rcodeToString } from '../../dns/constants.js';
import { histogramSamples, registerCollected, type Sample } from '../../metrics/collected.js';
import type { Registry } from '../../metrics/registry.js';
import { metricsKey } from '../../server/services.js';
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

/** Counts for one upstream address, shared by every forward instance of a server that uses it. */
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

/** A server's forward counters: per upstream address, and the two without labels. */
export class ForwardMetrics {
  private readonly statsByTo = new Map<string, UpstreamStats>();
  healthcheckBroken = 0;
  maxConcurrentRejects = 0;

  /** The counters for upstream address `to` ("127.0.0.1:53"), created on first use. */
  upstreamStats(to: string): UpstreamStats {
    let s = this.statsByTo.get(to);
    if (s === undefined) {
      s = new UpstreamStats(to);
      this.statsByTo.set(to, s);
    }
    return s;
  }

  upstreams(): IterableIterator<UpstreamStats> {
    return this.statsByTo.values();
  }
}

/** The server's forward counters, published in its registry when it serves metrics. */
export const FORWARD_METRICS = metricsKey('forward metrics', () => new ForwardMetrics(), registerForwardMetrics);

type Labels = Record<string, string | number>;

function perUpstream(
  m: ForwardMetrics,
  pick: (s: UpstreamStats) => number,
  labels: (s: UpstreamStats) => Labels,
): () => Sample[] {
  return () => {
    const out: Sample[] = [];
    for (const s of m.upstreams()) {
      const v = pick(s);
      if (v !== 0) out.push({ labels: labels(s), value: v });
    }
    return out;
  };
}

function perRcode(m: ForwardMetrics, labels: (s: UpstreamStats, rcode: string) => Labels): () => Sample[] {
  return () => {
    const out: Sample[] = [];
    for (const s of m.upstreams()) {
      for (let r = 0; r < 16; r++)
        if (s.responses[r] !== 0) out.push({ labels: labels(s, RCODE_LABELS[r]!), value: s.responses[r]! });
    }
    return out;
  };
}

function durations(
  m: ForwardMetrics,
  name: string,
  labels: (s: UpstreamStats, rcode: string) => Labels,
): () => Sample[] {
  return () => {
    const out: Sample[] = [];
    for (const s of m.upstreams()) {
      for (let r = 0; r < 16; r++) {
        const b = s.durationBuckets[r];
        if (b) out.push(...histogramSamples(name, labels(s, RCODE_LABELS[r]!), TIME_BUCKETS, b, 0, s.durationSums[r]!));
      }
    }
    return out;
  };
}

function perProto(m: ForwardMetrics, which: 'connHits' | 'connMisses') {
  return (): Sample[] => {
    const out: Sample[] = [];
    for (const s of m.upstreams()) {
      for (let p = 0; p < PROTO_LABELS.length; p++) {
        const v = s[which][p]!;
        if (v !== 0) out.push({ labels: { proxy_name: 'forward', to: s.to, proto: PROTO_LABELS[p]! }, value: v });
      }
    }
    return out;
  };
}

const PROXY_DURATION = 'coredns_proxy_request_duration_seconds';
const FORWARD_DURATION = 'coredns_forward_request_duration_seconds';

function registerForwardMetrics(registry: Registry, m: ForwardMetrics): void {
  // Current names (plugin/pkg/proxy and plugin/forward in CoreDNS 1.14).
  registerCollected(
    registry,
    PROXY_DURATION,
    'Histogram of the time each request took.',
    'histogram',
    durations(m, PROXY_DURATION, (s, rcode) => ({ proxy_name: 'forward', to: s.to, rcode })),
  );
  registerCollected(
    registry,
    'coredns_proxy_healthcheck_failures_total',
    'Counter of the number of failed healthchecks.',
    'counter',
    perUpstream(
      m,
      (s) => s.healthcheckFailures,
      (s) => ({ proxy_name: 'forward', to: s.to }),
    ),
  );
  registerCollected(
    registry,
    'coredns_proxy_conn_cache_hits_total',
    'Counter of connection cache hits per upstream and protocol.',
    'counter',
    perProto(m, 'connHits'),
  );
  registerCollected(
    registry,
    'coredns_proxy_conn_cache_misses_total',
    'Counter of connection cache misses per upstream and protocol.',
    'counter',
    perProto(m, 'connMisses'),
  );
  registerCollected(
    registry,
    'coredns_forward_healthcheck_broken_total',
    'Counter of the number of complete failures of the healthchecks.',
    'counter',
    () => [{ labels: {}, value: m.healthcheckBroken }],
  );
  registerCollected(
    registry,
    'coredns_forward_max_concurrent_rejects_total',
    'Counter of the number of queries rejected because the concurrent queries were at maximum.',
    'counter',
    () => [{ labels: {}, value: m.maxConcurrentRejects }],
  );

  // Deprecated in CoreDNS but still exported there, so dashboards built on them keep working.
  registerCollected(
    registry,
    'coredns_forward_requests_total',
    'Counter of requests made per upstream.',
    'counter',
    perUpstream(
      m,
      (s) => s.requests,
      (s) => ({ to: s.to }),
    ),
  );
  registerCollected(
    registry,
    'coredns_forward_responses_total',
    'Counter of responses received per upstream.',
    'counter',
    perRcode(m, (s, rcode) => ({ to: s.to, rcode })),
  );
  registerCollected(
    registry,
    FORWARD_DURATION,
    'Histogram of the time each request took.',
    'histogram',
    durations(m, FORWARD_DURATION, (s, rcode) => ({ to: s.to, rcode })),
  );
  registerCollected(
    registry,
    'coredns_forward_healthcheck_failures_total',
    'Counter of the number of failed healthchecks.',
    'counter',
    perUpstream(
      m,
      (s) => s.healthcheckFailures,
      (s) => ({ to: s.to }),
    ),
  );
}
