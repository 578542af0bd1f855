// The index a reload adopts: one per distinct source, its files' content included; the
// source stops only when the last holder lets go.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { feedKey, KubeFeeds } from '../../src/plugins/kubernetes/feed.js';
import type { ClusterSink, KubeSource } from '../../src/cluster/events.js';
import type { SourceSpec } from '../../src/cluster/relay.js';

function spec(file: string, labels = ''): SourceSpec {
  return {
    source: { kind: 'kubeconfig', file, context: undefined },
    labels,
    namespaceLabels: '',
    noEndpoints: false,
    watchPods: false,
    endpointPodNames: false,
    manifestPollMs: 1000,
  };
}

class CountingSource implements KubeSource {
  readonly description = 'test';
  starts = 0;
  stops = 0;
  async start(_sink: ClusterSink): Promise<void> {
    this.starts++;
  }
  async stop(): Promise<void> {
    this.stops++;
  }
}

test('the key follows the options and the content of the kubeconfig, not only its path', () => {
  const dir = mkdtempSync(join(tmpdir(), 'feed-'));
  const file = join(dir, 'kubeconfig');
  writeFileSync(file, 'a');
  const k1 = feedKey(spec(file));
  assert.equal(feedKey(spec(file)), k1);
  assert.notEqual(feedKey(spec(file, 'app=x')), k1);
  writeFileSync(file, 'b');
  assert.notEqual(feedKey(spec(file)), k1, 'an edited kubeconfig is a new source');
});

test('two holders share one index and one start; the source stops with the last release; a parsed-only feed is replaced', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'feed-'));
  const file = join(dir, 'kubeconfig');
  writeFileSync(file, 'shared');
  const sources: CountingSource[] = [];
  const make = () => {
    const s = new CountingSource();
    sources.push(s);
    return s;
  };
  const feeds = new KubeFeeds();
  const parsedOnly = feeds.feedFor(spec(file), make); // a configuration validated, never started
  const running = feeds.feedFor(spec(file), make);
  assert.notEqual(running.index, parsedOnly.index, 'nobody held the first: the running one starts fresh');
  const h1 = running.hold();
  await h1.start();
  const next = feeds.feedFor(spec(file), make); // the reload's configuration
  assert.equal(next.index, running.index);
  const h2 = next.hold();
  await h2.start();
  const src = sources[1]!;
  assert.equal(src.starts, 1);
  await h1.release();
  assert.equal(src.stops, 0, 'the new configuration still holds it');
  await h2.release();
  await h2.release();
  assert.equal(src.stops, 1);
});
