// `clusterdns autoscale` as a user runs it: the real binary, a generated kubeconfig (TLS with
// the test CA, bearer token) pointing at the test API server, a 1 s poll period. Nodes come and
// go and the Deployment's replicas follow; a deleted ConfigMap comes back; a bad one changes
// nothing; --max-sync-failures exits 1; SIGTERM exits 0.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BIN } from '../helpers/server.js';
import { KubeApiServer } from '../helpers/kubeapi.js';
import { freePort } from '../helpers/ports.js';
import { deploymentObject, nodeObject, replicasOf } from '../autoscale/fixtures.js';

const NS = 'kube-system';
const CM = 'clusterdns-autoscaler';
const TOKEN = 'autoscaler-e2e-token';
const PARAMS =
  '{"linear":{"coresPerReplica":256,"nodesPerReplica":2,"preventSinglePointFailure":true,"includeUnschedulableNodes":true}}';

interface Running {
  proc: ChildProcess;
  output: () => string;
  exit: Promise<number | null>;
}

function start(args: string[]): Running {
  const proc = spawn(process.execPath, [BIN, 'autoscale', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, MY_POD_NAMESPACE: '' },
  });
  let out = '';
  proc.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  proc.stderr?.on('data', (d: Buffer) => (out += d.toString()));
  const exit = new Promise<number | null>((r) => proc.on('exit', (code) => r(code)));
  return { proc, output: () => out, exit };
}

async function eventually(
  what: string,
  cond: () => boolean | Promise<boolean>,
  timeoutMs = 6000,
  out?: () => string,
): Promise<void> {
  const startAt = Date.now();
  while (!(await cond())) {
    if (Date.now() - startAt > timeoutMs)
      assert.fail(`not within ${timeoutMs} ms: ${what}${out ? `\n--- output ---\n${out()}` : ''}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function httpGet(port: number, path: string): Promise<{ status: number; body: string }> {
  const res = await fetch(`http://127.0.0.1:${port}${path}`);
  return { status: res.status, body: await res.text() };
}

describe('clusterdns autoscale (real binary against the test API server)', () => {
  let api: KubeApiServer;
  let dir: string;
  let kubeconfig: string;

  before(async () => {
    api = await KubeApiServer.create({ tls: true, token: TOKEN });
    dir = mkdtempSync(join(tmpdir(), 'clusterdns-autoscale-'));
    kubeconfig = join(dir, 'kubeconfig');
    writeFileSync(
      kubeconfig,
      [
        'apiVersion: v1',
        'kind: Config',
        'current-context: test',
        'clusters:',
        '- name: test',
        '  cluster:',
        `    server: ${api.url}`,
        `    certificate-authority-data: ${api.pki?.ca.toString('base64')}`,
        'users:',
        '- name: autoscaler',
        '  user:',
        `    token: ${TOKEN}`,
        'contexts:',
        '- name: test',
        '  context: {cluster: test, user: autoscaler}',
        '',
      ].join('\n'),
    );
  });

  after(async () => {
    await api.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const replicas = () => replicasOf(api.get('Deployment', NS, 'clusterdns'));
  const setNodes = (n: number) => {
    for (let i = 0; i < 50; i++) {
      if (i < n) {
        if (!api.get('Node', undefined, `node-${i}`)) api.apply(nodeObject(`node-${i}`, '4'));
      } else api.remove('Node', undefined, `node-${i}`);
    }
  };

  test('replicas follow the nodes; the ConfigMap is re-created when deleted; a bad ConfigMap changes nothing', async () => {
    api.apply(deploymentObject('clusterdns', NS, 1));
    setNodes(2);
    const healthPort = await freePort();
    const a = start([
      '--target=deployment/clusterdns',
      '--namespace',
      NS,
      '--configmap',
      CM,
      '--default-params',
      PARAMS,
      '--poll-period-seconds=1',
      '--kubeconfig',
      kubeconfig,
      '--health-port',
      String(healthPort),
      '--logtostderr',
      '--v=2',
    ]);
    try {
      await eventually(
        'ConfigMap created from the defaults',
        () => api.get('ConfigMap', NS, CM) !== undefined,
        6000,
        a.output,
      );
      assert.deepEqual(api.get('ConfigMap', NS, CM)?.data, {
        linear:
          '{"coresPerReplica":256,"includeUnschedulableNodes":true,"nodesPerReplica":2,"preventSinglePointFailure":true}',
      });
      await eventually('2 nodes → 2 replicas (preventSinglePointFailure)', () => replicas() === 2, 6000, a.output);
      assert.match(a.output(), /ignoring --v=2 \(a glog flag/);

      setNodes(10);
      await eventually('10 nodes → 5 replicas', () => replicas() === 5, 6000, a.output);
      setNodes(1);
      await eventually('1 node → 1 replica', () => replicas() === 1, 6000, a.output);
      // The scale request can land before the log line reaches our pipe.
      await eventually(
        'the update is logged',
        () => /updating deployment\/clusterdns in namespace kube-system from 5 to 1 replicas/.test(a.output()),
        3000,
        a.output,
      );

      assert.ok(api.remove('ConfigMap', NS, CM));
      await eventually(
        'ConfigMap re-created after deletion',
        () => api.get('ConfigMap', NS, CM) !== undefined,
        6000,
        a.output,
      );

      const health = await httpGet(healthPort, '/healthz');
      assert.equal(health.status, 200);
      assert.equal((await httpGet(healthPort, '/last-poll')).status, 200);

      api.apply({
        kind: 'ConfigMap',
        metadata: { name: CM, namespace: NS },
        data: { linear: '{"nodesPerReplica":0,"coresPerReplica":0}' },
      });
      setNodes(8);
      await eventually(
        'the bad ConfigMap is reported',
        () =>
          /poll failed, nothing changed: ConfigMap kube-system\/clusterdns-autoscaler: error parsing linear params/.test(
            a.output(),
          ),
        6000,
        a.output,
      );
      const lastPoll = await httpGet(healthPort, '/last-poll');
      assert.equal(lastPoll.status, 500);
      assert.match(lastPoll.body, /either coresPerReplica or nodesPerReplica/);
      const failuresBefore = (a.output().match(/poll failed/g) ?? []).length;
      await eventually(
        'another poll fails',
        () => (a.output().match(/poll failed/g) ?? []).length > failuresBefore,
        4000,
        a.output,
      );
      assert.equal(replicas(), 1, 'no change while the params are bad');

      api.apply({
        kind: 'ConfigMap',
        metadata: { name: CM, namespace: NS },
        data: { linear: '{"nodesPerReplica":2}' },
      });
      await eventually('fixed ConfigMap → 8 nodes → 4 replicas', () => replicas() === 4, 6000, a.output);
      await eventually(
        '/last-poll recovers',
        async () => (await httpGet(healthPort, '/last-poll')).status === 200,
        4000,
        a.output,
      );
    } finally {
      a.proc.kill('SIGTERM');
    }
    assert.equal(await a.exit, 0, a.output());
    assert.match(a.output(), /autoscale: stopped/);
  });

  test('--max-sync-failures: exits 1 after that many consecutive failed polls', async () => {
    api.apply({ kind: 'ConfigMap', metadata: { name: 'broken', namespace: NS }, data: { linear: 'not json' } });
    const startedAt = Date.now();
    const a = start([
      '--target=deployment/clusterdns',
      `--namespace=${NS}`,
      '--configmap=broken',
      '--poll-period-seconds=1',
      '--max-sync-failures=2',
      `--kubeconfig=${kubeconfig}`,
      '--health-port=0',
    ]);
    const code = await Promise.race([a.exit, new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), 8000))]);
    if (code === 'timeout') a.proc.kill('SIGKILL');
    assert.equal(code, 1, a.output());
    assert.ok(Date.now() - startedAt < 8000);
    assert.match(a.output(), /\(2\/2 consecutive\)/);
    assert.match(a.output(), /2 consecutive polls failed \(--max-sync-failures\); exiting/);
  });

  test('against a dead API, --poll-period-seconds=1 fails a poll every second, so --max-sync-failures=3 ends after about 3 s', async () => {
    const deadConfig = join(dir, 'dead-kubeconfig');
    const port = await freePort();
    writeFileSync(
      deadConfig,
      [
        'apiVersion: v1',
        'kind: Config',
        'current-context: dead',
        'clusters:',
        '- name: dead',
        '  cluster:',
        `    server: http://127.0.0.1:${port}`,
        'users:',
        '- name: u',
        '  user: {}',
        'contexts:',
        '- name: dead',
        '  context: {cluster: dead, user: u}',
        '',
      ].join('\n'),
    );
    const a = start([
      '--target=deployment/clusterdns',
      `--namespace=${NS}`,
      `--configmap=${CM}`,
      '--poll-period-seconds=1',
      '--max-sync-failures=3',
      `--kubeconfig=${deadConfig}`,
      '--health-port=0',
    ]);
    let firstFailure = 0;
    await eventually(
      'the first failed poll',
      () => {
        if (/poll failed/.test(a.output())) firstFailure ||= Date.now();
        return firstFailure > 0;
      },
      15_000,
      a.output,
    );
    const code = await Promise.race([a.exit, new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), 20_000))]);
    if (code === 'timeout') a.proc.kill('SIGKILL');
    const tookMs = Date.now() - firstFailure;
    assert.equal(code, 1, a.output());
    assert.match(a.output(), /\(3\/3 consecutive\): nodes not listed yet/);
    // Two more periods after the first failure (CPA's 5 s wait per poll would make it 10 s).
    assert.ok(tookMs < 6000, `the 2nd and 3rd failures took ${tookMs} ms\n${a.output()}`);
  });

  test('bad flags exit 2 with the usage', async () => {
    const a = start(['--target=pod/x', '--configmap=c', '--namespace=n']);
    assert.equal(await a.exit, 2);
    assert.match(a.output(), /unsupported kind "pod"/);
    assert.match(a.output(), /Usage: clusterdns autoscale/);
  });
});
