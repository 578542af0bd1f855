// `kubernetes [ZONES] { ... }`: every option, CoreDNS's defaults, and the config errors.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CorefileError } from '../../src/corefile/errors.js';
import { parseCorefile } from '../../src/corefile/parser.js';
import { setup } from '../../src/plugins/kubernetes/setup.js';
import { fakeContext, optionsFrom } from './harness.js';

const dir = mkdtempSync(join(tmpdir(), 'clusterdns-k8s-setup-'));
for (const f of ['kubeconfig', 'cert.pem', 'key.pem', 'ca.pem', 'cluster.yaml']) writeFileSync(join(dir, f), '');
const ctx = (zones = ['.']) => fakeContext(zones, join(dir, 'Corefile'));

function parseError(directive: string): string {
  try {
    optionsFrom(directive, ctx());
  } catch (e) {
    assert.ok(e instanceof CorefileError, `expected a CorefileError, got ${String(e)}`);
    return e.message;
  }
  assert.fail(`"${directive}" was accepted`);
}

describe('kubernetes options', () => {
  test("defaults are CoreDNS's: block zones, in-cluster, ttl 5, startup_timeout 5s, pods disabled", () => {
    const o = optionsFrom('kubernetes', ctx(['cluster.local.', 'in-addr.arpa.']));
    assert.deepEqual(o.zones, ['cluster.local.', 'in-addr.arpa.']);
    assert.equal(o.primaryZone, 'cluster.local.');
    assert.deepEqual(o.source, { kind: 'in-cluster' });
    assert.equal(o.ttl, 5);
    assert.equal(o.startupTimeoutMs, 5000);
    assert.equal(o.pods, 'disabled');
    assert.equal(o.fallthrough, null);
    assert.equal(o.noEndpoints, false);
    assert.equal(o.ignoreEmptyService, false);
    assert.equal(o.endpointPodNames, false);
    assert.equal(o.namespaces.size, 0);
  });

  test('zones may be CIDRs, split on octet boundaries; the first forward zone is the primary one', () => {
    const o = optionsFrom('kubernetes in-addr.arpa Cluster.Local 10.96.0.0/17 fd00::/64', ctx());
    assert.equal(o.primaryZone, 'cluster.local.');
    assert.equal(o.zones.length, 1 + 1 + 128 + 1);
    assert.ok(o.zones.includes('0.96.10.in-addr.arpa.') && o.zones.includes('127.96.10.in-addr.arpa.'));
    assert.ok(o.zones.includes('0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa.'));
  });

  test('every option of the block is read', () => {
    const o = optionsFrom(
      `kubernetes cluster.local in-addr.arpa {
    endpoint https://10.0.0.1:6443
    tls cert.pem key.pem ca.pem
    namespaces kube-system Default
    labels environment in (staging, qa),app=nginx
    pods verified
    endpoint_pod_names
    ttl 30
    noendpoints
    fallthrough in-addr.arpa ip6.arpa
    ignore empty_service
    startup_timeout 1m30s
    apiserver_qps 10
    apiserver_burst 20
    apiserver_max_inflight 0
}`,
      ctx(),
    );
    assert.deepEqual(o.source, {
      kind: 'endpoint',
      url: 'https://10.0.0.1:6443',
      tls: { cert: join(dir, 'cert.pem'), key: join(dir, 'key.pem'), ca: join(dir, 'ca.pem') },
    });
    assert.deepEqual([...o.namespaces], ['kube-system', 'default']);
    assert.equal(o.labels, 'environment in (staging, qa),app=nginx');
    assert.equal(o.pods, 'verified');
    assert.equal(o.endpointPodNames, true);
    assert.equal(o.ttl, 30);
    assert.equal(o.noEndpoints, true);
    assert.deepEqual(o.fallthrough, ['in-addr.arpa.', 'ip6.arpa.']);
    assert.equal(o.ignoreEmptyService, true);
    assert.equal(o.startupTimeoutMs, 90_000);
  });

  test('kubeconfig FILE [CONTEXT] takes precedence over endpoint; manifests PATH needs no API', () => {
    const k = optionsFrom(
      'kubernetes cluster.local {\n endpoint http://127.0.0.1:1\n kubeconfig kubeconfig prod\n}',
      ctx(),
    );
    assert.deepEqual(k.source, { kind: 'kubeconfig', file: join(dir, 'kubeconfig'), context: 'prod' });
    const m = optionsFrom('kubernetes cluster.local {\n manifests cluster.yaml\n namespace_labels team=web\n}', ctx());
    assert.deepEqual(m.source, { kind: 'manifests', path: join(dir, 'cluster.yaml') });
    assert.equal(m.namespaceLabels, 'team=web');
    assert.equal(optionsFrom('kubernetes cluster.local {\n fallthrough\n}', ctx()).fallthrough?.[0], '.');
  });

  const errors: Array<[string, RegExp]> = [
    [
      'kubernetes cluster.local {\n upstream 8.8.8.8\n}',
      /Corefile:3 - Error during parsing: kubernetes: 'upstream' was removed in CoreDNS 1\.7\.0/,
    ],
    [
      'kubernetes cluster.local {\n resyncperiod 30s\n}',
      /Corefile:3 - .*'resyncperiod' was removed in CoreDNS 1\.7\.0/,
    ],
    [
      'kubernetes cluster.local {\n transfer to *\n}',
      /Corefile:3 - .*'transfer' was removed in CoreDNS 1\.8\.0: use the transfer plugin/,
    ],
    [
      'kubernetes cluster.local {\n\n frobnicate 1\n}',
      /Corefile:4 - Error during parsing: kubernetes: unknown property 'frobnicate'/,
    ],
    [
      'kubernetes cluster.local {\n multicluster clusterset.local\n}',
      /Corefile:3 - .*'multicluster' .* is not supported by clusterdns/,
    ],
    ['kubernetes cluster.local {\n ttl 3601\n}', /Corefile:3 - .*ttl: 3601 is out of range \[0, 3600\]/],
    ['kubernetes cluster.local {\n ttl -1\n}', /out of range/],
    ['kubernetes cluster.local {\n ttl five\n}', /"five" is not a number/],
    ['kubernetes cluster.local {\n pods maybe\n}', /pods: "maybe" is not disabled, insecure or verified/],
    ['kubernetes cluster.local {\n namespaces\n}', /namespaces: expected NAMESPACE\.\.\./],
    [
      'kubernetes cluster.local {\n namespaces a\n namespace_labels b=c\n}',
      /Corefile:4 - .*namespaces and namespace_labels cannot both be set/,
    ],
    ['kubernetes cluster.local {\n labels a in (b\n}', /labels: cannot parse "a in \(b"/],
    ['kubernetes cluster.local {\n labels =x\n}', /labels: /],
    ['kubernetes cluster.local {\n tls a b\n}', /tls: expected CERT KEY CACERT/],
    [
      'kubernetes cluster.local {\n tls cert.pem key.pem missing.pem\n}',
      /tls: \S+missing\.pem: no such file or directory/,
    ],
    ['kubernetes cluster.local {\n kubeconfig a b c\n}', /kubeconfig: expected FILE \[CONTEXT\]/],
    ['kubernetes cluster.local {\n endpoint ftp://x\n}', /endpoint: "ftp:\/\/x" is not an http\(s\) URL/],
    [
      'kubernetes cluster.local {\n manifests cluster.yaml\n endpoint http://127.0.0.1:1\n}',
      /Corefile:4 - .*endpoint cannot be used with manifests/,
    ],
    ['kubernetes cluster.local {\n ignore everything\n}', /ignore: expected empty_service/],
    ['kubernetes cluster.local {\n startup_timeout soon\n}', /startup_timeout: invalid duration "soon"/],
    ['kubernetes cluster.local {\n noendpoints please\n}', /noendpoints: expected no arguments/],
    ['kubernetes in-addr.arpa 10.0.0.0/8', /non-reverse zone name must be used/],
    ['kubernetes cluster.local 10.0.0.0/33', /"10\.0\.0\.0\/33" is not a zone or CIDR/],
    [
      'kubernetes cluster.local\nkubernetes other.local',
      /Corefile:3 - .*plugin 'kubernetes' can only be used once per Server Block/,
    ],
  ];
  for (const [directive, message] of errors) {
    test(`config error: ${directive.replace(/\n/g, ' ').replace(/\s+/g, ' ')}`, () => {
      if (directive.includes('\nkubernetes other')) {
        // Two directives: goes through the plugin's setup, which enforces once-per-block.
        assert.throws(() => setupTwice(directive), message);
        return;
      }
      assert.match(parseError(directive), message);
    });
  }
});

function setupTwice(text: string): void {
  const c = ctx();
  const blocks = parseCorefile(`. {\n${text}\n}\n`, c.corefile);
  setup(
    blocks[0]!.directives.filter((d) => d.name === 'kubernetes'),
    c,
  );
}
