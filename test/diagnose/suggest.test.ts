// "Did you mean backend.default?": names read in the pod's terms, ranked by edit distance.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { editDistance, parseServiceQuery, podContext, suggestServices } from '../../src/diagnose/suggest.js';
import type { ServiceRef } from '../../src/diagnose/cluster.js';

const POD = ['default.svc.cluster.local', 'svc.cluster.local', 'cluster.local'];
const svc = (name: string, namespace: string): ServiceRef => ({ name, namespace, clusterIP: '10.96.0.1' });
const SERVICES = [
  svc('backend', 'default'),
  svc('frontend', 'default'),
  svc('kubernetes', 'default'),
  svc('kube-dns', 'kube-system'),
  svc('payments', 'prod'),
  svc('db', 'prod'),
];

describe('suggestions', () => {
  test('edit distance counts insertions, deletions, substitutions and swapped neighbours as one edit each', () => {
    assert.equal(editDistance('backend', 'backend'), 0);
    assert.equal(editDistance('bakend', 'backend'), 1);
    assert.equal(editDistance('backedn', 'backend'), 1);
    assert.equal(editDistance('backend', 'frontend'), 5);
    assert.equal(editDistance('', 'abc'), 3);
  });

  test("the pod's namespace and cluster domain come from its search list", () => {
    assert.deepEqual(podContext(['prod.svc.k8s.example', 'svc.k8s.example', 'k8s.example']), {
      namespace: 'prod',
      clusterDomain: 'k8s.example',
    });
    assert.deepEqual(podContext([]), { namespace: 'default', clusterDomain: 'cluster.local' });
  });

  test('names are read as a pod reads them: svc, svc.ns, svc.ns.svc.cluster.local, host.svc.ns.svc...', () => {
    assert.deepEqual(parseServiceQuery('bakend', POD), {
      service: 'bakend',
      namespace: 'default',
      namespaceImplied: true,
      clusterDomain: 'cluster.local',
    });
    assert.equal(parseServiceQuery('payment.prod', POD)!.namespace, 'prod');
    assert.equal(parseServiceQuery('backend.default.svc.cluster.local.', POD)!.service, 'backend');
    assert.equal(parseServiceQuery('mysql-0.mysql.prod.svc.cluster.local', POD)!.service, 'mysql');
    assert.equal(parseServiceQuery('www.example.com', POD), null, 'three labels without .svc is not a Service name');
  });

  test('a typo in the name: the closest Service in the namespace is suggested', () => {
    const s = suggestServices(parseServiceQuery('bakend', POD)!, SERVICES);
    assert.equal(s[0]!.name, 'backend.default');
    assert.equal(s[0]!.fqdn, 'backend.default.svc.cluster.local');
    assert.equal(s[0]!.distance, 1);
  });

  test('the right name in the wrong namespace: the Service where it does exist comes first', () => {
    const s = suggestServices(parseServiceQuery('payments', POD)!, SERVICES);
    assert.equal(s[0]!.name, 'payments.prod');
    assert.match(s[0]!.why, /exists in namespace prod/);
  });

  test('a typo in the namespace is found too', () => {
    assert.equal(suggestServices(parseServiceQuery('payments.prd', POD)!, SERVICES)[0]!.name, 'payments.prod');
  });

  test('nothing close: no suggestion rather than a wild guess; at most three', () => {
    assert.deepEqual(suggestServices(parseServiceQuery('zzzzzz', POD)!, SERVICES), []);
    const many = Array.from({ length: 10 }, (_, i) => svc(`web${i}`, 'default'));
    assert.equal(suggestServices(parseServiceQuery('web', POD)!, many).length, 3);
  });
});
