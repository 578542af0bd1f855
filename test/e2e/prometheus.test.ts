// CoreDNS's metric names and labels, summed across worker processes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startServer } from '../helpers/server.js';
import { query } from '../helpers/dns.js';
import { freePort } from '../helpers/ports.js';
import { until } from '../helpers/workers.js';
import { writeFileSync } from 'node:fs';
import { QClass, QType } from '../../src/dns/constants.js';

function sample(text: string, name: string, labels: Record<string, string>): number | undefined {
  for (const line of text.split('\n')) {
    if (!line.startsWith(name + '{')) continue;
    const inner = line.slice(name.length + 1, line.lastIndexOf('}'));
    const got = Object.fromEntries([...inner.matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1]!, m[2]!] as const));
    if (Object.entries(labels).every(([k, v]) => got[k] === v)) return Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return undefined;
}

test('core metrics carry CoreDNS names and labels and add up over two workers', { timeout: 30000 }, async () => {
  const mp = await freePort();
  const s = await startServer({
    corefile: `.:PORT {\n bind 127.0.0.1\n prometheus 127.0.0.1:${mp}\n hosts {\n 10.0.0.1 a.test\n }\n}\n`,
    workers: 2,
  });
  try {
    for (let i = 0; i < 20; i++) await query(s.port, 'a.test.', QType.A);
    for (let i = 0; i < 3; i++) await query(s.port, 'a.test.', QType.AAAA, { tcp: true, edns: 1232, do: true });
    await query(s.port, 'nope.test.', QType.A);
    await query(s.port, 'a.test.', QType.A, { qclass: QClass.CH });
    const res = await fetch(`http://127.0.0.1:${mp}/metrics`);
    assert.equal(res.status, 200);
    const text = await res.text();
    const server = `dns://:${s.port}`;
    assert.equal(
      sample(text, 'coredns_dns_requests_total', { server, zone: '.', view: '', proto: 'udp', family: '1', type: 'A' }),
      21,
    );
    assert.equal(sample(text, 'coredns_dns_requests_total', { server, zone: '.', proto: 'tcp', type: 'AAAA' }), 3);
    assert.equal(sample(text, 'coredns_dns_requests_total', { server, zone: 'dropped', type: 'A' }), 1);
    assert.equal(
      sample(text, 'coredns_dns_responses_total', { server, zone: '.', rcode: 'NOERROR', plugin: 'hosts' }),
      23,
    );
    assert.equal(
      sample(text, 'coredns_dns_responses_total', { server, zone: '.', rcode: 'SERVFAIL', plugin: 'hosts' }),
      1,
    );
    assert.equal(
      sample(text, 'coredns_dns_responses_total', { server, zone: 'dropped', rcode: 'REFUSED', plugin: '' }),
      1,
    );
    assert.equal(sample(text, 'coredns_dns_do_requests_total', { server, zone: '.' }), 3);
    assert.equal(sample(text, 'coredns_dns_request_duration_seconds_count', { server, zone: '.', type: 'A' }), 21);
    assert.equal(
      sample(text, 'coredns_dns_request_duration_seconds_bucket', { server, zone: '.', type: 'A', le: '+Inf' }),
      21,
    );
    assert.ok(
      sample(text, 'coredns_dns_request_size_bytes_bucket', { server, zone: '.', proto: 'udp', le: '100' })! >= 21,
    );
    assert.ok(sample(text, 'coredns_dns_response_size_bytes_count', { server, zone: '.', proto: 'tcp' }) === 3);
    assert.equal(sample(text, 'coredns_plugin_enabled', { server, zone: '.', name: 'hosts' }), 1);
    assert.equal(sample(text, 'coredns_build_info', {}), 1);
    assert.match(text, /^coredns_panics_total 0$/m);
    assert.match(text, /^process_resident_memory_bytes \d+/m);
    assert.match(text, /# TYPE coredns_dns_request_duration_seconds histogram/);
  } finally {
    await s.stop();
  }
});

test(
  "every plugin's /metrics passes promtool and carries no client-chosen name; /status keeps the top names",
  { timeout: 60000 },
  async () => {
    const { readFileSync } = await import('node:fs');
    const { FakeUpstream } = await import('../forward/upstreams.js');
    const { promtoolProblems } = await import('../helpers/promtool.js');
    const mp = await freePort();
    const hp = await freePort();
    const upstream = await FakeUpstream.start();
    const s = await startServer({
      corefile: `cluster.local:PORT {
  bind 127.0.0.1
  errors
  log
  health 127.0.0.1:${hp} {
    status
  }
  ready 127.0.0.1:${await freePort()}
  prometheus 127.0.0.1:${mp}
  kubernetes cluster.local {
    manifests cluster.yaml
    pods insecure
  }
  autopath @kubernetes
  cache 30
  loadbalance
}
.:PORT {
  bind 127.0.0.1
  prometheus 127.0.0.1:${mp}
  hosts {
    10.0.0.1 a.test
    fallthrough
  }
  searchfan 127.0.0.1:${upstream.port} {
    search svc.cluster.local
  }
  forward . 127.0.0.1:${upstream.port}
  cache
  loop
}
`,
      files: { 'cluster.yaml': readFileSync('examples/demo/cluster.yaml', 'utf8') },
      workers: 2,
    });
    try {
      for (let i = 0; i < 30; i++) {
        await query(s.port, 'backend.default.svc.cluster.local.', QType.A);
        await query(s.port, 'client-chosen-name.example.', QType.A);
        await query(s.port, 'nope.default.svc.cluster.local.', QType.A);
        await query(s.port, 'a.test.', QType.A, { tcp: i % 2 === 0 });
      }
      const text = await (await fetch(`http://127.0.0.1:${mp}/metrics`)).text();
      // The plugins' families are there (else the check below proves little).
      for (const family of [
        'coredns_cache_requests_total',
        'coredns_forward_requests_total',
        'coredns_kubernetes_dns_programming_duration_seconds',
        'coredns_dns_request_duration_seconds',
        'nodejs_active_handles',
        'process_resident_memory_bytes',
      ]) {
        assert.match(text, new RegExp(`^# TYPE ${family} `, 'm'), family);
      }
      assert.equal(await promtoolProblems(text), '');
      assert.doesNotMatch(text, /^# TYPE \w+_total gauge/m, 'a gauge named like a counter');
      assert.doesNotMatch(text, /client-chosen-name/);
      assert.doesNotMatch(text, /clusterdns_status_top_names|clusterdns_status_request_duration_seconds/);
      // The status page still has them (it is opt-in, on the health listener).
      const deadline = Date.now() + 10000;
      for (;;) {
        const report = (await (await fetch(`http://127.0.0.1:${hp}/status.json`)).json()) as {
          topNames: Array<{ name: string }>;
          latency: { total: { count: number } };
        };
        if (report.topNames.some((n) => n.name === 'client-chosen-name.example.') && report.latency.total.count > 0)
          break;
        assert.ok(Date.now() < deadline, `status lost its top names or latency: ${JSON.stringify(report)}`);
        await new Promise((r) => setTimeout(r, 200));
      }
    } finally {
      await s.stop();
      await upstream.close();
    }
  },
);

for (const workers of [1, 2]) {
  test(
    `a reload that removes cache takes it out of coredns_plugin_enabled (${workers} worker${workers > 1 ? 's' : ''})`,
    { timeout: 45000 },
    async () => {
      const mp = await freePort();
      const block = (plugins: string) =>
        `.:PORT {\n bind 127.0.0.1\n prometheus 127.0.0.1:${mp}\n${plugins} hosts {\n 10.0.0.1 a.test\n }\n}\n`;
      const s = await startServer({ corefile: block(' cache 30\n'), workers });
      try {
        const server = `dns://:${s.port}`;
        const enabled = async (name: string) =>
          sample(await (await fetch(`http://127.0.0.1:${mp}/metrics`)).text(), 'coredns_plugin_enabled', {
            server,
            zone: '.',
            name,
          });
        assert.equal(await enabled('cache'), 1);
        assert.equal(await enabled('errors'), undefined);
        writeFileSync(s.corefile, block(' errors\n').replaceAll('PORT', String(s.port)));
        s.proc.kill('SIGUSR1');
        await until('errors enabled after the reload', 15000, async () => (await enabled('errors')) === 1);
        // The replaced configuration is stopped once its queries are answered: its plugins go with it.
        await until('cache no longer enabled', 10000, async () => (await enabled('cache')) === undefined);
        assert.equal(await enabled('hosts'), 1, 'kept plugins stay enabled');
        assert.equal(await enabled('prometheus'), 1);
        const r = await query(s.port, 'a.test.', QType.A);
        assert.equal((r.answers[0]?.data as { address?: string }).address, '10.0.0.1');
      } finally {
        await s.stop();
      }
    },
  );
}

test(
  'queries are counted only while the configuration has prometheus, as CoreDNS counts in the plugin',
  {
    timeout: 45000,
  },
  async () => {
    const mp = await freePort();
    const block = (prometheus: boolean) =>
      `.:PORT {\n bind 127.0.0.1\n${prometheus ? ` prometheus 127.0.0.1:${mp}\n` : ''} hosts {\n 10.0.0.1 a.test\n }\n}\n`;
    const s = await startServer({ corefile: block(true) });
    const reloads = () => s.output().split('Reloading complete').length - 1;
    const reloadTo = async (text: string) => {
      const before = reloads();
      writeFileSync(s.corefile, text.replaceAll('PORT', String(s.port)));
      s.proc.kill('SIGUSR1');
      await until('the reload', 15000, async () => reloads() > before);
    };
    try {
      for (let i = 0; i < 2; i++) await query(s.port, 'a.test.', QType.A);
      await reloadTo(block(false));
      for (let i = 0; i < 5; i++) await query(s.port, 'a.test.', QType.A);
      await reloadTo(block(true));
      await query(s.port, 'a.test.', QType.A);
      const text = await (await fetch(`http://127.0.0.1:${mp}/metrics`)).text();
      assert.equal(
        sample(text, 'coredns_dns_requests_total', { server: `dns://:${s.port}`, zone: '.', type: 'A' }),
        3,
        'the 5 queries answered without prometheus are not counted',
      );
    } finally {
      await s.stop();
    }
  },
);
