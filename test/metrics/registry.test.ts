// prom-client is loaded only when metrics are wanted (src/metrics/registry.ts): importing every
// plugin and asking for a server's counters loads nothing; the server's registry registers its
// plugins' families in their order, the process's none of them; and the kubernetes
// programming-latency histogram, counted in plain numbers, reads as prom-client's Histogram.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);
const dist = fileURLToPath(new URL('../../src/', import.meta.url));

/** Runs `code` (an ES module) in a fresh Node process; returns its stdout. */
async function fresh(code: string): Promise<string> {
  const { stdout } = await run(process.execPath, ['--input-type=module', '-e', code], { cwd: dist });
  return stdout;
}

const PROM_LOADED = `Object.keys((await import('node:module')).createRequire(import.meta.url).cache).some((k) => k.includes('/node_modules/prom-client/'))`;

describe('the metrics registry is made on first use', () => {
  test('loading every plugin and starting a server without prometheus does not load prom-client', async () => {
    const out = await fresh(`
      const o = await import('${dist}plugins/order.js'); await o.loadPlugins(o.pluginOrder.map(([n]) => n));
      await import('${dist}server/server.js');
      await import('${dist}metrics/cluster.js');
      const r = await import('${dist}metrics/registry.js');
      console.log(JSON.stringify({ loaded: ${PROM_LOADED}, created: r.metricsLoaded() }));
    `);
    assert.deepEqual(JSON.parse(out), { loaded: false, created: false });
  });

  test("a server's registry gets the families its plugins asked for, in their order, and loads prom-client then", async () => {
    const out = await fresh(`
      const o = await import('${dist}plugins/order.js'); await o.loadPlugins(o.pluginOrder.map(([n]) => n));
      const { ServerServices } = await import('${dist}server/services.js');
      const services = new ServerServices();
      for (const [file, key] of [
        ['plugins/cache/metrics.js', 'CACHE_METRICS'],
        ['cluster/metrics.js', 'KUBE_CLIENT_METRICS'],
        ['plugins/forward/metrics.js', 'FORWARD_METRICS'],
      ])
        services.get((await import('${dist}' + file))[key]);
      const before = ${PROM_LOADED};
      const r = await import('${dist}metrics/registry.js');
      const names = services.metrics().getMetricsAsArray().map((m) => m.name);
      const processNames = r.metricsRegistry().getMetricsAsArray().map((m) => m.name);
      console.log(JSON.stringify({ before, loaded: ${PROM_LOADED}, names, processNames }));
    `);
    const { before, loaded, names, processNames } = JSON.parse(out) as {
      before: boolean;
      loaded: boolean;
      names: string[];
      processNames: string[];
    };
    assert.equal(before, false, 'asking for the counters loads nothing');
    assert.equal(loaded, true);
    for (const n of [
      'coredns_cache_entries',
      'coredns_cache_requests_total',
      'coredns_kubernetes_rest_client_requests_total',
      'coredns_kubernetes_dns_programming_duration_seconds',
      'coredns_forward_requests_total',
    ]) {
      assert.ok(names.includes(n), `${n} is registered (got ${names.join(', ')})`);
      assert.ok(!processNames.includes(n), `${n} is the server's, not the process's`);
    }
    assert.deepEqual(
      processNames.filter((n) => n.startsWith('coredns_')),
      [],
      "no plugin counts in the process's registry: every server has its own",
    );
    // Each module's metrics stay together and in the order the module declared them.
    assert.ok(names.indexOf('coredns_cache_entries') < names.indexOf('coredns_cache_requests_total'));
    assert.ok(
      names.indexOf('coredns_kubernetes_rest_client_requests_total') <
        names.indexOf('coredns_kubernetes_dns_programming_duration_seconds'),
    );
  });

  test('the programming-latency histogram reads as prom-client writes a Histogram', async () => {
    const out = await fresh(`
      const { KubeClientMetrics } = await import('${dist}cluster/metrics.js');
      const { promClient } = await import('${dist}metrics/registry.js');
      const m = new KubeClientMetrics();
      const registry = new (promClient().Registry)();
      m.register(registry);
      m.observeProgrammingSeconds('cluster_ip', 0.003);
      m.observeProgrammingSeconds('cluster_ip', 1.5);
      m.observeProgrammingSeconds('headless_with_selector', 1000);
      const text = await registry.metrics();
      console.log(text.split('\\n').filter((l) => l.includes('programming_duration')).join('\\n'));
    `);
    const lines = out.trim().split('\n');
    assert.equal(
      lines[0],
      '# HELP coredns_kubernetes_dns_programming_duration_seconds Histogram of the time (in seconds) it took to program a dns instance.',
    );
    assert.equal(lines[1], '# TYPE coredns_kubernetes_dns_programming_duration_seconds histogram');
    assert.ok(
      lines.includes(
        'coredns_kubernetes_dns_programming_duration_seconds_bucket{le="0.002",service_kind="cluster_ip"} 0',
      ),
    );
    assert.ok(
      lines.includes(
        'coredns_kubernetes_dns_programming_duration_seconds_bucket{le="0.004",service_kind="cluster_ip"} 1',
      ),
    );
    assert.ok(
      lines.includes(
        'coredns_kubernetes_dns_programming_duration_seconds_bucket{le="1.024",service_kind="cluster_ip"} 1',
      ),
    );
    assert.ok(
      lines.includes(
        'coredns_kubernetes_dns_programming_duration_seconds_bucket{le="2.048",service_kind="cluster_ip"} 2',
      ),
    );
    assert.ok(
      lines.includes(
        'coredns_kubernetes_dns_programming_duration_seconds_bucket{le="+Inf",service_kind="cluster_ip"} 2',
      ),
    );
    assert.ok(
      lines.includes('coredns_kubernetes_dns_programming_duration_seconds_sum{service_kind="cluster_ip"} 1.503'),
    );
    assert.ok(lines.includes('coredns_kubernetes_dns_programming_duration_seconds_count{service_kind="cluster_ip"} 2'));
    assert.ok(
      lines.includes(
        'coredns_kubernetes_dns_programming_duration_seconds_bucket{le="524.288",service_kind="headless_with_selector"} 0',
      ),
    );
    assert.ok(
      lines.includes(
        'coredns_kubernetes_dns_programming_duration_seconds_bucket{le="+Inf",service_kind="headless_with_selector"} 1',
      ),
    );
    // 20 buckets, +Inf, sum and count for each of the two kinds.
    assert.equal(lines.length, 2 + 2 * 23);
  });
});

test('families kept off /metrics lose their HELP, TYPE and samples, and nothing else does', async () => {
  const { keepOffMetrics, withoutInternalFamilies } = await import('../../src/metrics/registry.js');
  keepOffMetrics('x_private');
  const text = [
    '# HELP x_private names clients chose',
    '# TYPE x_private gauge',
    'x_private{name="secret.example."} 3',
    'x_private 1',
    '# HELP x_private_total another family',
    '# TYPE x_private_total counter',
    'x_private_total 2',
    'x_public{le="+Inf"} 4',
    '',
  ].join('\n');
  assert.equal(
    withoutInternalFamilies(text),
    [
      '# HELP x_private_total another family',
      '# TYPE x_private_total counter',
      'x_private_total 2',
      'x_public{le="+Inf"} 4',
      '',
    ].join('\n'),
  );
});
