// /status.json from the metrics text: percentiles as Prometheus's histogram_quantile
// estimates them, rcode mix, cache ratio, top-name shares, and the worst state across workers.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { parseExposition } from '../../src/status/exposition.js';
import { bucketQuantile, buildReport, TOP_LIST } from '../../src/status/report.js';
import { DURATION_BUCKETS } from '../../src/server/stats.js';

const BOUNDS = [...DURATION_BUCKETS, Infinity];

describe('status report', () => {
  test('percentiles interpolate inside the bucket holding the rank, as histogram_quantile does', () => {
    // 50 at or below 0.25 ms, 40 up to 0.5 ms, 9 up to 1 ms, 1 slower than every bound.
    const cumulative = BOUNDS.map((b) =>
      b <= 0.00025 ? 50 : b <= 0.0005 ? 90 : b <= 0.001 ? 99 : b === Infinity ? 100 : 99,
    );
    assert.equal(bucketQuantile(0.5, BOUNDS, cumulative), 0.00025);
    assert.equal(bucketQuantile(0.7, BOUNDS, cumulative), 0.000375);
    assert.equal(bucketQuantile(0.9, BOUNDS, cumulative), 0.0005);
    assert.ok(Math.abs(bucketQuantile(0.99, BOUNDS, cumulative)! - 0.001) < 1e-12);
    assert.equal(bucketQuantile(1, BOUNDS, cumulative), DURATION_BUCKETS[DURATION_BUCKETS.length - 1]);
    assert.equal(
      bucketQuantile(
        0.5,
        BOUNDS,
        BOUNDS.map(() => 0),
      ),
      null,
    );
  });

  test('a report from summed worker metrics: mix, ratios, shares, worst states', () => {
    const lines = [
      'clusterdns_status_workers 2',
      'clusterdns_status_uptime_seconds 93',
      'clusterdns_status_queries_per_second 1234.56',
      'clusterdns_status_responses{window="10s",rcode="NOERROR"} 900',
      'clusterdns_status_responses{window="10s",rcode="NXDOMAIN"} 100',
      'clusterdns_status_responses{window="total",rcode="NOERROR"} 9000',
      'clusterdns_status_responses{window="total",rcode="SERVFAIL"} 10',
      'clusterdns_status_responses{window="total",rcode="NXDOMAIN"} 990',
      ...BOUNDS.map(
        (b) =>
          `clusterdns_status_request_duration_seconds{window="10s",le="${b === Infinity ? '+Inf' : b}"} ${b <= 0.00025 ? 500 : 1000}`,
      ),
      'clusterdns_status_cache{window="10s",result="hit"} 750',
      'clusterdns_status_cache{window="10s",result="miss"} 250',
      'clusterdns_status_cache{window="total",result="hit"} 0',
      'clusterdns_status_cache{window="total",result="miss"} 0',
      'clusterdns_status_names_counted{kind="query"} 1000',
      'clusterdns_status_names_counted{kind="nxdomain"} 100',
      ...Array.from(
        { length: 15 },
        (_, i) => `clusterdns_status_top_names{kind="query",name="n${i}.example."} ${100 - i}`,
      ),
      'clusterdns_status_top_names{kind="query",name="faded.example."} 0.2',
      'clusterdns_status_top_names{kind="nxdomain",name="gone.example."} 60',
      'clusterdns_status_upstream{to="10.0.0.1:53",state="up"} 3',
      'clusterdns_status_upstream{to="10.0.0.1:53",state="failing"} 0',
      'clusterdns_status_upstream{to="10.0.0.1:53",state="down"} 1',
      'clusterdns_status_upstream{to="10.0.0.2:53",state="up"} 4',
      'coredns_forward_requests_total{to="10.0.0.1:53"} 50',
      'coredns_forward_responses_total{to="10.0.0.1:53",rcode="NOERROR"} 40',
      'coredns_forward_responses_total{to="10.0.0.1:53",rcode="SERVFAIL"} 5',
      'coredns_forward_healthcheck_failures_total{to="10.0.0.1:53"} 7',
      'coredns_forward_request_duration_seconds_sum{to="10.0.0.1:53",rcode="NOERROR"} 0.4',
      'coredns_forward_request_duration_seconds_count{to="10.0.0.1:53",rcode="NOERROR"} 40',
      'coredns_forward_request_duration_seconds_sum{to="10.0.0.1:53",rcode="SERVFAIL"} 0.05',
      'coredns_forward_request_duration_seconds_count{to="10.0.0.1:53",rcode="SERVFAIL"} 5',
      'clusterdns_status_kubernetes{zones="cluster.local. in-addr.arpa.",source="in-cluster API",state="up"} 1',
      'clusterdns_status_kubernetes{zones="cluster.local. in-addr.arpa.",source="in-cluster API",state="stale"} 1',
      'clusterdns_status_kubernetes{zones="cluster.local. in-addr.arpa.",source="in-cluster API",state="syncing"} 0',
      'clusterdns_status_kubernetes_objects{zones="cluster.local. in-addr.arpa.",source="in-cluster API",kind="services"} 12',
      'clusterdns_status_kubernetes_last_change_seconds{zones="cluster.local. in-addr.arpa.",source="in-cluster API"} 1700000000',
    ];
    const r = buildReport(parseExposition(lines.join('\n')), new Date('2024-01-01T00:00:00Z'));
    assert.equal(r.workers, 2);
    assert.equal(r.uptimeSeconds, 93);
    assert.equal(r.time, '2024-01-01T00:00:00.000Z');
    assert.deepEqual(r.queries, { perSecond: 1234.6, recent: 1000, total: 10000 });
    assert.deepEqual(r.rcodes.total, { NOERROR: 9000, NXDOMAIN: 990, SERVFAIL: 10 });
    assert.deepEqual(Object.keys(r.rcodes.total), ['NOERROR', 'NXDOMAIN', 'SERVFAIL'], 'largest first');
    assert.equal(r.latency.recent.count, 1000);
    assert.equal(r.latency.recent.p50, 0.00025);
    assert.equal(r.latency.recent.p90, 0.00025 + 0.00025 * 0.8);
    assert.deepEqual(r.latency.total, { count: 0, p50: null, p90: null, p99: null });
    assert.deepEqual(r.cache.recent, { requests: 1000, hits: 750, hitRatio: 0.75 });
    assert.deepEqual(r.cache.total, { requests: 0, hits: 0, hitRatio: null });
    assert.equal(r.topNames.length, TOP_LIST);
    assert.deepEqual(r.topNames[0], { name: 'n0.example.', count: 100, share: 0.1 });
    assert.ok(!r.topNames.some((n) => n.name === 'faded.example.'));
    assert.deepEqual(r.topNxdomain, [{ name: 'gone.example.', count: 60, share: 0.6 }]);
    assert.deepEqual(r.upstreams[0], {
      to: '10.0.0.1:53',
      state: 'down',
      instances: { up: 3, failing: 0, down: 1 },
      requests: 50,
      rcodes: { NOERROR: 40, SERVFAIL: 5 },
      noReply: 5,
      healthcheckFailures: 7,
      meanLatency: 0.01,
    });
    assert.equal(r.upstreams[1]!.state, 'up');
    assert.equal(r.upstreams[1]!.meanLatency, null);
    assert.deepEqual(r.kubernetes, [
      {
        zones: ['cluster.local.', 'in-addr.arpa.'],
        source: 'in-cluster API',
        state: 'stale',
        instances: { up: 1, stale: 1, syncing: 0 },
        services: 12,
        endpointSlices: 0,
        namespaces: 0,
        pods: 0,
        lastChange: '2023-11-14T22:13:20.000Z',
      },
    ]);
  });
});
