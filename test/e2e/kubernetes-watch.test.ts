// The kubernetes plugin against a live test API server: changes seen within a second, a closed
// watch, a 410 relist, an API outage, paged lists of more than 1,000 Services, a start without
// the API, bad objects, and each way to authenticate.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { KubeApiServer } from '../helpers/kubeapi.js';
import { startServer, type RunningServer } from '../helpers/server.js';
import { query } from '../helpers/dns.js';
import { freePort } from '../helpers/ports.js';
import { QType, Rcode } from '../../src/dns/constants.js';
import type { Message } from '../../src/dns/message.js';
import { namespace, sectionText, service, slice, soaText } from '../kubernetes/fixtures.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls `probe` until `ok` holds; returns how long it took. */
async function within(
  ms: number,
  what: string,
  probe: () => Promise<Message>,
  ok: (m: Message) => boolean,
): Promise<number> {
  const start = Date.now();
  let last: Message | undefined;
  while (Date.now() - start < ms) {
    last = await probe();
    if (ok(last)) return Date.now() - start;
    await sleep(20);
  }
  assert.fail(
    `not within ${ms} ms: ${what}; last answer rcode ${last?.rcode} ${JSON.stringify(last ? sectionText(last.answers) : [])}`,
  );
}

const addresses = (m: Message) => sectionText(m.answers).map((l) => l.split(' ').pop()!);

async function scrape(port: number): Promise<string> {
  const res = await fetch(`http://127.0.0.1:${port}/metrics`);
  return res.text();
}

describe('kubernetes: the cluster changes while the server runs', () => {
  let api: KubeApiServer;
  let s: RunningServer;
  let metricsPort: number;
  const A = (name: string) => query(s.port, name, QType.A);

  before(async () => {
    api = await KubeApiServer.create();
    api.apply(namespace('default'));
    api.apply(namespace('shop'));
    api.apply(service('default', 'stable', ['10.96.0.50'], [['http', 'TCP', 80]]));
    // Bad objects: each must be skipped (or trimmed) with a warning naming it, and nothing else lost.
    api.apply({ kind: 'Service', metadata: { name: 'noip', namespace: 'default' }, spec: { ports: [{ port: 80 }] } });
    api.apply({
      kind: 'Service',
      metadata: { name: 'badip', namespace: 'default' },
      spec: { clusterIP: '10.0.0.300' },
    });
    api.apply({
      kind: 'Service',
      metadata: { name: 'x'.repeat(70), namespace: 'default' },
      spec: { clusterIP: '10.96.0.70' },
    });
    api.apply({
      kind: 'Service',
      metadata: { name: 'unnamed', namespace: 'default' },
      spec: { clusterIP: '10.96.0.71', ports: [{ port: 8080 }, { port: 99999 }] },
    });
    api.apply({
      kind: 'Service',
      metadata: { name: 'literal', namespace: 'default' },
      spec: { type: 'ExternalName', externalName: '1.2.3.4' },
    });
    api.apply({
      kind: 'EndpointSlice',
      metadata: { name: 'orphan', namespace: 'default' },
      addressType: 'IPv4',
      endpoints: [{ addresses: ['10.1.1.1'] }],
    });
    api.apply({
      kind: 'EndpointSlice',
      metadata: { name: 'stable-1', namespace: 'default', labels: { 'kubernetes.io/service-name': 'stable' } },
      addressType: 'IPv4',
      ports: [{ name: 'http', port: 80, protocol: 'TCP' }],
      endpoints: [{ addresses: ['not-an-ip', '10.244.0.5'] }, { addresses: ['10.244.0.6'], hostname: 'Bad_Host' }],
    });
    metricsPort = await freePort();
    s = await startServer({
      // With a cache in front: every change must reach the client anyway (the plugin invalidates it).
      corefile: `.:PORT {\n    bind 127.0.0.1\n    prometheus 127.0.0.1:${metricsPort}\n    cache 30\n    kubernetes cluster.local in-addr.arpa {\n        endpoint ${api.url}\n    }\n}\n`,
    });
  });

  after(async () => {
    await s?.stop();
    await api?.close();
  });

  test('malformed objects are skipped with a warning naming each; the rest is served', async () => {
    const out = s.output();
    assert.match(out, /\[WARNING\] plugin\/kubernetes: Service default\/noip: no spec\.clusterIP; skipped/);
    assert.match(out, /Service default\/badip: clusterIP "10\.0\.0\.300" is not an IP address; skipped/);
    assert.match(out, /Service default\/x{70}: its name is not a DNS label/);
    assert.match(out, /Service default\/unnamed: port 99999 is not a number in 1\.\.65535; port skipped/);
    assert.match(out, /Service default\/literal: externalName "1\.2\.3\.4" is not a host name/);
    assert.match(out, /EndpointSlice default\/orphan: no kubernetes\.io\/service-name label; skipped/);
    assert.match(out, /EndpointSlice default\/stable-1: address "not-an-ip" is not an IPv4 address; address skipped/);
    assert.match(out, /EndpointSlice default\/stable-1: endpoint hostname "Bad_Host" is not a DNS label/);
    assert.doesNotMatch(out, /skipping malformed object/, 'one warning per problem, not a second generic one');
    assert.equal((await A('noip.default.svc.cluster.local.')).rcode, Rcode.NXDOMAIN);
    assert.equal((await A('literal.default.svc.cluster.local.')).rcode, Rcode.NXDOMAIN);
    assert.deepEqual(addresses(await A('unnamed.default.svc.cluster.local.')), ['10.96.0.71']);
    const srv = await query(s.port, 'unnamed.default.svc.cluster.local.', QType.SRV);
    assert.deepEqual(sectionText(srv.answers), [
      'unnamed.default.svc.cluster.local. 5 SRV 0 100 8080 unnamed.default.svc.cluster.local.',
    ]);
    assert.deepEqual(addresses(await A('10-244-0-5.stable.default.svc.cluster.local.')), ['10.244.0.5']);
    assert.deepEqual(addresses(await A('10-244-0-6.stable.default.svc.cluster.local.')), ['10.244.0.6']);
  });

  test('a Service added, changed and deleted is answered within a second, through a cache', async () => {
    const negative = await A('web.shop.svc.cluster.local.');
    assert.equal(negative.rcode, Rcode.NXDOMAIN, 'a cached NXDOMAIN first');
    api.apply(service('shop', 'web', ['10.96.1.1'], [['http', 'TCP', 80]]));
    const added = await within(
      1000,
      'web added',
      () => A('web.shop.svc.cluster.local.'),
      (m) => addresses(m).includes('10.96.1.1'),
    );
    api.apply(service('shop', 'web', ['10.96.1.2'], [['http', 'TCP', 80]]));
    const changed = await within(
      1000,
      'web changed',
      () => A('web.shop.svc.cluster.local.'),
      (m) => addresses(m).join() === '10.96.1.2',
    );
    const oldPtr = await query(s.port, '1.1.96.10.in-addr.arpa.', QType.PTR);
    assert.equal(oldPtr.rcode, Rcode.NXDOMAIN, 'the old ClusterIP has no PTR any more');
    const newPtr = await query(s.port, '2.1.96.10.in-addr.arpa.', QType.PTR);
    assert.deepEqual(sectionText(newPtr.answers), ['2.1.96.10.in-addr.arpa. 5 PTR web.shop.svc.cluster.local.']);
    api.remove('Service', 'shop', 'web');
    const deleted = await within(
      1000,
      'web deleted',
      () => A('web.shop.svc.cluster.local.'),
      (m) => m.rcode === Rcode.NXDOMAIN,
    );
    assert.ok(added < 1000 && changed < 1000 && deleted < 1000);
  });

  test('the SOA serial moves forward when the cluster changes', async () => {
    const before = await query(s.port, 'cluster.local.', QType.SOA);
    const serial0 = (before.answers[0]!.data as { serial: number }).serial;
    assert.ok(Math.abs(serial0 - Date.now() / 1000) < 600, 'the serial is a recent unix time');
    await sleep(1100);
    api.apply(service('shop', 'serial-bump', ['10.96.1.9']));
    await within(
      1000,
      'serial bumped',
      () => query(s.port, 'cluster.local.', QType.SOA),
      (m) => (m.answers[0]!.data as { serial: number }).serial > serial0,
    );
  });

  test('headless names follow the EndpointSlice: unready endpoints leave, the last one leaving is NXDOMAIN', async () => {
    api.apply(service('shop', 'db', 'None', [['mysql', 'TCP', 3306]]));
    const first = slice(
      'shop',
      'db-1',
      'db',
      'IPv4',
      [
        { ip: '10.244.1.1', hostname: 'db-0' },
        { ip: '10.244.1.2', hostname: 'db-1' },
      ],
      [['mysql', 'TCP', 3306]],
    );
    (first.metadata as Record<string, unknown>).annotations = {
      'endpoints.kubernetes.io/last-change-trigger-time': new Date(Date.now() - 1500).toISOString(),
    };
    api.apply(first);
    await within(
      1000,
      'db endpoints',
      () => A('db.shop.svc.cluster.local.'),
      (m) => addresses(m).sort().join() === '10.244.1.1,10.244.1.2',
    );
    const metrics = await scrape(metricsPort);
    assert.match(
      metrics,
      /^coredns_kubernetes_dns_programming_duration_seconds_count\{service_kind="headless_with_selector"\} 1$/m,
    );
    assert.match(
      metrics,
      /^coredns_kubernetes_dns_programming_duration_seconds_bucket\{le="1.024",service_kind="headless_with_selector"\} 0$/m,
      'it took about 1.5 s',
    );
    assert.deepEqual(addresses(await A('db-1.db.shop.svc.cluster.local.')), ['10.244.1.2']);
    api.apply(
      slice(
        'shop',
        'db-1',
        'db',
        'IPv4',
        [
          { ip: '10.244.1.1', hostname: 'db-0' },
          { ip: '10.244.1.2', hostname: 'db-1', ready: false },
        ],
        [['mysql', 'TCP', 3306]],
      ),
    );
    await within(
      1000,
      'db-1 not ready',
      () => A('db-1.db.shop.svc.cluster.local.'),
      (m) => m.rcode === Rcode.NXDOMAIN,
    );
    const ptr = await query(s.port, '1.1.244.10.in-addr.arpa.', QType.PTR);
    assert.deepEqual(sectionText(ptr.answers), ['1.1.244.10.in-addr.arpa. 5 PTR db-0.db.shop.svc.cluster.local.']);
    api.remove('EndpointSlice', 'shop', 'db-1');
    await within(
      1000,
      'no endpoints',
      () => A('db.shop.svc.cluster.local.'),
      (m) => m.rcode === Rcode.NXDOMAIN,
    );
  });

  test('a watch the API server closes is resumed and later changes still arrive', async () => {
    const watches = api.watchRequests;
    assert.ok(api.closeAllWatches() >= 3, 'services, endpointslices and namespaces are watched');
    api.apply(service('shop', 'after-close', ['10.96.1.3']));
    await within(
      1000,
      'after-close',
      () => A('after-close.shop.svc.cluster.local.'),
      (m) => addresses(m).includes('10.96.1.3'),
    );
    assert.ok(api.watchRequests >= watches + 3, 'the watches were opened again');
  });

  test('with the API down, answers go on from what is known; the outage is logged and exported; it heals', async () => {
    api.apply(service('shop', 'gone-while-down', ['10.96.1.4']));
    await within(
      1000,
      'gone-while-down',
      () => A('gone-while-down.shop.svc.cluster.local.'),
      (m) => m.rcode === Rcode.NOERROR,
    );
    await api.stop();
    await s.waitFor(
      /plugin\/kubernetes: endpoint http:\/\/127\.0\.0\.1:\d+: unreachable; serving the last known state/,
      5000,
    );
    assert.deepEqual(addresses(await A('stable.default.svc.cluster.local.')), ['10.96.0.50']);
    assert.equal(
      (await A('nothing.shop.svc.cluster.local.')).rcode,
      Rcode.NXDOMAIN,
      'still synced: NXDOMAIN, not SERVFAIL',
    );
    assert.match(await scrape(metricsPort), /^coredns_kubernetes_api_up 0$/m);
    // While it was down: one Service deleted, one added, and the event history compacted, so the
    // watch cannot resume: the reflector gets 410 Gone and relists, deletions included.
    const listsBefore = api.requestCount('/api/v1/services', 'list');
    api.remove('Service', 'shop', 'gone-while-down');
    api.apply(service('shop', 'made-while-down', ['10.96.1.5']));
    api.compact();
    await api.start();
    await within(
      8000,
      'made-while-down',
      () => A('made-while-down.shop.svc.cluster.local.'),
      (m) => addresses(m).includes('10.96.1.5'),
    );
    assert.equal(
      (await A('gone-while-down.shop.svc.cluster.local.')).rcode,
      Rcode.NXDOMAIN,
      'the relist applied the deletion',
    );
    assert.ok(api.requestCount('/api/v1/services', 'list') > listsBefore, 'services were listed again');
    await s.waitFor(/plugin\/kubernetes: endpoint http:\/\/127\.0\.0\.1:\d+: reachable again/, 5000);
    const metrics = await scrape(metricsPort);
    assert.match(metrics, /^coredns_kubernetes_api_up 1$/m);
    assert.match(
      metrics,
      /^coredns_kubernetes_rest_client_requests_total\{code="200",method="GET",host="127\.0\.0\.1:\d+"\} \d+$/m,
    );
  });

  test('a 410 Gone on a live watch makes the plugin relist', async () => {
    // A healthy watch first (an event delivered), as before any real-world 410.
    api.apply(service('shop', 'before-410', ['10.96.1.7']));
    await within(
      1000,
      'before-410',
      () => A('before-410.shop.svc.cluster.local.'),
      (m) => addresses(m).includes('10.96.1.7'),
    );
    const lists = api.requestCount('/api/v1/services', 'list');
    api.compact();
    api.closeAllWatches();
    api.apply(service('shop', 'after-410', ['10.96.1.6']));
    await within(
      2000,
      'after-410',
      () => A('after-410.shop.svc.cluster.local.'),
      (m) => addresses(m).includes('10.96.1.6'),
    );
    await within(
      2000,
      'relisted',
      async () => A('stable.default.svc.cluster.local.'),
      () => api.requestCount('/api/v1/services', 'list') > lists,
    );
  });
});

describe('kubernetes: more than 1,000 Services listed across pages', () => {
  let api: KubeApiServer;
  let s: RunningServer;
  const N = 1200;

  before(async () => {
    // No watch cache: lists come from storage in pages (a watch cache answers RV=0 whole).
    api = await KubeApiServer.create({ watchCache: false });
    api.apply(namespace('bulk'));
    for (let i = 0; i < N; i++)
      api.apply(service('bulk', `svc-${i}`, [`10.97.${i >> 8}.${i & 255}`], [['http', 'TCP', 80]]));
    s = await startServer({
      corefile: `.:PORT {\n    bind 127.0.0.1\n    kubernetes cluster.local in-addr.arpa {\n        endpoint ${api.url}\n    }\n}\n`,
    });
  });

  after(async () => {
    await s?.stop();
    await api?.close();
  });

  test('every Service of every page answers, first to last, forward and reverse', async () => {
    const pages = api.requestLog.filter((r) => r.path === '/api/v1/services' && r.verb === 'list');
    assert.ok(pages.length >= 3, `the list came in pages (${pages.length} requests)`);
    assert.ok(
      pages.some((r) => r.query.continue),
      'with continue tokens',
    );
    for (const i of [0, 499, 500, 999, 1000, N - 1]) {
      const m = await query(s.port, `svc-${i}.bulk.svc.cluster.local.`, QType.A);
      assert.deepEqual(addresses(m), [`10.97.${i >> 8}.${i & 255}`], `svc-${i}`);
    }
    const ptr = await query(s.port, `${(N - 1) & 255}.${(N - 1) >> 8}.97.10.in-addr.arpa.`, QType.PTR);
    assert.deepEqual(addresses(ptr), [`svc-${N - 1}.bulk.svc.cluster.local.`]);
  });
});

describe('kubernetes: starting without the API', () => {
  let api: KubeApiServer | undefined;
  let s: RunningServer;
  let apiPort: number;
  let readyPort: number;
  let metricsPort: number;

  before(async () => {
    apiPort = await freePort();
    readyPort = await freePort();
    metricsPort = await freePort();
    s = await startServer({
      corefile: `.:PORT {
    bind 127.0.0.1
    ready 127.0.0.1:${readyPort}
    prometheus 127.0.0.1:${metricsPort}
    kubernetes cluster.local {
        endpoint http://127.0.0.1:${apiPort}
        startup_timeout 1200ms
        fallthrough other.svc.cluster.local
    }
    whoami
}
`,
    });
  });

  after(async () => {
    await s?.stop();
    await api?.close();
  });

  test('start-up waits up to startup_timeout, saying so, then serves: SERVFAIL for would-be NXDOMAIN, fallthrough first, /ready 503', async () => {
    const out = s.output();
    assert.match(out, /\[INFO\] plugin\/kubernetes: waiting for Kubernetes API before starting server/);
    assert.match(out, /\[WARNING\] plugin\/kubernetes: starting server with unsynced Kubernetes API/);
    assert.ok(
      out.indexOf('starting server with unsynced') < out.search(/clusterdns-\d/),
      'the listeners opened after the wait',
    );
    const m = await query(s.port, 'web.default.svc.cluster.local.', QType.A);
    assert.equal(m.rcode, Rcode.SERVFAIL);
    assert.deepEqual(sectionText(m.authorities), [soaText('cluster.local.')]);
    const fell = await query(s.port, 'x.other.svc.cluster.local.', QType.A);
    assert.equal(fell.rcode, Rcode.NOERROR, 'fallthrough goes to whoami before the unsynced SERVFAIL');
    assert.equal(fell.additionals[0]?.type, QType.A);
    const ready = await fetch(`http://127.0.0.1:${readyPort}/ready`);
    assert.equal(ready.status, 503);
    assert.equal(await ready.text(), 'kubernetes');
    assert.match(await scrape(metricsPort), /^coredns_kubernetes_api_up 0$/m);
  });

  test('when the API appears it syncs: names answer, NXDOMAIN replaces SERVFAIL, /ready is 200', async () => {
    api = await KubeApiServer.create({ port: apiPort });
    api.apply(namespace('default'));
    api.apply(service('default', 'web', ['10.96.2.1']));
    await within(
      8000,
      'web after sync',
      () => query(s.port, 'web.default.svc.cluster.local.', QType.A),
      (m) => addresses(m).includes('10.96.2.1'),
    );
    await within(
      8000,
      'every collection synced',
      () => query(s.port, 'nope.default.svc.cluster.local.', QType.A),
      (m) => m.rcode === Rcode.NXDOMAIN,
    );
    assert.match(
      s.output(),
      /plugin\/kubernetes: endpoint http:\/\/127\.0\.0\.1:\d+: synced \(1 services, 1 namespaces\)/,
    );
    const ready = await fetch(`http://127.0.0.1:${readyPort}/ready`);
    assert.equal(ready.status, 200);
    assert.match(await scrape(metricsPort), /^coredns_kubernetes_api_up 1$/m);
  });
});

describe('kubernetes: authentication', () => {
  let tlsApi: KubeApiServer;
  let tokenApi: KubeApiServer;
  let s: RunningServer;

  before(async () => {
    tlsApi = await KubeApiServer.create({ tls: true, clientCertAuth: true });
    tokenApi = await KubeApiServer.create({ token: 's3cret' });
    for (const [api, ip] of [
      [tlsApi, '10.96.3.1'],
      [tokenApi, '10.96.3.2'],
    ] as const) {
      api.apply(namespace('default'));
      api.apply(service('default', 'web', [ip]));
    }
    const pki = tlsApi.pki!;
    const kubeconfig = `apiVersion: v1
kind: Config
current-context: other
clusters:
- name: test
  cluster: { server: "${tokenApi.url}" }
users:
- name: robot
  user: { token: s3cret }
contexts:
- name: test
  context: { cluster: test, user: robot }
- name: other
  context: { cluster: nowhere, user: robot }
`;
    s = await startServer({
      corefile: `tls.local:PORT {
    bind 127.0.0.1
    kubernetes tls.local {
        endpoint ${tlsApi.url}
        tls ${pki.clientCertFile} ${pki.clientKeyFile} ${pki.caFile}
    }
}
kc.local:PORT {
    bind 127.0.0.1
    kubernetes kc.local {
        kubeconfig kubeconfig.yaml test
    }
}
`,
      files: { 'kubeconfig.yaml': kubeconfig },
    });
  });

  after(async () => {
    await s?.stop();
    await tlsApi?.close();
    await tokenApi?.close();
  });

  test('endpoint + tls CERT KEY CACERT authenticates with the client certificate', async () => {
    assert.deepEqual(addresses(await query(s.port, 'web.default.svc.tls.local.', QType.A)), ['10.96.3.1']);
  });

  test('kubeconfig FILE CONTEXT uses that context, not current-context', async () => {
    assert.deepEqual(addresses(await query(s.port, 'web.default.svc.kc.local.', QType.A)), ['10.96.3.2']);
    assert.ok(tokenApi.requestLog.every((r) => r.authorization === 'Bearer s3cret'));
  });
});

describe('kubernetes: a reload keeps the watch', () => {
  test(
    'a Corefile change that keeps the source adopts the synced index: no relist, changes still arrive, the old handler stops following; a new source lists',
    { timeout: 30000 },
    async () => {
      const api = await KubeApiServer.create();
      api.apply(namespace('default'));
      api.apply(service('default', 'a', ['10.96.3.1'], [['http', 'TCP', 80]]));
      const conf = (ttl: number, extra = '') =>
        `.:PORT {\n    bind 127.0.0.1\n    reload 1h\n    kubernetes cluster.local {\n        endpoint ${api.url}\n        ttl ${ttl}\n${extra}    }\n}\n`;
      const s = await startServer({ corefile: conf(5) });
      try {
        const lists = () => api.requestLog.filter((r) => r.verb === 'list').length;
        const A = (name: string) => query(s.port, name, QType.A);
        const before = lists();
        assert.ok(before >= 2, `first sync listed services and slices (${before})`);
        const { writeFileSync } = await import('node:fs');
        writeFileSync(s.corefile, conf(7).replaceAll('PORT', String(s.port)));
        s.proc.kill('SIGUSR1');
        await within(
          3000,
          'the new ttl answers',
          () => A('a.default.svc.cluster.local.'),
          (m) => m.answers[0]?.ttl === 7,
        );
        assert.equal(lists(), before, 'the reload relisted');
        // The adopted index keeps following the watch.
        api.apply(service('default', 'b', ['10.96.3.2'], [['http', 'TCP', 80]]));
        await within(
          1000,
          'b added after the reload',
          () => A('b.default.svc.cluster.local.'),
          (m) => addresses(m).includes('10.96.3.2'),
        );
        // A different source (labels) is a different index: listed afresh, and its filter applies.
        writeFileSync(s.corefile, conf(7, '        labels app=none\n').replaceAll('PORT', String(s.port)));
        s.proc.kill('SIGUSR1');
        await within(
          3000,
          'the label filter applies',
          () => A('a.default.svc.cluster.local.'),
          (m) => m.rcode === Rcode.NXDOMAIN,
        );
        assert.ok(lists() > before, 'a new source lists');
      } finally {
        await s.stop();
        await api.close();
      }
    },
  );
});
