// The forward metrics, read the way the prometheus plugin reads them: the server's registry's metrics().
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { AggregatorRegistry } from 'prom-client';
import { QType, Rcode } from '../../src/dns/constants.js';
import { FORWARD_METRICS } from '../../src/plugins/forward/metrics.js';
import { ServerServices } from '../../src/server/services.js';
import { forwardChain } from './harness.js';
import { answer, FakeUpstream } from './upstreams.js';

function sample(text: string, name: string, labels: string): number | undefined {
  const line = text
    .split('\n')
    .find((l) => l.startsWith(`${name}{${labels}}`) || (labels === '' && l.startsWith(`${name} `)));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
}

describe('forward metrics', () => {
  // One server's counters and registry, as the plugin's setup takes them from its context.
  const services = new ServerServices();
  const metrics = services.get(FORWARD_METRICS);
  const registry = services.metrics();
  let up: FakeUpstream;
  before(async () => {
    up = await FakeUpstream.start();
  });
  after(() => up.close());

  it("exports CoreDNS's current and deprecated names with their labels", async () => {
    up.behaviour = (q, r) =>
      r.send(
        q.msg.questions[0]!.name.startsWith('nx')
          ? answer(q, { rcode: Rcode.NXDOMAIN })
          : answer(q, { a: ['192.0.2.1'] }),
      );
    const to = `127.0.0.1:${up.port}`;
    const h = forwardChain(`forward . ${to}`, undefined, metrics);
    const tcp = forwardChain(`forward . ${to} {\n force_tcp\n}`, undefined, metrics);
    try {
      for (let i = 0; i < 3; i++) await h.ask(`ok${i}.example.org.`, QType.A);
      await h.ask('nx.example.org.', QType.A);
      await tcp.ask('t1.example.org.', QType.A);
      await tcp.ask('t2.example.org.', QType.A);
      const text = await registry.metrics();
      const p = `proxy_name="forward",to="${to}"`;
      assert.equal(sample(text, 'coredns_proxy_request_duration_seconds_count', `${p},rcode="NOERROR"`), 5);
      assert.equal(sample(text, 'coredns_proxy_request_duration_seconds_count', `${p},rcode="NXDOMAIN"`), 1);
      assert.equal(sample(text, 'coredns_proxy_request_duration_seconds_bucket', `${p},rcode="NOERROR",le="+Inf"`), 5);
      assert.ok((sample(text, 'coredns_proxy_request_duration_seconds_sum', `${p},rcode="NOERROR"`) ?? 0) > 0);
      assert.equal(sample(text, 'coredns_proxy_conn_cache_misses_total', `${p},proto="tcp"`), 1);
      assert.equal(sample(text, 'coredns_proxy_conn_cache_hits_total', `${p},proto="tcp"`), 1);
      assert.ok((sample(text, 'coredns_proxy_conn_cache_misses_total', `${p},proto="udp"`) ?? 0) >= 1);
      assert.equal(sample(text, 'coredns_forward_requests_total', `to="${to}"`), 6);
      assert.equal(sample(text, 'coredns_forward_responses_total', `to="${to}",rcode="NXDOMAIN"`), 1);
      assert.equal(sample(text, 'coredns_forward_request_duration_seconds_count', `to="${to}",rcode="NOERROR"`), 5);
      assert.notEqual(sample(text, 'coredns_forward_healthcheck_broken_total', ''), undefined);
      assert.notEqual(sample(text, 'coredns_forward_max_concurrent_rejects_total', ''), undefined);
      assert.match(text, /# TYPE coredns_proxy_request_duration_seconds histogram/);
      assert.match(text, /# TYPE coredns_proxy_conn_cache_hits_total counter/);
    } finally {
      h.stop();
      tcp.stop();
    }
  });

  it('counts failed health checks per upstream under both names', async () => {
    up.behaviour = () => {};
    const to = `127.0.0.1:${up.port}`;
    const h = forwardChain(
      `forward . ${to} {\n health_check 20ms\n read_timeout 50ms\n max_connect_attempts 1\n}`,
      undefined,
      metrics,
    );
    try {
      await h.ask('hc.example.org.', QType.A);
      await new Promise((r) => setTimeout(r, 200));
      const text = await registry.metrics();
      assert.ok(
        (sample(text, 'coredns_proxy_healthcheck_failures_total', `proxy_name="forward",to="${to}"`) ?? 0) >= 1,
      );
      assert.ok((sample(text, 'coredns_forward_healthcheck_failures_total', `to="${to}"`) ?? 0) >= 1);
    } finally {
      h.stop();
    }
  });

  it('aggregates across cluster workers by summing (AggregatorRegistry)', async () => {
    const json = await registry.getMetricsAsJSON();
    const merged = AggregatorRegistry.aggregate([json, json]);
    const text = await merged.metrics();
    const to = `127.0.0.1:${up.port}`;
    const once = sample(await registry.metrics(), 'coredns_forward_requests_total', `to="${to}"`)!;
    assert.equal(sample(text, 'coredns_forward_requests_total', `to="${to}"`), 2 * once);
    assert.equal(
      sample(text, 'coredns_proxy_request_duration_seconds_count', `proxy_name="forward",to="${to}",rcode="NOERROR"`),
      2 *
        sample(
          await registry.metrics(),
          'coredns_proxy_request_duration_seconds_count',
          `proxy_name="forward",to="${to}",rcode="NOERROR"`,
        )!,
    );
  });
});
