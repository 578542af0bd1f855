// Answers that differed from CoreDNS 1.14.7's side by side, now the same (through dig).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, type RunningServer } from '../helpers/server.js';
import { dig } from '../helpers/dns.js';

const CLUSTER = `apiVersion: v1
kind: List
items:
  - { apiVersion: v1, kind: Namespace, metadata: { name: default } }
  - { apiVersion: v1, kind: Namespace, metadata: { name: prod } }
  - apiVersion: v1
    kind: Service
    metadata: { name: api, namespace: prod }
    spec: { clusterIP: 10.96.5.5, ports: [{ name: http, port: 80, protocol: TCP }] }
  - apiVersion: v1
    kind: Service
    metadata: { name: ext-internal, namespace: default }
    spec: { type: ExternalName, externalName: api.prod.svc.cluster.local }
  - apiVersion: v1
    kind: Service
    metadata: { name: outside, namespace: default }
    spec: { type: ExternalName, externalName: unreachable.example }
`;

describe('kubernetes answers as CoreDNS gives them', () => {
  let s: RunningServer;
  before(async () => {
    // No forward: a name outside cluster.local reaches the end of the chain (SERVFAIL).
    s = await startServer({
      corefile:
        '.:PORT {\n    kubernetes cluster.local {\n        manifests cluster.yaml\n        pods insecure\n    }\n}\n',
      files: { 'cluster.yaml': CLUSTER },
      probe: 'api.prod.svc.cluster.local.',
    });
  });
  after(async () => {
    await s.stop();
  });

  test('an in-zone CNAME target keeps its stored spelling when the question is spelt otherwise', async () => {
    const r = await dig(s.port, ['Ext-Internal.default.SVC.cluster.local', 'A']);
    assert.equal(r.status, 'NOERROR');
    assert.deepEqual(r.answer, [
      'Ext-Internal.default.SVC.cluster.local. 5 IN CNAME api.prod.svc.cluster.local.',
      'api.prod.svc.cluster.local. 5 IN A 10.96.5.5',
    ]);
  });

  test('an ExternalName whose target lookup fails still answers its CNAME', async () => {
    const r = await dig(s.port, ['outside.default.svc.cluster.local', 'A']);
    assert.equal(r.status, 'NOERROR');
    assert.deepEqual(r.answer, ['outside.default.svc.cluster.local. 5 IN CNAME unreachable.example.']);
    assert.deepEqual(r.authority, []);
  });

  test('a pod name asked for SRV answers 0 100 0 <name> with its A in ADDITIONAL', async () => {
    const r = await dig(s.port, ['10-244-1-10.default.pod.cluster.local', 'SRV']);
    assert.equal(r.status, 'NOERROR');
    assert.deepEqual(r.answer, [
      '10-244-1-10.default.pod.cluster.local. 5 IN SRV 0 100 0 10-244-1-10.default.pod.cluster.local.',
    ]);
    assert.deepEqual(r.additional, ['10-244-1-10.default.pod.cluster.local. 5 IN A 10.244.1.10']);
  });

  test('an IPv4-mapped pod name is its IPv4 address: A 10.0.0.1, no AAAA', async () => {
    const a = await dig(s.port, ['-q', '--ffff-a00-1.default.pod.cluster.local', '-t', 'A']);
    assert.deepEqual(a.answer, ['--ffff-a00-1.default.pod.cluster.local. 5 IN A 10.0.0.1']);
    const aaaa = await dig(s.port, ['-q', '--ffff-a00-1.default.pod.cluster.local', '-t', 'AAAA']);
    assert.equal(aaaa.status, 'NOERROR');
    assert.deepEqual(aaaa.answer, []);
  });
});
