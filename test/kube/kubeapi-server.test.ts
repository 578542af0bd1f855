// The test API server itself, driven through KubeClient: it must behave like the real one
// where our client depends on it (writes, conflicts, selectors, pagination, watch semantics).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { endpointConnection } from '../../src/kube/connection.js';
import { KubeApiError, KubeClient } from '../../src/kube/http.js';
import { isList, isRecord, isWatchEvent, listMeta, objectMeta, type WatchEvent } from '../../src/kube/types.js';
import { KubeApiServer } from '../helpers/kubeapi.js';
import { service } from '../helpers/kubeapi-fixtures.js';

describe('test API server', () => {
  let server: KubeApiServer;
  let client: KubeClient;
  before(async () => {
    server = await KubeApiServer.create({ eventWindow: 50 });
    client = new KubeClient(await endpointConnection(server.url));
  });
  after(async () => {
    client.close();
    await server.close();
  });

  const names = (list: unknown) => (isList(list) ? list.items.map((i) => objectMeta(i)?.name) : []);
  const rejectsWith = (p: Promise<unknown>, status: number, reason?: string) =>
    assert.rejects(p, (e) => e instanceof KubeApiError && e.status === status && (!reason || e.reason === reason));

  /** Collect a watch's events until the server ends it (or `until` says stop). */
  async function watchEvents(
    path: string,
    query: Record<string, string | number>,
    until?: (evs: WatchEvent[]) => boolean,
  ): Promise<WatchEvent[]> {
    const events: WatchEvent[] = [];
    const ac = new AbortController();
    try {
      await client.streamLines(
        path,
        { watch: 1, ...query },
        {
          signal: ac.signal,
          idleTimeoutMs: 2000,
          onLine: (line) => {
            const ev: unknown = JSON.parse(line);
            assert.ok(isWatchEvent(ev), line);
            events.push(ev);
            if (until?.(events)) ac.abort(new Error('enough'));
          },
        },
      );
    } catch (err) {
      if (!(err instanceof Error && err.message === 'enough')) throw err;
    }
    return events;
  }

  it('creates, reads, updates with optimistic concurrency, patches and deletes', async () => {
    const created = await client.request(
      'POST',
      '/api/v1/namespaces/apps/services',
      service('api', '10.0.1.1', 'apps'),
    );
    const meta = objectMeta(created);
    assert.ok(meta?.uid && meta.resourceVersion);
    await rejectsWith(
      client.request('POST', '/api/v1/namespaces/apps/services', service('api', '10.0.1.1', 'apps')),
      409,
      'Conflict',
    );
    await rejectsWith(
      client.request('POST', '/api/v1/namespaces/other/services', service('x', '10.0.1.2', 'apps')),
      400,
      'BadRequest',
    );

    const got = await client.getJSON('/api/v1/namespaces/apps/services/api');
    assert.equal(objectMeta(got)?.resourceVersion, meta.resourceVersion);

    const stale = {
      ...service('api', '10.0.1.9', 'apps'),
      metadata: { name: 'api', namespace: 'apps', resourceVersion: '1' },
    };
    await rejectsWith(client.request('PUT', '/api/v1/namespaces/apps/services/api', stale), 409, 'Conflict');
    const fresh = { ...stale, metadata: { ...stale.metadata, resourceVersion: meta.resourceVersion } };
    const updated = await client.request('PUT', '/api/v1/namespaces/apps/services/api', fresh);
    assert.ok(Number(objectMeta(updated)?.resourceVersion) > Number(meta.resourceVersion));
    assert.equal(objectMeta(updated)?.uid, meta.uid);

    const patched = await client.request('PATCH', '/api/v1/namespaces/apps/services/api', {
      metadata: { labels: { tier: 'gold' } },
    });
    assert.deepEqual(objectMeta(patched)?.labels, { tier: 'gold' });
    assert.ok(isRecord(patched) && isRecord(patched.spec) && patched.spec.clusterIP === '10.0.1.9');

    const rvBefore = server.resourceVersion;
    await client.request('PATCH', '/api/v1/namespaces/apps/services/api', { metadata: { labels: { tier: 'gold' } } });
    assert.equal(server.resourceVersion, rvBefore, 'a no-op patch does not bump the resourceVersion');

    await client.request('DELETE', '/api/v1/namespaces/apps/services/api');
    await rejectsWith(client.getJSON('/api/v1/namespaces/apps/services/api'), 404, 'NotFound');
    await rejectsWith(client.getJSON('/api/v1/nonsense'), 404, 'NotFound');
  });

  it('serves the Deployment /scale subresource', async () => {
    server.apply({
      kind: 'Deployment',
      apiVersion: 'apps/v1',
      metadata: { name: 'coredns', namespace: 'kube-system' },
      spec: { replicas: 2, selector: { matchLabels: { 'k8s-app': 'kube-dns' } } },
    });
    const path = '/apis/apps/v1/namespaces/kube-system/deployments/coredns/scale';
    const scale = await client.getJSON(path);
    assert.ok(isRecord(scale) && scale.kind === 'Scale' && isRecord(scale.spec) && isRecord(scale.status));
    assert.equal(scale.spec.replicas, 2);
    assert.equal(scale.status.selector, 'k8s-app=kube-dns');
    await client.request('PUT', path, {
      kind: 'Scale',
      apiVersion: 'autoscaling/v1',
      metadata: { name: 'coredns', namespace: 'kube-system' },
      spec: { replicas: 5 },
    });
    const dep = server.get('Deployment', 'kube-system', 'coredns');
    assert.ok(dep && isRecord(dep.spec) && dep.spec.replicas === 5);
    await client.request('PATCH', path, { spec: { replicas: 3 } });
    const after = await client.getJSON(path);
    assert.ok(isRecord(after) && isRecord(after.spec) && after.spec.replicas === 3);
    await rejectsWith(client.request('PUT', path, { spec: { replicas: -1 } }), 422, 'Invalid');
  });

  it('filters by label (equality and set-based) and field selectors; rejects bad ones', async () => {
    server.apply(service('a', '10.0.2.1', 'sel', { app: 'dns', env: 'prod' }));
    server.apply(service('b', '10.0.2.2', 'sel', { app: 'dns', env: 'qa' }));
    server.apply(service('c', '10.0.2.3', 'sel', { app: 'web' }));
    const path = '/api/v1/namespaces/sel/services';
    assert.deepEqual(names(await client.getJSON(path, { labelSelector: 'app=dns,env!=qa' })), ['a']);
    assert.deepEqual(names(await client.getJSON(path, { labelSelector: 'env in (qa, staging)' })), ['b']);
    assert.deepEqual(names(await client.getJSON(path, { labelSelector: '!env' })), ['c']);
    assert.deepEqual(
      names(await client.getJSON('/api/v1/services', { fieldSelector: 'metadata.namespace=sel,metadata.name!=a' })),
      ['b', 'c'],
    );
    await rejectsWith(client.getJSON(path, { labelSelector: 'app in dns' }), 400);
    await rejectsWith(client.getJSON(path, { fieldSelector: 'spec.nonsense=1' }), 400);
  });

  it('pages with limit/continue; a compaction expires the continue token with 410', async () => {
    for (let i = 0; i < 5; i++)
      server.apply({ kind: 'ConfigMap', metadata: { name: `cm-${i}`, namespace: 'paging' }, data: {} });
    const path = '/api/v1/namespaces/paging/configmaps';
    const p1 = await client.getJSON(path, { limit: 2 });
    assert.ok(isList(p1));
    const m1 = listMeta(p1);
    assert.deepEqual(names(p1), ['cm-0', 'cm-1']);
    assert.equal(m1.remainingItemCount, 3);
    assert.ok(isRecord(p1.items[0]) && !('kind' in p1.items[0]), 'list items carry no kind, as in the real API');
    server.apply({ kind: 'ConfigMap', metadata: { name: 'cm-9', namespace: 'paging' }, data: {} });
    const p2 = await client.getJSON(path, { limit: 2, continue: m1.continue });
    assert.deepEqual(names(p2), ['cm-2', 'cm-3'], 'pages come from the first page’s snapshot');
    assert.ok(isList(p2));
    assert.equal(listMeta(p2).resourceVersion, m1.resourceVersion);
    server.compact();
    await rejectsWith(client.getJSON(path, { limit: 2, continue: listMeta(p2).continue }), 410, 'Expired');
  });

  it('watch: synthetic ADDED without a resourceVersion, replay from one, timeoutSeconds ends it cleanly', async () => {
    server.apply(service('w1', '10.0.3.1', 'watch'));
    const rv = server.resourceVersion;
    server.apply(service('w2', '10.0.3.2', 'watch'));
    server.remove('Service', 'watch', 'w1');
    const path = '/api/v1/namespaces/watch/services';
    const initial = await watchEvents(path, { timeoutSeconds: 1 }, (e) => e.length === 1);
    assert.deepEqual(
      initial.map((e) => [e.type, objectMeta(e.object)?.name]),
      [['ADDED', 'w2']],
    );
    const started = Date.now();
    const replay = await watchEvents(path, { resourceVersion: rv, timeoutSeconds: 1 });
    assert.ok(Date.now() - started >= 900, 'stream ended by timeoutSeconds');
    assert.deepEqual(
      replay.map((e) => [e.type, objectMeta(e.object)?.name]),
      [
        ['ADDED', 'w2'],
        ['DELETED', 'w1'],
      ],
    );
  });

  it('watch: an expired resourceVersion is 410, in-stream or as HTTP status', async () => {
    const old = server.resourceVersion;
    for (let i = 0; i < 60; i++)
      server.apply({ kind: 'ConfigMap', metadata: { name: 'churn', namespace: 'default' }, data: { i: String(i) } });
    const events = await watchEvents('/api/v1/configmaps', { resourceVersion: old });
    assert.equal(events.length, 1);
    assert.equal(events[0]?.type, 'ERROR');
    assert.ok(isRecord(events[0].object) && events[0].object.code === 410 && events[0].object.reason === 'Expired');
    server.expiredWatch = 'status';
    await rejectsWith(watchEvents('/api/v1/configmaps', { resourceVersion: old }), 410, 'Expired');
    server.expiredWatch = 'event';
    const fresh = await watchEvents('/api/v1/configmaps', {
      resourceVersion: server.resourceVersion - 10,
      timeoutSeconds: 1,
    });
    assert.equal(fresh.length, 10, 'inside the window, events replay');
  });

  it('requires the bearer token when one is configured', async () => {
    server.token = 't0k3n';
    try {
      await rejectsWith(client.getJSON('/api/v1/services'), 401, 'Unauthorized');
    } finally {
      server.token = undefined;
    }
    const version = await client.getJSON('/version');
    assert.ok(isRecord(version) && version.major === '1');
    const pkg = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as {
      version: string;
    };
    assert.equal(server.requestLog.at(-1)?.userAgent, `clusterdns/${pkg.version}`);
  });
});
