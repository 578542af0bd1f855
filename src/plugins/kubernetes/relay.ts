// One watcher for all workers. With several worker processes, each kubernetes instance in a
// worker subscribes to the primary, which runs the only list/watch (or manifest reader) per
// distinct source and sends every worker the same compact events over IPC: the API server
// sees one client per clusterdns Pod, not one per core, and only one process relists.

import cluster, { type Worker } from 'node:cluster';
import { createHash } from 'node:crypto';
import { collectAfterBurst, listBegins, listEnds } from '../../heap.js';
import { logger, type Logger } from '../../log.js';
import { RELAY_SUBSCRIBE, RELAY_UNSUBSCRIBE, type ClusterEvent, type ClusterSink, type KubeSource } from './events.js';
import { ApiSource } from './apisource.js';
import { ManifestSource } from './manifests.js';
import { parseLabelSelector } from './selector.js';
import { compactRecord, type ProjectionOptions } from './objects.js';
import type { SourceConfig } from './options.js';

/** Everything that decides what a source emits; equal specs share one watcher. */
export interface SourceSpec {
  source: SourceConfig;
  labels: string;
  namespaceLabels: string;
  noEndpoints: boolean;
  watchPods: boolean;
  endpointPodNames: boolean;
  manifestPollMs: number;
}

const SUBSCRIBE = RELAY_SUBSCRIBE;
const UNSUBSCRIBE = RELAY_UNSUBSCRIBE;
const EVENTS = 'clusterdns:kube-events';

interface SubscribeMessage { type: typeof SUBSCRIBE; id: string; spec: SourceSpec }
interface UnsubscribeMessage { type: typeof UNSUBSCRIBE; id: string }
interface EventsMessage { type: typeof EVENTS; id: string; events: ClusterEvent[]; error?: string }

export function specKey(spec: SourceSpec): string {
  return createHash('sha256').update(JSON.stringify(spec)).digest('hex').slice(0, 16);
}

/** Builds the real source for a spec (used directly in one process, or by the primary). */
export function sourceFromSpec(spec: SourceSpec, projection: ProjectionOptions, log: Logger): KubeSource {
  if (spec.source.kind === 'manifests') {
    return new ManifestSource({
      path: spec.source.path,
      pollMs: spec.manifestPollMs,
      labels: parseLabelSelector(spec.labels),
      namespaceLabels: parseLabelSelector(spec.namespaceLabels),
      includeSlices: !spec.noEndpoints,
      includePods: spec.watchPods,
      projection,
      log,
    });
  }
  return new ApiSource({
    config: spec.source,
    labels: spec.labels,
    namespaceLabels: spec.namespaceLabels,
    watchSlices: !spec.noEndpoints,
    watchPods: spec.watchPods,
    projection,
    log,
  });
}

/** True when this process should get cluster state from the primary. */
export function relayed(): boolean {
  return cluster.isWorker && typeof process.send === 'function';
}

// ---------------------------------------------------------------- worker side

const sinks = new Map<string, Set<ClusterSink>>();
let workerListening = false;

function listenInWorker(): void {
  if (workerListening) return;
  workerListening = true;
  process.on('message', (m: EventsMessage) => {
    if (!m || m.type !== EVENTS) return;
    const set = sinks.get(m.id);
    if (!set) return;
    let synced = false;
    for (const ev of m.events) {
      synced ||= ev.op === 'synced';
      // Decoded from JSON, each string its own copy: as compact as a projected record.
      if (ev.op === 'upsert') compactRecord(ev.kind, ev.value);
    }
    for (const sink of set) for (const ev of m.events) sink(ev);
    // The end of a snapshot: the messages it came in are garbage (heap.ts).
    if (synced) collectAfterBurst();
  });
}

/** A KubeSource fed by the primary's watcher. */
export class RelayedSource implements KubeSource {
  readonly description: string;
  private readonly id: string;
  private sink: ClusterSink | null = null;
  private endSnapshot: () => void = () => {};

  constructor(
    private readonly spec: SourceSpec,
    description: string,
  ) {
    this.id = specKey(spec);
    this.description = `${description} (shared by the workers)`;
  }

  async start(sink: ClusterSink): Promise<void> {
    listenInWorker();
    // The snapshot that comes first is this process's LIST (heap.ts: full-speed heap sizing).
    let snapshotting = true;
    listBegins();
    this.endSnapshot = () => {
      if (!snapshotting) return;
      snapshotting = false;
      listEnds();
    };
    const wrapped: ClusterSink = (ev) => {
      if (ev.op === 'synced') this.endSnapshot();
      sink(ev);
    };
    this.sink = wrapped;
    let set = sinks.get(this.id);
    if (!set) sinks.set(this.id, (set = new Set()));
    set.add(wrapped);
    process.send!({ type: SUBSCRIBE, id: this.id, spec: this.spec } satisfies SubscribeMessage);
  }

  async stop(): Promise<void> {
    this.endSnapshot();
    const set = sinks.get(this.id);
    if (set && this.sink) set.delete(this.sink);
    if (set && set.size === 0) {
      sinks.delete(this.id);
      if (process.connected) process.send!({ type: UNSUBSCRIBE, id: this.id } satisfies UnsubscribeMessage);
    }
    this.sink = null;
  }
}

// ---------------------------------------------------------------- primary side

/** The current state of one shared source, kept to bring new subscribers up to date. */
class SharedSource {
  readonly state = new Map<string, ClusterEvent>();
  synced = false;
  connection: ClusterEvent | null = null;
  readonly subscribers = new Set<Worker>();
  private pending: ClusterEvent[] = [];
  private flushScheduled = false;
  stopTimer: NodeJS.Timeout | null = null;
  readonly source: KubeSource;

  constructor(
    readonly id: string,
    spec: SourceSpec,
    private readonly log: Logger,
  ) {
    const seen = new Set<string>();
    const projection: ProjectionOptions = {
      endpointPodNames: spec.endpointPodNames,
      warn: (what, why) => {
        const line = `${what}: ${why}`;
        if (seen.has(line)) return;
        if (seen.size > 10_000) seen.clear();
        seen.add(line);
        log.warn(line);
      },
    };
    this.source = sourceFromSpec(spec, projection, log);
  }

  readonly sink = (ev: ClusterEvent): void => {
    if (ev.op === 'upsert') this.state.set([ev.kind, ev.key].join('/'), ev);
    else if (ev.op === 'delete') this.state.delete([ev.kind, ev.key].join('/'));
    else if (ev.op === 'synced') this.synced = true;
    else this.connection = ev;
    this.pending.push(ev);
    if (!this.flushScheduled) {
      this.flushScheduled = true;
      setImmediate(() => this.flush());
    }
  };

  private flush(): void {
    this.flushScheduled = false;
    const events = this.pending;
    this.pending = [];
    if (events.length === 0) return;
    for (const w of this.subscribers) send(w, { type: EVENTS, id: this.id, events });
  }

  /** Sends everything known so far to one new subscriber. */
  snapshot(w: Worker): void {
    this.flush();
    const events: ClusterEvent[] = [];
    for (const ev of this.state.values()) {
      events.push(ev);
      if (events.length >= 5000) {
        send(w, { type: EVENTS, id: this.id, events: events.splice(0) });
      }
    }
    if (this.synced) events.push({ op: 'synced' });
    if (this.connection) events.push(this.connection);
    if (events.length) send(w, { type: EVENTS, id: this.id, events });
  }
}

function send(w: Worker, m: EventsMessage): void {
  if (w.isConnected()) w.send(m);
}

/**
 * In the primary: runs shared sources for the workers' kubernetes instances. Returns the
 * handler for the workers' subscribe/unsubscribe messages (order.ts feeds it).
 */
export function serveKubeRelay(): (w: Worker, message: unknown) => void {
  const log = logger('kubernetes');
  const shared = new Map<string, SharedSource>();
  const drop = (s: SharedSource, w: Worker) => {
    s.subscribers.delete(w);
    if (s.subscribers.size > 0 || s.stopTimer) return;
    // Kept a while so a reload, which unsubscribes then subscribes again, does not relist.
    s.stopTimer = setTimeout(() => {
      if (s.subscribers.size > 0) return;
      shared.delete(s.id);
      void s.source.stop();
    }, 30_000);
    s.stopTimer.unref();
  };
  cluster.on('exit', (w) => {
    for (const s of shared.values()) if (s.subscribers.has(w)) drop(s, w);
  });
  return (w: Worker, message: unknown) => {
    const m = message as SubscribeMessage | UnsubscribeMessage | null;
    if (!m || (m.type !== SUBSCRIBE && m.type !== UNSUBSCRIBE)) return;
    // The message may have waited for this code to load; a worker gone meanwhile gets nothing.
    if (w.isDead()) return;
    if (m.type === UNSUBSCRIBE) {
      const s = shared.get(m.id);
      if (s) drop(s, w);
      return;
    }
    let s = shared.get(m.id);
    if (!s) {
      const created = new SharedSource(m.id, m.spec, log);
      s = created;
      shared.set(m.id, created);
      created.source.start(created.sink).then(
        () => log.info(`${created.source.description}: one watcher for all workers`),
        (e: Error) => {
          // Connection errors already start with where they come from ("in-cluster: ...").
          const what = created.source.description;
          log.error(e.message.startsWith(what.split(' (')[0]!) ? e.message : `${what}: ${e.message}`);
          for (const sub of created.subscribers) send(sub, { type: EVENTS, id: created.id, events: [], error: e.message });
        },
      );
    }
    if (s.stopTimer) {
      clearTimeout(s.stopTimer);
      s.stopTimer = null;
    }
    s.subscribers.add(w);
    s.snapshot(w);
  };
}
