// Several workers look like one server from outside: one watch with its errors, relayed
// with a bound, and its numbers counted once. Each test drives the real binary with
// `-workers 2` and asks from a fresh client socket per query, so the kernel spreads them.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startServer } from '../helpers/server.js';
import { freePort } from '../helpers/ports.js';
import { childrenOf } from '../helpers/procs.js';
import { allAnswer, scrape, total, until } from '../helpers/workers.js';
import { KubeApiServer } from '../helpers/kubeapi.js';
import { namespace, service, slice } from '../kubernetes/fixtures.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test(
  'one watch: api_up is 1 (not one per worker), each programming latency is observed once, an outage is logged once',
  { timeout: 60000 },
  async () => {
    const api = await KubeApiServer.create();
    api.apply(namespace('default'));
    api.apply(service('default', 'web', ['10.96.0.50'], [['http', 'TCP', 80]]));
    const metricsPort = await freePort();
    const s = await startServer({
      corefile: `cluster.local:PORT {\n bind 127.0.0.1\n prometheus 127.0.0.1:${metricsPort}\n kubernetes {\n endpoint http://127.0.0.1:${api.port}\n }\n}\n`,
      workers: 2,
    });
    try {
      await until('both workers synced', 10000, () =>
        allAnswer(s.port, 'web.default.svc.cluster.local.', '10.96.0.50'),
      );
      api.apply(service('default', 'db', 'None', [['mysql', 'TCP', 3306]]));
      const sl = slice(
        'default',
        'db-1',
        'db',
        'IPv4',
        [{ ip: '10.244.1.1', hostname: 'db-0' }],
        [['mysql', 'TCP', 3306]],
      );
      (sl.metadata as Record<string, unknown>).annotations = {
        'endpoints.kubernetes.io/last-change-trigger-time': new Date(Date.now() - 1500).toISOString(),
      };
      api.apply(sl);
      await until('db resolves in every worker', 10000, () =>
        allAnswer(s.port, 'db.default.svc.cluster.local.', '10.244.1.1'),
      );
      const after = await scrape(metricsPort);
      const apiUp = total(after, 'coredns_kubernetes_api_up');
      const observed = total(after, 'coredns_kubernetes_dns_programming_duration_seconds_count');
      assert.deepEqual({ apiUp, observed }, { apiUp: 1, observed: 1 });
      assert.match(
        after,
        /^coredns_kubernetes_dns_programming_duration_seconds_count\{service_kind="headless_with_selector"\} 1$/m,
      );
      assert.ok(
        total(after, 'coredns_kubernetes_rest_client_requests_total') > 0,
        "the primary's API requests are counted",
      );
      // An outage: said once (by the primary, not by each worker), and api_up is 0, then 1 again.
      await api.stop();
      await s.waitFor(/unreachable; serving the last known state/, 10000);
      await until('api_up 0', 5000, async () => /^coredns_kubernetes_api_up 0$/m.test(await scrape(metricsPort)));
      await sleep(1000);
      assert.equal(
        s.output().match(/unreachable; serving the last known state/g)?.length,
        1,
        'the outage is logged once',
      );
      await api.start();
      await until('api_up 1 again', 30000, async () =>
        /^coredns_kubernetes_api_up 1$/m.test(await scrape(metricsPort)),
      );
      assert.equal(s.output().match(/reachable again/g)?.length, 1, 'the recovery is logged once');
    } finally {
      await s.stop();
      await api.close();
    }
  },
);

test(
  'a watch that cannot start is reported to every worker (in /ready and api_up), logged once, and retried',
  { timeout: 60000 },
  async () => {
    const api = await KubeApiServer.create();
    api.apply(namespace('default'));
    api.apply(service('default', 'web', ['10.96.0.50'], [['http', 'TCP', 80]]));
    const metricsPort = await freePort();
    const readyPort = await freePort();
    const s = await startServer({
      corefile: `cluster.local:PORT {\n bind 127.0.0.1\n prometheus 127.0.0.1:${metricsPort}\n ready 127.0.0.1:${readyPort}\n kubernetes {\n kubeconfig kubeconfig.yaml test\n startup_timeout 1s\n }\n}\n`,
      // There, but without the context named: the watch fails when it starts, not at parsing.
      files: { 'kubeconfig.yaml': 'apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n' },
      workers: 2,
    });
    try {
      await s.waitFor(/kubeconfig.*retrying with backoff/, 10000);
      const ready = await fetch(`http://127.0.0.1:${readyPort}/ready`);
      assert.equal(ready.status, 503);
      assert.match(await ready.text(), /kubernetes/);
      assert.match(await scrape(metricsPort), /^coredns_kubernetes_api_up 0$/m);
      await sleep(2500);
      assert.equal(s.output().match(/retrying with backoff/g)?.length, 1, `logged once:\n${s.output()}`);
      writeFileSync(
        join(s.dir, 'kubeconfig.yaml'),
        `apiVersion: v1
kind: Config
clusters:
- name: test
  cluster: { server: "http://127.0.0.1:${api.port}" }
users:
- name: robot
  user: { token: s3cret }
contexts:
- name: test
  context: { cluster: test, user: robot }
`,
      );
      await until('the retried watch feeds every worker', 20000, () =>
        allAnswer(s.port, 'web.default.svc.cluster.local.', '10.96.0.50'),
      );
      await until('ready', 5000, async () => (await fetch(`http://127.0.0.1:${readyPort}/ready`)).status === 200);
      assert.match(await scrape(metricsPort), /^coredns_kubernetes_api_up 1$/m);
    } finally {
      await s.stop();
      await api.close();
    }
  },
);

test(
  'a worker that stops reading the watch gets the current state when it reads again, not the backlog',
  { timeout: 60000 },
  async () => {
    const api = await KubeApiServer.create();
    api.apply(namespace('default'));
    api.apply(service('default', 'web', ['10.96.0.50'], [['http', 'TCP', 80]]));
    const s = await startServer({
      corefile: `cluster.local:PORT {\n bind 127.0.0.1\n kubernetes {\n endpoint http://127.0.0.1:${api.port}\n }\n}\n`,
      workers: 2,
      env: { CLUSTERDNS_RELAY_MAX_UNACKED: '50' },
    });
    try {
      await until('synced', 10000, () => allAnswer(s.port, 'web.default.svc.cluster.local.', '10.96.0.50'));
      const [stopped] = childrenOf(s.proc.pid!);
      process.kill(stopped!, 'SIGSTOP');
      try {
        for (let i = 0; i < 300; i++) {
          api.apply(service('default', 'web', [`10.96.1.${i % 250}`], [['http', 'TCP', 80]]));
          if (i % 20 === 0) await sleep(20);
        }
        api.apply(service('default', 'web', ['10.96.0.77'], [['http', 'TCP', 80]]));
        await s.waitFor(/fell behind the watch/, 10000);
      } finally {
        process.kill(stopped!, 'SIGCONT');
      }
      await s.waitFor(/caught up: sent the current state of 1 changed objects instead of the backlog/, 10000);
      await until('every worker answers the latest', 10000, () =>
        allAnswer(s.port, 'web.default.svc.cluster.local.', '10.96.0.77'),
      );
    } finally {
      await s.stop();
      await api.close();
    }
  },
);

test(
  'a first list bigger than the relay bound reaches every worker: one batch to a worker that acknowledged everything is sent, not held',
  { timeout: 60000 },
  async () => {
    const api = await KubeApiServer.create();
    api.apply(namespace('default'));
    for (let i = 0; i < 120; i++) api.apply(service('default', `svc-${i}`, [`10.96.2.${i}`], [['http', 'TCP', 80]]));
    const s = await startServer({
      corefile: `cluster.local:PORT {\n bind 127.0.0.1\n kubernetes {\n endpoint http://127.0.0.1:${api.port}\n }\n}\n`,
      workers: 2,
      env: { CLUSTERDNS_RELAY_MAX_UNACKED: '50' },
    });
    try {
      // The old relay marked both workers "behind" at their first batch and never sent them anything: SERVFAIL for ever.
      await until('every worker answers from the first list', 15000, () =>
        allAnswer(s.port, 'svc-119.default.svc.cluster.local.', '10.96.2.119'),
      );
      assert.doesNotMatch(s.output(), /fell behind the watch \(0 events unacknowledged\)/);
    } finally {
      await s.stop();
      await api.close();
    }
  },
);
