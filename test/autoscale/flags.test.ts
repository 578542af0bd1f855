// cluster-proportional-autoscaler's flags as its manifests spell them, and --target parsing.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { FlagError, parseAutoscaleFlags } from '../../src/autoscale/flags.js';
import { parseTargets, scalePath, TargetError } from '../../src/autoscale/target.js';

const ADDON_ARGS = [
  '--configmap=kube-dns-autoscaler',
  '--target=Deployment/coredns',
  '--default-params={"linear":{"coresPerReplica":256,"nodesPerReplica":16,"preventSinglePointFailure":true,"includeUnschedulableNodes":true}}',
  '--logtostderr=true',
  '--v=2',
];

describe('flags', () => {
  test('the kube-dns addon’s own command line is accepted; glog flags are ignored and noted', () => {
    const f = parseAutoscaleFlags(ADDON_ARGS, { MY_POD_NAMESPACE: 'kube-system' });
    assert.equal(f.targetSpec, 'Deployment/coredns');
    assert.equal(f.configMap, 'kube-dns-autoscaler');
    assert.equal(f.namespace, 'kube-system', 'namespace from $MY_POD_NAMESPACE');
    assert.equal(f.pollPeriodSeconds, 10);
    assert.equal(f.maxSyncFailures, 0);
    assert.equal(f.healthPort, 8080);
    assert.deepEqual(f.defaultParams, {
      linear:
        '{"coresPerReplica":256,"includeUnschedulableNodes":true,"nodesPerReplica":16,"preventSinglePointFailure":true}',
    });
    assert.deepEqual(f.ignored, ['--logtostderr=true', '--v=2']);
  });

  test('--name value, --name=value and -name=value forms all work', () => {
    const f = parseAutoscaleFlags(
      [
        '--target',
        'deployment/a',
        '-configmap=cm',
        '--namespace',
        'ns',
        '--poll-period-seconds',
        '1',
        '--max-sync-failures=3',
        '--nodelabels',
        'pool=dns,zone=a',
        '--logtostderr',
        '--v',
        '4',
        '--log_dir=/tmp',
      ],
      {},
    );
    assert.equal(f.targetSpec, 'deployment/a');
    assert.equal(f.configMap, 'cm');
    assert.equal(f.namespace, 'ns');
    assert.equal(f.pollPeriodSeconds, 1);
    assert.equal(f.maxSyncFailures, 3);
    assert.equal(f.nodeLabels, 'pool=dns,zone=a');
    assert.deepEqual(f.ignored, ['--logtostderr=true', '--v=4', '--log-dir=/tmp']);
  });

  test('--namespace wins over $MY_POD_NAMESPACE', () => {
    assert.equal(
      parseAutoscaleFlags(['--target=deployment/a', '--configmap=c', '--namespace=x'], { MY_POD_NAMESPACE: 'y' })
        .namespace,
      'x',
    );
  });

  test('every problem is reported at once, each naming its flag', () => {
    assert.throws(
      () => parseAutoscaleFlags(['--target=daemonset/x', '--default-params={"linear":{"min":-1}}'], {}),
      (err: unknown) => {
        assert.ok(err instanceof FlagError);
        assert.match(err.message, /--target "daemonset\/x": unsupported kind "daemonset"/);
        assert.match(err.message, /--configmap is required/);
        assert.match(err.message, /--default-params: error parsing linear params: invalid negative value for min/);
        return true;
      },
    );
  });

  test('bad numbers, unknown flags and stray arguments are errors', () => {
    const base = ['--target=deployment/a', '--configmap=c'];
    assert.throws(
      () => parseAutoscaleFlags([...base, '--poll-period-seconds=0'], {}),
      /--poll-period-seconds cannot be less than 1/,
    );
    assert.throws(
      () => parseAutoscaleFlags([...base, '--poll-period-seconds=ten'], {}),
      /invalid argument "ten" for --poll-period-seconds/,
    );
    assert.throws(
      () => parseAutoscaleFlags([...base, '--max-sync-failures=-1'], {}),
      /--max-sync-failures cannot be less than 0/,
    );
    assert.throws(() => parseAutoscaleFlags([...base, '--bogus=1'], {}), /unknown flag: --bogus/);
    assert.throws(() => parseAutoscaleFlags([...base, 'extra'], {}), /unexpected argument "extra"/);
    assert.throws(() => parseAutoscaleFlags([...base, '--namespace'], {}), /flag needs an argument: --namespace/);
    assert.throws(
      () => parseAutoscaleFlags([...base, '--default-params={"linear":'], {}),
      /--default-params: not JSON/,
    );
    assert.throws(
      () => parseAutoscaleFlags([...base, '--nodelabels=pool'], {}),
      /--nodelabels: "pool" is not key=value/,
    );
    assert.throws(() => parseAutoscaleFlags([...base, '--logtostderr=maybe'], {}), /must be true or false/);
  });

  test('--version and --help need no other flag', () => {
    assert.equal(parseAutoscaleFlags(['--version'], {}).version, true);
    assert.equal(parseAutoscaleFlags(['-h'], {}).help, true);
  });
});

describe('--target', () => {
  test('kinds are case-insensitive, singular or plural, optionally with their API group; lists are comma-separated', () => {
    assert.deepEqual(
      parseTargets('Deployment/coredns,statefulsets.apps/web, ReplicationController/old,replicaset/rs', 'ns'),
      [
        { kind: 'deployment', name: 'coredns', namespace: 'ns' },
        { kind: 'statefulset', name: 'web', namespace: 'ns' },
        { kind: 'replicationcontroller', name: 'old', namespace: 'ns' },
        { kind: 'replicaset', name: 'rs', namespace: 'ns' },
      ],
    );
  });

  test('each kind is scaled through its own /scale subresource', () => {
    const paths = parseTargets('deployment/a,replicaset/b,statefulset/c,replicationcontroller/d', 'kube-system').map(
      scalePath,
    );
    assert.deepEqual(paths, [
      '/apis/apps/v1/namespaces/kube-system/deployments/a/scale',
      '/apis/apps/v1/namespaces/kube-system/replicasets/b/scale',
      '/apis/apps/v1/namespaces/kube-system/statefulsets/c/scale',
      '/api/v1/namespaces/kube-system/replicationcontrollers/d/scale',
    ]);
  });

  test('malformed targets are errors that say the expected form', () => {
    for (const [spec, re] of [
      ['', /--target is required/],
      ['coredns', /must be KIND\/NAME/],
      ['deployment/a/b', /must be KIND\/NAME/],
      ['pod/x', /unsupported kind "pod"/],
      ['deployment/', /"" is not a valid object name/],
      ['deployment/under_score', /not a valid object name/],
    ] as const) {
      assert.throws(
        () => parseTargets(spec, 'ns'),
        (e: unknown) => e instanceof TargetError && re.test(e.message),
        spec,
      );
    }
  });
});
