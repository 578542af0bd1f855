// The control loop against the test API server (real HTTP, list+watch, /scale): the ConfigMap
// is read each poll and re-created when missing, targets are written only when the count
// differs, bad params change nothing, and --max-sync-failures ends a failing streak.
import { after, before, beforeEach, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Autoscaler, type AutoscalerOptions } from '../../src/autoscale/autoscaler.js';
import { ParamsError, defaultParamsData } from '../../src/autoscale/params.js';
import { parseTargets } from '../../src/autoscale/target.js';
import { endpointConnection } from '../../src/kube/connection.js';
import { KubeClient } from '../../src/kube/http.js';
import type { Logger } from '../../src/log.js';
import { KubeApiServer } from '../helpers/kubeapi.js';
import { waitFor } from '../helpers/kubeapi-fixtures.js';
import { deploymentObject, nodeObject, replicasOf } from './fixtures.js';

const NS = 'kube-system';
const CM = 'clusterdns-autoscaler';
const DEFAULTS =
  '{"linear":{"coresPerReplica":256,"nodesPerReplica":16,"preventSinglePointFailure":true,"includeUnschedulableNodes":true}}';
const SCALE_PATH = `/apis/apps/v1/namespaces/${NS}/deployments/clusterdns/scale`;

interface Captured {
  log: Logger;
  lines: string[];
}

function captureLog(): Captured {
  const lines: string[] = [];
  const push = (level: string) => (m: string) => lines.push(`[${level}] ${m}`);
  return {
    lines,
    log: {
      debug: () => {},
      info: push('INFO'),
      warn: push('WARNING'),
      error: push('ERROR'),
      fatal: push('FATAL'),
      line: (t) => lines.push(t),
    },
  };
}

describe('autoscaler control loop', () => {
  let api: KubeApiServer;
  let client: KubeClient;
  const running: Autoscaler[] = [];

  before(async () => {
    api = await KubeApiServer.create();
    client = new KubeClient(await endpointConnection(api.url));
  });

  after(async () => {
    for (const a of running.splice(0)) await a.stop();
    client.close();
    await api.close();
  });

  beforeEach(async () => {
    for (const a of running.splice(0)) await a.stop();
    for (let i = 0; i < 200; i++) api.remove('Node', undefined, `node-${i}`);
    api.remove('ConfigMap', NS, CM);
    api.remove('Deployment', NS, 'clusterdns');
    api.apply(deploymentObject('clusterdns', NS, 1));
    api.requestLog.length = 0;
  });

  function autoscaler(extra: Partial<AutoscalerOptions> = {}): { a: Autoscaler; lines: string[] } {
    const { log, lines } = captureLog();
    const a = new Autoscaler({
      client,
      namespace: NS,
      configMap: CM,
      targets: parseTargets('deployment/clusterdns', NS),
      defaultParams: defaultParamsData(DEFAULTS),
      pollPeriodMs: 50,
      maxSyncFailures: 0,
      log,
      backoff: { initialMs: 20, maxMs: 100 },
      ...extra,
    });
    running.push(a);
    a.nodes.start();
    return { a, lines };
  }

  const addNodes = (from: number, to: number, cpu = '4', opts = {}) => {
    for (let i = from; i < to; i++) api.apply(nodeObject(`node-${i}`, cpu, opts));
  };
  const replicas = () => replicasOf(api.get('Deployment', NS, 'clusterdns'));
  const writes = (prefix: string) => api.requestLog.filter((r) => r.verb === 'write' && r.path.startsWith(prefix));

  test('a missing ConfigMap is created from the defaults, and the target is scaled to the expected count', async () => {
    addNodes(0, 17);
    const { a, lines } = autoscaler();
    const out = await a.pollOnce();
    assert.deepEqual(out.status, { totalNodes: 17, schedulableNodes: 17, totalCores: 68, schedulableCores: 68 });
    assert.equal(out.replicas, 2); // vector 7: 17 nodes, 68 cores
    assert.equal(replicas(), 2);
    assert.deepEqual(api.get('ConfigMap', NS, CM)?.data, {
      linear:
        '{"coresPerReplica":256,"includeUnschedulableNodes":true,"nodesPerReplica":16,"preventSinglePointFailure":true}',
    });
    assert.ok(
      lines.some((l) => l.includes(`created ConfigMap ${NS}/${CM}`)),
      lines.join('\n'),
    );
    assert.ok(
      lines.some((l) => l.includes('updating deployment/clusterdns in namespace kube-system from 1 to 2 replicas')),
      lines.join('\n'),
    );
  });

  test('the target is written only when the count differs, through /scale with its resourceVersion', async () => {
    addNodes(0, 3);
    const { a } = autoscaler();
    await a.pollOnce();
    const puts = writes(SCALE_PATH);
    assert.equal(puts.length, 1);
    assert.equal(puts[0]?.method, 'PUT');
    await a.pollOnce();
    await a.pollOnce();
    assert.equal(writes(SCALE_PATH).length, 1, 'no write when replicas already match');
    assert.equal(
      api.requestLog.filter((r) => r.path === SCALE_PATH && r.method === 'GET').length,
      3,
      'read every poll',
    );
    assert.equal(
      api.requestLog.filter((r) => r.path === `/api/v1/namespaces/${NS}/configmaps/${CM}` && r.method === 'GET').length,
      3,
      'ConfigMap read every poll',
    );
  });

  test('replicas follow nodes added and removed (seen through the node watch)', async () => {
    addNodes(0, 2);
    const { a } = autoscaler({ defaultParams: defaultParamsData('{"linear":{"nodesPerReplica":2}}') });
    assert.equal((await a.pollOnce()).replicas, 1);
    addNodes(2, 9);
    await waitFor(() => a.nodes.store.size === 9, '9 nodes in the store');
    assert.equal((await a.pollOnce()).replicas, 5);
    assert.equal(replicas(), 5);
    for (let i = 3; i < 9; i++) api.remove('Node', undefined, `node-${i}`);
    await waitFor(() => a.nodes.store.size === 3, '3 nodes in the store');
    await a.pollOnce();
    assert.equal(replicas(), 2);
  });

  test('only Ready, schedulable nodes count unless includeUnschedulableNodes', async () => {
    addNodes(0, 2);
    addNodes(2, 6, '4', { unschedulable: true });
    addNodes(6, 8, '4', { ready: false });
    const { a } = autoscaler({ defaultParams: defaultParamsData('{"linear":{"nodesPerReplica":1}}') });
    assert.equal((await a.pollOnce()).replicas, 2);
    api.apply({
      kind: 'ConfigMap',
      metadata: { name: CM, namespace: NS },
      data: { linear: '{"nodesPerReplica":1,"includeUnschedulableNodes":true}' },
    });
    assert.equal((await a.pollOnce()).replicas, 8, 'params re-read on the next poll');
  });

  test('--nodelabels limits the nodes that are listed and counted', async () => {
    addNodes(0, 3, '4', { labels: { pool: 'dns' } });
    addNodes(3, 10);
    const { a } = autoscaler({
      nodeLabels: 'pool=dns',
      defaultParams: defaultParamsData('{"linear":{"nodesPerReplica":1}}'),
    });
    assert.equal((await a.pollOnce()).status.totalNodes, 3);
    assert.equal(replicas(), 3);
    assert.ok(api.requestLog.some((r) => r.path === '/api/v1/nodes' && r.query.labelSelector === 'pool=dns'));
  });

  test('bad params are a logged error and change nothing', async () => {
    addNodes(0, 40);
    api.apply({ kind: 'ConfigMap', metadata: { name: CM, namespace: NS }, data: { linear: '{"nodesPerReplica":-1}' } });
    const { a, lines } = autoscaler();
    await assert.rejects(
      a.pollOnce(),
      (err: unknown) =>
        err instanceof ParamsError &&
        /ConfigMap kube-system\/clusterdns-autoscaler: error parsing linear params: invalid negative value for nodesPerReplica/.test(
          err.message,
        ),
    );
    api.apply({
      kind: 'ConfigMap',
      metadata: { name: CM, namespace: NS },
      data: { linear: '{"nodesPerReplica":1}', ladder: '{}' },
    });
    await assert.rejects(a.pollOnce(), /exactly one data key/);
    assert.equal(replicas(), 1);
    assert.equal(writes('/apis/').length, 0);
    // run() logs each failed poll and keeps going (max-sync-failures 0)
    const stop = new AbortController();
    const loop = a.run(stop.signal);
    await waitFor(
      () => lines.filter((l) => l.startsWith('[ERROR] poll failed, nothing changed: ConfigMap')).length >= 2,
      'two logged failures',
    );
    stop.abort();
    assert.equal(await loop, 'stopped');
    assert.equal(replicas(), 1);
    assert.equal(a.lastPoll?.ok, false);
  });

  test('a deleted ConfigMap is re-created from the defaults on the next poll', async () => {
    addNodes(0, 2);
    const { a } = autoscaler();
    await a.pollOnce();
    assert.ok(api.remove('ConfigMap', NS, CM));
    await a.pollOnce();
    assert.ok(api.get('ConfigMap', NS, CM), 're-created');
    assert.equal(writes(`/api/v1/namespaces/${NS}/configmaps`).filter((r) => r.method === 'POST').length, 2);
  });

  test('without defaults a missing ConfigMap fails the poll', async () => {
    addNodes(0, 2);
    const { a } = autoscaler({ defaultParams: undefined });
    await assert.rejects(
      a.pollOnce(),
      /ConfigMap kube-system\/clusterdns-autoscaler not found and no --default-params/,
    );
    assert.equal(api.get('ConfigMap', NS, CM), undefined);
  });

  test('a missing target fails the poll', async () => {
    addNodes(0, 2);
    api.remove('Deployment', NS, 'clusterdns');
    const { a } = autoscaler();
    await assert.rejects(a.pollOnce(), /deployments\/clusterdns\/scale: HTTP 404/);
  });

  test('--max-sync-failures: the loop ends after that many consecutive failures, and a success resets the count', async () => {
    addNodes(0, 2);
    const { a, lines } = autoscaler({ maxSyncFailures: 3 });
    api.failNext(2, 500, undefined, `/api/v1/namespaces/${NS}/configmaps`);
    const first = a.run(new AbortController().signal);
    await waitFor(() => a.lastPoll?.ok === true, 'a good poll after two failures');
    assert.equal(a.consecutiveFailures, 0);
    api.failNext(100, 503, undefined, `/api/v1/namespaces/${NS}/configmaps`);
    assert.equal(await first, 'too-many-failures');
    api.clearFailures();
    assert.equal(a.consecutiveFailures, 3);
    assert.ok(
      lines.some((l) => l.includes('(3/3 consecutive)')),
      lines.join('\n'),
    );
  });

  test('a poll before the first node list fails after the sync wait instead of scaling on zero nodes', async () => {
    api.failNext(1000, 503, undefined, '/api/v1/nodes');
    const { a } = autoscaler({ nodeSyncWaitMs: 200 });
    await assert.rejects(a.pollOnce(), /nodes not listed yet: \/api\/v1\/nodes: HTTP 503/);
    assert.equal(replicas(), 1);
    api.clearFailures();
  });
});
