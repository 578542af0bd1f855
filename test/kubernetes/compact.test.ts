// Records are kept for every object of the cluster, so they are kept small (objects.ts):
// identical port lists are one frozen array, arrays have no spare room, keys are flat, and
// a record that crossed a process boundary is made as compact as a projected one.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import {
  compactRecord,
  joinKey,
  projectEndpointSlice,
  projectPod,
  projectService,
  type ProjectionOptions,
} from '../../src/cluster/objects.js';
import { objectKey } from '../../src/kube/types.js';
import { pod, service, slice } from './fixtures.js';

const o: ProjectionOptions = { endpointPodNames: false, warn: () => {} };

describe('compact records', () => {
  test('Services and slices with the same ports share one frozen port list', () => {
    const a = projectService(service('shop', 'a', ['10.96.0.1'], [['http', 'TCP', 80]]), o)!;
    const b = projectService(service('bank', 'b', ['10.96.0.2'], [['http', 'TCP', 80]]), o)!;
    const c = projectService(service('bank', 'c', ['10.96.0.3'], [['http', 'TCP', 8080]]), o)!;
    const s = projectEndpointSlice(slice('shop', 'a-1', 'a', 'IPv4', [{ ip: '10.1.0.1' }], [['http', 'TCP', 80]]), o)!;
    assert.equal(a.ports, b.ports);
    assert.equal(a.ports, s.ports);
    assert.notEqual(a.ports, c.ports);
    assert.ok(Object.isFrozen(a.ports) && Object.isFrozen(a.ports[0]));
    assert.deepEqual(a.ports, [{ name: 'http', protocol: 'tcp', port: 80 }]);
    // Shared lists change nothing a reader can see, JSON included.
    assert.deepEqual(JSON.parse(JSON.stringify(a)), {
      name: 'a',
      namespace: 'shop',
      kind: 'ClusterIP',
      clusterIPs: ['10.96.0.1'],
      externalName: '',
      ports: [{ name: 'http', protocol: 'tcp', port: 80 }],
      selector: true,
    });
  });

  test('no ports, no endpoints and headless IPs are empty lists all the same', () => {
    const h = projectService(service('shop', 'h', 'None'), o)!;
    const e = projectEndpointSlice(slice('shop', 'h-1', 'h', 'IPv4', []), o)!;
    assert.deepEqual([h.clusterIPs, h.ports, e.ports, e.endpoints], [[], [], [], []]);
  });

  test("a record decoded from JSON (a worker's copy) gets the shared lists again", () => {
    const a = projectService(service('shop', 'a', ['10.96.0.1'], [['dns', 'UDP', 53]]), o)!;
    const copy = compactRecord('Service', JSON.parse(JSON.stringify(a)) as typeof a);
    assert.equal(copy.ports, a.ports);
    assert.deepEqual(copy, a);
    const s = projectEndpointSlice(slice('shop', 'a-1', 'a', 'IPv4', [{ ip: '10.1.0.1' }], [['dns', 'UDP', 53]]), o)!;
    const sCopy = compactRecord('EndpointSlice', JSON.parse(JSON.stringify(s)) as typeof s);
    assert.equal(sCopy.ports, a.ports);
    assert.deepEqual(sCopy, s);
    const p = projectPod(pod('shop', 'p', '10.1.0.1'), o)!;
    assert.deepEqual(compactRecord('Pod', JSON.parse(JSON.stringify(p)) as typeof p), p);
  });

  test('store keys are ns/name, or the name alone', () => {
    assert.equal(joinKey('shop', 'web'), 'shop/web');
    assert.equal(joinKey('', 'shop'), 'shop');
    assert.equal(objectKey({ metadata: { name: 'web', namespace: 'shop' } }), 'shop/web');
    assert.equal(objectKey({ metadata: { name: 'shop' } }), 'shop');
  });
});
