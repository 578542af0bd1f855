// The kube-dns checks against the test API server: each step says what is broken.
import { after, before, beforeEach, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { checkClusterDns, listServices, type ClusterCheck } from '../../src/diagnose/cluster.js';
import { endpointConnection } from '../../src/kube/connection.js';
import { KubeClient } from '../../src/kube/http.js';
import { KubeApiServer } from '../helpers/kubeapi.js';
import { appService, applyHealthyDns, kubeDnsPod, kubeDnsService, kubeDnsSlice } from './kubedns-fixtures.js';

describe('kube-dns checks', () => {
  let api: KubeApiServer;
  let client: KubeClient;
  before(async () => {
    api = await KubeApiServer.create();
    client = new KubeClient(await endpointConnection(api.url));
  });
  after(async () => {
    client.close();
    await api.close();
  });
  beforeEach(() => {
    for (const kind of ['Service', 'EndpointSlice', 'Pod']) {
      for (const name of [
        'kube-dns',
        'kube-dns-x7k2p',
        'coredns-5d78c9869d-0',
        'coredns-5d78c9869d-1',
        'coredns-5d78c9869d-2',
      ])
        api.remove(kind, 'kube-system', name);
    }
  });
  const check = async (nameservers = ['10.96.0.10']): Promise<Record<string, ClusterCheck>> =>
    Object.fromEntries((await checkClusterDns(client, nameservers, 2000)).map((c) => [c.step, c]));

  test('healthy: the Service ClusterIP is the nameserver, endpoints and pods are ready', async () => {
    applyHealthyDns(api);
    const c = await check();
    assert.deepEqual([c.service!.status, c.endpoints!.status, c.pods!.status], ['ok', 'ok', 'ok']);
    assert.match(c.service!.summary, /10\.96\.0\.10, the nameserver in resolv\.conf/);
    assert.match(c.endpoints!.summary, /2 of 2 endpoints ready/);
    assert.match(c.pods!.summary, /2 of 2 DNS pods ready/);
  });

  test('no kube-dns Service: the service step fails and the endpoints step is skipped', async () => {
    api.apply(kubeDnsPod(0, true));
    const c = await check();
    assert.equal(c.service!.status, 'fail');
    assert.match(c.service!.summary, /kube-system\/kube-dns not found/);
    assert.equal(c.endpoints!.status, 'skipped');
    assert.equal(c.pods!.status, 'ok');
  });

  test('a nameserver that is not the ClusterIP is a warning that names both', async () => {
    applyHealthyDns(api);
    const c = await check(['10.0.0.2']);
    assert.equal(c.service!.status, 'warn');
    assert.match(c.service!.summary, /10\.0\.0\.2 is not the kube-dns ClusterIP 10\.96\.0\.10/);
  });

  test('a node-local cache address (169.254.x) in resolv.conf is accepted', async () => {
    applyHealthyDns(api);
    const c = await check(['169.254.20.10']);
    assert.equal(c.service!.status, 'ok');
    assert.match(c.service!.summary, /node-local cache/);
  });

  test('endpoints not ready: the endpoints step fails; some ready is a warning', async () => {
    api.apply(kubeDnsService());
    api.apply(kubeDnsSlice([false, false]));
    let c = await check();
    assert.equal(c.endpoints!.status, 'fail');
    assert.match(c.endpoints!.summary, /0 of 2 endpoints ready/);
    api.apply(kubeDnsSlice([true, false]));
    c = await check();
    assert.equal(c.endpoints!.status, 'warn');
    assert.ok(c.endpoints!.details.some((d) => d.startsWith('not ready: 10.244.0.3')));
  });

  test('no EndpointSlice at all: the selector matches no pods', async () => {
    api.apply(kubeDnsService());
    const c = await check();
    assert.equal(c.endpoints!.status, 'fail');
    assert.match(c.endpoints!.summary, /no EndpointSlices/);
  });

  test('DNS pods crash-looping: the pods step fails and says why', async () => {
    api.apply(kubeDnsService());
    api.apply(kubeDnsSlice([false]));
    api.apply(kubeDnsPod(0, false, 'CrashLoopBackOff'));
    const c = await check();
    assert.equal(c.pods!.status, 'fail');
    assert.ok(c.pods!.details.some((d) => d.includes('CrashLoopBackOff') && d.includes('7 restarts')));
  });

  test('no DNS pods: the pods step fails', async () => {
    applyHealthyDns(api);
    api.remove('Pod', 'kube-system', 'coredns-5d78c9869d-0');
    api.remove('Pod', 'kube-system', 'coredns-5d78c9869d-1');
    assert.equal((await check()).pods!.status, 'fail');
  });

  test('an API error (403) is reported on the step, not as a broken cluster', async () => {
    applyHealthyDns(api);
    api.failNext(1, 403, undefined, (r) => r.path.endsWith('/pods'));
    const c = await check();
    assert.equal(c.pods!.status, 'error');
    assert.match(c.pods!.summary, /403.*RBAC/);
    assert.equal(c.service!.status, 'ok');
  });

  test('Services are listed across namespaces, page by page', async () => {
    for (let i = 0; i < 1200; i++) api.apply(appService(`svc-${i}`, `ns-${i % 7}`, `10.97.${i >> 8}.${i & 255}`));
    const { services } = await listServices(client, 5000);
    assert.ok(services.length >= 1200);
    assert.ok(api.requestLog.some((r) => r.path === '/api/v1/services' && r.query.continue));
  });
});
