import { test } from 'node:test';
import assert from 'node:assert/strict';
import { endpointConnection } from '../../src/kube/connection.js';
import { resolveUpstreamService, serviceHostEnvName } from '../../src/nodecache/upstream.js';
import { KubeApiServer } from '../helpers/kubeapi.js';
import { service } from '../helpers/kubeapi-fixtures.js';

test('the Service env variable name: upper-cased, dashes to underscores, namespace dropped', () => {
  assert.equal(serviceHostEnvName('kube-dns-upstream'), 'KUBE_DNS_UPSTREAM_SERVICE_HOST');
  assert.equal(serviceHostEnvName('kube-dns'), 'KUBE_DNS_SERVICE_HOST');
  assert.equal(serviceHostEnvName('kube-system/kube-dns-upstream'), 'KUBE_DNS_UPSTREAM_SERVICE_HOST');
});

test('the env variable wins and must be an IP', async () => {
  const r = await resolveUpstreamService({
    service: 'kube-dns-upstream',
    env: { KUBE_DNS_UPSTREAM_SERVICE_HOST: '10.96.0.11' },
  });
  assert.deepEqual(r, { ip: '10.96.0.11', source: 'env KUBE_DNS_UPSTREAM_SERVICE_HOST' });
  await assert.rejects(
    resolveUpstreamService({ service: 'kube-dns-upstream', env: { KUBE_DNS_UPSTREAM_SERVICE_HOST: 'kube-dns' } }),
    /not an IP address/,
  );
});

test('without the env variable and without an API, the error says what to do', async () => {
  await assert.rejects(
    resolveUpstreamService({ service: 'kube-dns-upstream', env: {} }),
    /KUBE_DNS_UPSTREAM_SERVICE_HOST is not set .*create the Service kube-dns-upstream before the node-cache pods, or pass -kubeconfig/,
  );
});

test('without the env variable the Service is read from the API (kube-system by default, or NAMESPACE/NAME)', async () => {
  const api = await KubeApiServer.create();
  try {
    api.apply(service('kube-dns-upstream', '10.96.0.11', 'kube-system'));
    api.apply(service('dns-upstream', '10.100.0.53', 'dns'));
    api.apply(service('headless', 'None', 'kube-system'));
    const connection = await endpointConnection(api.url);
    const r = await resolveUpstreamService({ service: 'kube-dns-upstream', env: {}, connection });
    assert.equal(r.ip, '10.96.0.11');
    assert.match(r.source, /API kube-system\/kube-dns-upstream/);
    assert.equal(
      (await resolveUpstreamService({ service: 'dns/dns-upstream', env: {}, connection })).ip,
      '10.100.0.53',
    );
    await assert.rejects(
      resolveUpstreamService({ service: 'missing', env: {}, connection }),
      /Service kube-system\/missing could not be read/,
    );
    await assert.rejects(resolveUpstreamService({ service: 'headless', env: {}, connection }), /has no ClusterIP/);
  } finally {
    await api.close();
  }
});
