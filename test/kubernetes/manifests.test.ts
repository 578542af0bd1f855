// The manifests source in-process: the events it sends as files change, exactly what an API
// watch would send (upserts for new and changed objects, deletes for vanished ones).
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync, mkdirSync, renameSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setLogSink, logger } from '../../src/log.js';
import type { ClusterEvent } from '../../src/cluster/events.js';
import { ManifestError, ManifestSource } from '../../src/cluster/manifests.js';
import { parseLabelSelector } from '../../src/cluster/selector.js';

function source(path: string, pollMs = 0): { src: ManifestSource; events: ClusterEvent[]; warnings: string[] } {
  const warnings: string[] = [];
  const src = new ManifestSource({
    path,
    pollMs,
    labels: parseLabelSelector(''),
    namespaceLabels: parseLabelSelector(''),
    includeSlices: true,
    includePods: false,
    projection: { endpointPodNames: false, warn: (what, why) => warnings.push(`${what}: ${why}`) },
    log: logger('kubernetes'),
  });
  return { src, events: [], warnings };
}

const brief = (e: ClusterEvent) =>
  e.op === 'upsert' || e.op === 'delete'
    ? `${e.op} ${e.kind} ${e.key}`
    : e.op === 'connection'
      ? `connection ${e.up}`
      : e.op;

describe('kubernetes manifests source', () => {
  test('sends what a watch would: upserts, then only the differences, deletes included', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'clusterdns-manifests-unit-'));
    const restore = setLogSink(() => {});
    try {
      writeFileSync(
        join(dir, 'a.yaml'),
        'kind: Namespace\nmetadata: {name: shop}\n---\nkind: Service\nmetadata: {name: web, namespace: shop}\nspec: {clusterIP: 10.0.0.1}\n---\nkind: Service\nmetadata: {name: nons}\nspec: {clusterIP: 10.0.0.2}\n',
      );
      writeFileSync(
        join(dir, 'b.json'),
        JSON.stringify({
          kind: 'List',
          items: [{ kind: 'Pod', metadata: { name: 'p', namespace: 'shop' }, status: { podIP: '10.1.1.1' } }],
        }),
      );
      const { src, events } = source(dir);
      await src.start((e) => events.push(e));
      assert.deepEqual(events.map(brief), [
        'upsert Namespace shop',
        'upsert Service shop/web',
        'upsert Service default/nons',
        'synced',
      ]);
      assert.deepEqual(
        src.counts(),
        { Service: 2, EndpointSlice: 0, Namespace: 1, Pod: 0 },
        'pods only with pods verified',
      );

      events.length = 0;
      await src.check();
      assert.deepEqual(events, [], 'nothing changed, nothing sent');

      writeFileSync(
        join(dir, 'a.yaml.tmp'),
        'kind: Namespace\nmetadata: {name: shop}\n---\nkind: Service\nmetadata: {name: web, namespace: shop}\nspec: {clusterIP: 10.0.0.9}\n',
      );
      renameSync(join(dir, 'a.yaml.tmp'), join(dir, 'a.yaml'));
      await src.check();
      assert.deepEqual(events.map(brief), ['delete Service default/nons', 'upsert Service shop/web']);

      events.length = 0;
      writeFileSync(join(dir, 'a.yaml'), 'kind: Service\nmetadata: {name: web\n  bad: [\n');
      await src.check();
      assert.deepEqual(events, [], 'a file that does not parse keeps its previous objects');

      events.length = 0;
      rmSync(dir, { recursive: true });
      await src.check();
      assert.deepEqual(events.map(brief), ['connection false'], 'a vanished path is an outage: what is known stays');
      mkdirSync(dir);
      writeFileSync(join(dir, 'c.yml'), 'kind: Namespace\nmetadata: {name: other}\n');
      await src.check();
      assert.deepEqual(
        events.map(brief).sort(),
        [
          'connection false',
          'connection true',
          'delete Namespace shop',
          'delete Service shop/web',
          'upsert Namespace other',
        ].sort(),
      );
      await src.stop();
    } finally {
      restore();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('one file: its poll sees an edit within the poll interval, and sends nothing while it is unchanged', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'clusterdns-manifests-file-'));
    const restore = setLogSink(() => {});
    const file = join(dir, 'cluster.json');
    const svc = (ip: string) =>
      JSON.stringify({
        kind: 'List',
        items: [{ kind: 'Service', metadata: { name: 'web', namespace: 'shop' }, spec: { clusterIP: ip } }],
      });
    try {
      writeFileSync(file, svc('10.0.0.1'));
      const { src } = source(file, 50);
      const events: ClusterEvent[] = [];
      await src.start((e) => events.push(e));
      assert.deepEqual(events.map(brief), ['upsert Service shop/web', 'synced']);
      events.length = 0;
      await new Promise((r) => setTimeout(r, 300));
      assert.deepEqual(events, [], 'six polls of an unchanged file send nothing');
      writeFileSync(`${file}.tmp`, svc('10.0.0.9'));
      renameSync(`${file}.tmp`, file);
      const t0 = Date.now();
      while (events.length === 0 && Date.now() - t0 < 5000) await new Promise((r) => setTimeout(r, 10));
      assert.deepEqual(events.map(brief), ['upsert Service shop/web']);
      assert.ok(Date.now() - t0 < 2000, `seen after ${Date.now() - t0} ms`);
      rmSync(file);
      events.length = 0;
      while (events.length === 0 && Date.now() - t0 < 5000) await new Promise((r) => setTimeout(r, 10));
      assert.deepEqual(events.map(brief), ['connection false'], 'a vanished file is an outage');
      await src.stop();
    } finally {
      restore();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('a missing path is an error when starting', async () => {
    const { src } = source(join(tmpdir(), 'clusterdns-no-such-manifests'));
    await assert.rejects(
      src.start(() => {}),
      ManifestError,
    );
  });
});
