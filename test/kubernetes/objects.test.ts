// Projections: what is kept of each API object, and how broken objects are skipped or trimmed
// with a warning naming them, never a crash.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import {
  projectEndpointSlice,
  projectNamespace,
  projectPod,
  projectService,
  type ProjectionOptions,
} from '../../src/cluster/objects.js';
import { parseLabelSelector, SelectorError } from '../../src/cluster/selector.js';
import { pod, service, slice } from './fixtures.js';

function withWarnings(endpointPodNames = false): { o: ProjectionOptions; warnings: string[] } {
  const warnings: string[] = [];
  return { o: { endpointPodNames, warn: (what, why) => warnings.push(`${what}: ${why}`) }, warnings };
}

describe('kubernetes object projections', () => {
  test('a Service keeps only what DNS needs, as a plain JSON object', () => {
    const { o, warnings } = withWarnings();
    const obj = service(
      'shop',
      'web',
      ['10.96.0.1', 'FD00::0001'],
      [
        ['http', 'TCP', 80],
        ['', 'UDP', 53],
      ],
    );
    (obj.metadata as Record<string, unknown>).annotations = { big: 'x'.repeat(10000) };
    const rec = projectService(obj, o);
    assert.deepEqual(rec, {
      name: 'web',
      namespace: 'shop',
      kind: 'ClusterIP',
      clusterIPs: ['10.96.0.1', 'fd00::1'],
      externalName: '',
      ports: [
        { name: 'http', protocol: 'tcp', port: 80 },
        { name: '', protocol: 'udp', port: 53 },
      ],
      selector: true,
    });
    assert.deepEqual(JSON.parse(JSON.stringify(rec)), rec);
    assert.deepEqual(warnings, []);
  });

  test('headless and ExternalName services', () => {
    const { o } = withWarnings();
    assert.equal(projectService(service('a', 'h', 'None'), o)?.kind, 'Headless');
    const ext = projectService(
      {
        kind: 'Service',
        metadata: { name: 'e', namespace: 'a' },
        spec: { type: 'ExternalName', externalName: 'Example.COM' },
      },
      o,
    );
    assert.deepEqual([ext?.kind, ext?.externalName], ['ExternalName', 'Example.COM.']);
  });

  const broken: Array<[string, unknown, RegExp]> = [
    ['not an object', 'hello', /^Service <unnamed>: no metadata; skipped$/],
    ['no name', { metadata: { namespace: 'a' } }, /^Service a\/<unnamed>: no metadata\.name; skipped$/],
    [
      'no namespace',
      { metadata: { name: 'x' }, spec: { clusterIP: '10.0.0.1' } },
      /^Service <no namespace>\/x: no metadata\.namespace; skipped$/,
    ],
    [
      'namespace too long',
      { metadata: { name: 'x', namespace: 'n'.repeat(64) }, spec: { clusterIP: '10.0.0.1' } },
      /is not a DNS label of at most 63 characters; skipped/,
    ],
    [
      'name too long',
      { metadata: { name: 'x'.repeat(64), namespace: 'a' }, spec: { clusterIP: '10.0.0.1' } },
      /^Service a\/x{64}: its name is not a DNS label/,
    ],
    [
      'name not a label',
      { metadata: { name: 'Web_1', namespace: 'a' }, spec: { clusterIP: '10.0.0.1' } },
      /its name is not a DNS label/,
    ],
    [
      'no clusterIP',
      { metadata: { name: 'x', namespace: 'a' }, spec: {} },
      /^Service a\/x: no spec\.clusterIP; skipped$/,
    ],
    [
      'malformed clusterIP',
      { metadata: { name: 'x', namespace: 'a' }, spec: { clusterIP: '10.0.0.256' } },
      /clusterIP "10\.0\.0\.256" is not an IP address; skipped/,
    ],
    [
      'clusterIP of the wrong type',
      { metadata: { name: 'x', namespace: 'a' }, spec: { clusterIP: 42 } },
      /no spec\.clusterIP; skipped/,
    ],
    [
      'ExternalName without a target',
      { metadata: { name: 'x', namespace: 'a' }, spec: { type: 'ExternalName' } },
      /without spec\.externalName; skipped/,
    ],
  ];
  for (const [what, obj, message] of broken) {
    test(`a Service with ${what} is skipped with a warning naming it`, () => {
      const { o, warnings } = withWarnings();
      assert.equal(projectService(obj, o), null);
      assert.equal(warnings.length, 1);
      assert.match(warnings[0]!, message);
    });
  }

  test('bad ports and secondary IPs are dropped with a warning, the rest kept', () => {
    const { o, warnings } = withWarnings();
    const rec = projectService(
      {
        metadata: { name: 'x', namespace: 'a' },
        spec: {
          clusterIPs: ['10.0.0.1', 'nope'],
          ports: [
            { port: 0 },
            { port: 'http' },
            { name: 'Bad Name', port: 81 },
            { port: 82, protocol: 'ICMP' },
            'junk',
            { name: 'ok', port: 83 },
          ],
        },
      },
      o,
    );
    assert.deepEqual(rec?.clusterIPs, ['10.0.0.1']);
    assert.deepEqual(rec?.ports, [
      { name: '', protocol: 'tcp', port: 81 },
      { name: 'ok', protocol: 'tcp', port: 83 },
    ]);
    assert.equal(warnings.length, 6);
    assert.ok(warnings.every((w) => w.startsWith('Service a/x: ')));
  });

  test('an EndpointSlice keeps ready endpoints only (ready unset counts as ready)', () => {
    const { o } = withWarnings(true);
    const rec = projectEndpointSlice(
      slice(
        'a',
        's1',
        'web',
        'IPv4',
        [
          { ip: '10.0.0.1', ready: true, pod: 'web-0' },
          { ip: '10.0.0.2' },
          { ip: '10.0.0.3', ready: false },
          { ip: '10.0.0.4', hostname: 'h', pod: 'p'.repeat(70) },
        ],
        [['http', 'TCP', 80]],
      ),
      o,
    );
    assert.deepEqual(rec?.endpoints, [
      { ips: ['10.0.0.1'], hostname: '', podName: 'web-0' },
      { ips: ['10.0.0.2'], hostname: '', podName: '' },
      { ips: ['10.0.0.4'], hostname: 'h', podName: '' },
    ]);
    assert.equal(rec?.service, 'web');
    assert.deepEqual(
      projectEndpointSlice(slice('a', 's1', 'web', 'IPv4', [{ ip: '10.0.0.1', pod: 'web-0' }]), withWarnings(false).o)
        ?.endpoints[0]?.podName,
      '',
    );
  });

  test('an EndpointSlice without the service-name label is skipped; bad addresses are dropped', () => {
    const { o, warnings } = withWarnings();
    assert.equal(
      projectEndpointSlice({ metadata: { name: 's', namespace: 'a' }, addressType: 'IPv4', endpoints: [] }, o),
      null,
    );
    assert.match(warnings[0]!, /^EndpointSlice a\/s: no kubernetes\.io\/service-name label; skipped$/);
    const rec = projectEndpointSlice(
      slice('a', 's2', 'web', 'IPv4', [{ ip: ['10.0.0.1', 'fd00::1', '300.1.1.1'] }, { ip: 'x' }]),
      o,
    );
    assert.deepEqual(rec?.endpoints, [{ ips: ['10.0.0.1'], hostname: '', podName: '' }]);
    assert.equal(warnings.length, 4);
    const fqdn = projectEndpointSlice(
      { ...slice('a', 's3', 'web', 'IPv4', [{ ip: 'example.com' }]), addressType: 'FQDN' },
      o,
    );
    assert.deepEqual(fqdn?.endpoints, [], 'FQDN slices are kept empty, without a warning');
    assert.equal(warnings.length, 4);
  });

  test('namespaces and pods', () => {
    const { o, warnings } = withWarnings();
    assert.deepEqual(projectNamespace({ metadata: { name: 'kube-system' } }, o), { name: 'kube-system' });
    assert.deepEqual(projectPod(pod('a', 'p', '10.1.2.3'), o), { namespace: 'a', ip: '10.1.2.3' });
    assert.deepEqual(projectPod(pod('a', 'p', '10.1.2.3', 'Succeeded'), o), { namespace: 'a', ip: '' });
    assert.deepEqual(
      projectPod(
        {
          metadata: { name: 'p', namespace: 'a', deletionTimestamp: '2026-01-01T00:00:00Z' },
          status: { podIP: '10.1.1.1' },
        },
        o,
      ),
      { namespace: 'a', ip: '' },
    );
    assert.deepEqual(projectPod(pod('a', 'p', 'bogus'), o), { namespace: 'a', ip: '' });
    assert.match(warnings[0]!, /^Pod a\/p: status\.podIP "bogus" is not an IP address/);
  });
});

describe('label selectors', () => {
  test('equality, inequality, existence, in and notin', () => {
    const m = parseLabelSelector('environment in (staging, qa),app=nginx,!legacy,tier!=db,team');
    assert.equal(m({ environment: 'qa', app: 'nginx', team: 'x' }), true);
    assert.equal(m({ environment: 'prod', app: 'nginx', team: 'x' }), false);
    assert.equal(m({ environment: 'qa', app: 'nginx', team: 'x', legacy: 'y' }), false);
    assert.equal(m({ environment: 'qa', app: 'nginx', tier: 'db', team: 'x' }), false);
    assert.equal(m({ environment: 'qa', app: 'nginx' }), false);
    assert.equal(parseLabelSelector('')(undefined), true);
    assert.equal(parseLabelSelector('a notin (b)')(undefined), true);
  });

  test('a malformed selector is an error naming the bad part', () => {
    assert.throws(() => parseLabelSelector('a in (b'), SelectorError);
    assert.throws(() => parseLabelSelector('=x'), /cannot parse|invalid label key/);
    assert.throws(() => parseLabelSelector('a=b,,c=d'), /empty requirement/);
  });
});
