// One watcher for all workers. With several worker processes, each kubernetes (or routes) source in a
// worker subscribes to the primary, which runs the only list/watch (or manifest reader) per
// distinct source and sends every worker the same compact events over IPC: the API server
// sees one client per clusterdns Pod, not one per core, and only one process relists.
// The stream is numbered and acknowledged: a worker that stops reading gets, once it reads
// again, the current state of what changed meanwhile instead of an unbounded backlog; a
// source that fails to start is reported to the workers and retried with backoff.

import cluster, { type Worker } from 'node:cluster';
import { createHash } from 'node:crypto';
import { logger, warnEachOnce, type Logger } from '../log.js';
import { ServiceKey, type ServerServices } from '../server/services.js';
import {
  RELAY_ACK,
  RELAY_SUBSCRIBE,
  RELAY_UNSUBSCRIBE,
  type ClusterEvent,
  type ClusterSink,
  type KubeSource,
  type SourceConfig,
} from './events.js';
import { ApiSource } from './apisource.js';
import { ManifestSource } from './manifests.js';
import { parseLabelSelector } from './selector.js';
import { compactRecord, type ProjectionOptions } from './objects.js';
import { KUBE_CLIENT_METRICS, type KubeClientMetrics } from './metrics.js';

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
const ACK = RELAY_ACK;

interface SubscribeMessage {
  type: typeof SUBSCRIBE;
  id: string;
  spec: SourceSpec;
}
interface UnsubscribeMessage {
  type: typeof UNSUBSCRIBE;
  id: string;
}
/** `seq` numbers a source's messages (increasing); the worker acknowledges each it applied. */
interface EventsMessage {
  type: typeof EVENTS;
  id: string;
  seq: number;
  events: ClusterEvent[];
}
interface AckMessage {
  type: typeof ACK;
  id: string;
  seq: number;
}

/**
 * Incremental events a worker may have unacknowledged before the primary stops sending it
 * more (CLUSTERDNS_RELAY_MAX_UNACKED; snapshots do not count against it).
 */
const MAX_UNACKED_EVENTS = Math.max(1, Number(process.env['CLUSTERDNS_RELAY_MAX_UNACKED']) || 20_000);
/** Events per IPC message. */
const CHUNK = 5000;
const RETRY_FIRST_MS = 1000;
const RETRY_MAX_MS = 30_000;

export function specKey(spec: SourceSpec): string {
  return createHash('sha256').update(JSON.stringify(spec)).digest('hex').slice(0, 16);
}

/** Builds the real source for a spec (used directly in one process, or by the primary). */
export function sourceFromSpec(
  spec: SourceSpec,
  projection: ProjectionOptions,
  log: Logger,
  metrics: KubeClientMetrics,
): KubeSource {
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
    metrics,
  });
}

/** True when this process should get cluster state from the primary. */
export function relayed(): boolean {
  return cluster.isWorker && typeof process.send === 'function';
}

// ---------------------------------------------------------------- worker side

/** A worker's end of the relay: the sources subscribed to the primary, by spec key. */
export class WorkerRelay {
  readonly sinks = new Map<string, Set<ClusterSink>>();
  private listening = false;

  listen(): void {
    if (this.listening) return;
    this.listening = true;
    process.on('message', (m: EventsMessage) => {
      if (!m || m.type !== EVENTS) return;
      const set = this.sinks.get(m.id);
      if (!set) return;
      for (const ev of m.events) {
        // Decoded from JSON, each string its own copy: as compact as a projected record.
        if (ev.op === 'upsert') compactRecord(ev.kind, ev.value);
      }
      for (const sink of set) for (const ev of m.events) sink(ev);
      if (process.connected) process.send!({ type: ACK, id: m.id, seq: m.seq } satisfies AckMessage);
    });
  }
}

/** The worker's relay end, one per server (a worker runs one), found through the setup context. */
export const WORKER_RELAY = new ServiceKey('kubernetes relay', () => new WorkerRelay());

/** A KubeSource fed by the primary's watcher. */
export class RelayedSource implements KubeSource {
  readonly description: string;
  private readonly id: string;
  private sink: ClusterSink | null = null;

  constructor(
    private readonly relay: WorkerRelay,
    private readonly spec: SourceSpec,
    description: string,
  ) {
    this.id = specKey(spec);
    this.description = `${description} (shared by the workers)`;
  }

  async start(sink: ClusterSink): Promise<void> {
    this.relay.listen();
    const sinks = this.relay.sinks;
    this.sink = sink;
    let set = sinks.get(this.id);
    if (!set) sinks.set(this.id, (set = new Set()));
    set.add(sink);
    process.send!({ type: SUBSCRIBE, id: this.id, spec: this.spec } satisfies SubscribeMessage);
  }

  async stop(): Promise<void> {
    const sinks = this.relay.sinks;
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

/** What the primary knows of one subscribing worker's stream. */
class Subscriber {
  seq = 0;
  acked = 0;
  /** Incremental events sent and not yet acknowledged, by message seq. */
  readonly unacked = new Map<number, number>();
  unackedEvents = 0;
  /** Set while the worker is behind: the state keys that changed since (sent as they are then). */
  behind: Set<string> | null = null;
  behindSynced = false;
  behindConnection = false;

  constructor(readonly worker: Worker) {}
}

/** The current state of one shared source, kept to bring new subscribers up to date. */
class SharedSource {
  readonly state = new Map<string, ClusterEvent>();
  synced = false;
  connection: ClusterEvent | null = null;
  readonly subscribers = new Map<Worker, Subscriber>();
  private pending: ClusterEvent[] = [];
  private flushScheduled = false;
  stopTimer: NodeJS.Timeout | null = null;
  source: KubeSource;
  private retryTimer: NodeJS.Timeout | null = null;
  private retryMs = RETRY_FIRST_MS;
  /** The last start failure (logged once until the source starts). */
  private failure: string | null = null;
  private stopped = false;
  private readonly projection: ProjectionOptions;
  private lastSeq = 0;

  constructor(
    readonly id: string,
    private readonly spec: SourceSpec,
    private readonly log: Logger,
    private readonly metrics: KubeClientMetrics,
  ) {
    this.projection = { endpointPodNames: spec.endpointPodNames, warn: warnEachOnce(log) };
    this.source = sourceFromSpec(spec, this.projection, log, metrics);
  }

  /** Starts the source; a failure is told to the workers and retried with backoff, never kept. */
  start(): void {
    if (this.retryTimer) {
      clearTimeout(this.retryTimer);
      this.retryTimer = null;
    }
    const source = this.source;
    source.start(this.sink).then(
      () => {
        if (this.stopped || source !== this.source) return;
        this.retryMs = RETRY_FIRST_MS;
        if (this.failure !== null) {
          this.failure = null;
          this.sink({ op: 'connection', up: true, detail: source.description });
        }
        this.log.info(`${source.description}: one watcher for all workers`);
      },
      (e: Error) => {
        if (this.stopped || source !== this.source) return;
        // Connection errors already start with where they come from ("in-cluster: ...").
        const why = e.message.startsWith(source.description.split(' (')[0]!)
          ? e.message
          : `${source.description}: ${e.message}`;
        if (this.failure !== why) this.log.error(`${why}; retrying with backoff`);
        this.failure = why;
        this.sink({ op: 'connection', up: false, detail: why });
        void source.stop().catch(() => {});
        this.source = sourceFromSpec(this.spec, this.projection, this.log, this.metrics);
        this.retryTimer = setTimeout(() => this.start(), this.retryMs);
        this.retryTimer.unref();
        this.retryMs = Math.min(this.retryMs * 2, RETRY_MAX_MS);
      },
    );
  }

  /** A new subscriber of a source that failed (e.g. after a reload): try again now. */
  retryNowIfFailed(): void {
    if (this.failure !== null && this.retryTimer) {
      this.retryMs = RETRY_FIRST_MS;
      this.start();
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.retryTimer) clearTimeout(this.retryTimer);
    await this.source.stop();
  }

  readonly sink = (ev: ClusterEvent): void => {
    if (ev.op === 'upsert') {
      const key = ev.kind + '/' + ev.key;
      if (ev.kind === 'EndpointSlice' && this.synced) {
        // Observed here, once, for every worker (they do not observe relayed events).
        const svc = this.state.get('Service/' + ev.key.slice(0, ev.key.indexOf('/') + 1) + ev.value.service);
        this.metrics.observeProgramming(
          ev.value,
          svc?.op === 'upsert' && svc.kind === 'Service' ? svc.value : undefined,
        );
      }
      this.state.set(key, ev);
    } else if (ev.op === 'delete') this.state.delete(ev.kind + '/' + ev.key);
    else if (ev.op === 'synced') this.synced = true;
    else {
      // Up until told otherwise, as a worker's index starts.
      const wasUp = this.connection?.op === 'connection' ? this.connection.up : true;
      if (wasUp !== ev.up && this.failure === null) {
        // Said once here for every worker (the workers do not log relayed connection changes).
        if (ev.up) this.log.info(`${ev.detail}: reachable again`);
        else this.log.warn(`${ev.detail}: unreachable; serving the last known state`);
      }
      this.connection = ev;
    }
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
    for (const sub of this.subscribers.values()) {
      // Behind means unacknowledged events piling up; one big batch (a whole list at once) to a
      // worker that has acknowledged everything is simply sent.
      if (sub.behind === null && sub.unackedEvents > 0 && sub.unackedEvents + events.length > MAX_UNACKED_EVENTS) {
        sub.behind = new Set();
        this.log.warn(
          `worker ${sub.worker.process.pid} fell behind the watch (${sub.unackedEvents} events unacknowledged); it gets the current state once it catches up`,
        );
      }
      if (sub.behind !== null) {
        for (const ev of events) {
          if (ev.op === 'upsert' || ev.op === 'delete') sub.behind.add(ev.kind + '/' + ev.key);
          else if (ev.op === 'synced') sub.behindSynced = true;
          else sub.behindConnection = true;
        }
        // Caught up meanwhile (no ack is still to come): send it the current state now.
        if (sub.acked === sub.seq) this.catchUp(sub);
        continue;
      }
      this.sendTo(sub, events, true);
    }
  }

  private sendTo(sub: Subscriber, events: ClusterEvent[], counted: boolean): void {
    if (!sub.worker.isConnected()) return;
    // One numbering for all subscribers: a late ack from an earlier subscription cannot pass for a new one.
    const seq = ++this.lastSeq;
    sub.seq = seq;
    if (counted) {
      sub.unacked.set(seq, events.length);
      sub.unackedEvents += events.length;
    }
    sub.worker.send({ type: EVENTS, id: this.id, seq, events } satisfies EventsMessage);
  }

  /** A worker applied every message up to `seq`. */
  acked(w: Worker, seq: number): void {
    const sub = this.subscribers.get(w);
    if (!sub || seq <= sub.acked) return;
    sub.acked = seq;
    for (const [s, n] of sub.unacked) {
      if (s > seq) break;
      sub.unacked.delete(s);
      sub.unackedEvents -= n;
    }
    if (sub.behind !== null && sub.acked === sub.seq) this.catchUp(sub);
  }

  /** Sends a worker that caught up the current value of every key that changed while it was behind. */
  private catchUp(sub: Subscriber): void {
    const keys = sub.behind!;
    sub.behind = null;
    const events: ClusterEvent[] = [];
    for (const k of keys) {
      const cur = this.state.get(k);
      if (cur) events.push(cur);
      else {
        const slash = k.indexOf('/');
        events.push({ op: 'delete', kind: k.slice(0, slash) as 'Service', key: k.slice(slash + 1) });
      }
      if (events.length >= CHUNK) this.sendTo(sub, events.splice(0), false);
    }
    if (sub.behindSynced && this.synced) events.push({ op: 'synced' });
    if (sub.behindConnection && this.connection) events.push(this.connection);
    sub.behindSynced = sub.behindConnection = false;
    if (events.length) this.sendTo(sub, events, false);
    this.log.info(
      `worker ${sub.worker.process.pid} caught up: sent the current state of ${keys.size} changed objects instead of the backlog`,
    );
  }

  /** Sends everything known so far to one new subscriber. */
  snapshot(w: Worker): void {
    this.flush();
    const sub = new Subscriber(w);
    this.subscribers.set(w, sub);
    const events: ClusterEvent[] = [];
    for (const ev of this.state.values()) {
      events.push(ev);
      if (events.length >= CHUNK) this.sendTo(sub, events.splice(0), false);
    }
    if (this.synced) events.push({ op: 'synced' });
    if (this.connection) events.push(this.connection);
    if (events.length) this.sendTo(sub, events, false);
  }
}

/**
 * In the primary: runs shared sources for the workers' kubernetes instances, counting their
 * API requests in the primary's server's metrics. Returns the handler for the workers'
 * subscribe/unsubscribe/ack messages (order.ts feeds it).
 */
export function serveKubeRelay(services: ServerServices): (w: Worker, message: unknown) => void {
  const log = logger('kubernetes');
  const metrics = services.get(KUBE_CLIENT_METRICS);
  const shared = new Map<string, SharedSource>();
  const drop = (s: SharedSource, w: Worker) => {
    s.subscribers.delete(w);
    if (s.subscribers.size > 0 || s.stopTimer) return;
    // Kept a while so a reload, which unsubscribes then subscribes again, does not relist.
    s.stopTimer = setTimeout(() => {
      if (s.subscribers.size > 0) return;
      shared.delete(s.id);
      void s.stop();
    }, 30_000);
    s.stopTimer.unref();
  };
  cluster.on('exit', (w) => {
    for (const s of shared.values()) if (s.subscribers.has(w)) drop(s, w);
  });
  return (w: Worker, message: unknown) => {
    const m = message as SubscribeMessage | UnsubscribeMessage | AckMessage | null;
    if (!m || (m.type !== SUBSCRIBE && m.type !== UNSUBSCRIBE && m.type !== ACK)) return;
    // The message may have waited for this code to load; a worker gone meanwhile gets nothing.
    if (w.isDead()) return;
    if (m.type === ACK) {
      shared.get(m.id)?.acked(w, m.seq);
      return;
    }
    if (m.type === UNSUBSCRIBE) {
      const s = shared.get(m.id);
      if (s) drop(s, w);
      return;
    }
    let s = shared.get(m.id);
    if (!s) {
      s = new SharedSource(m.id, m.spec, log, metrics);
      shared.set(m.id, s);
      s.start();
    } else s.retryNowIfFailed();
    if (s.stopTimer) {
      clearTimeout(s.stopTimer);
      s.stopTimer = null;
    }
    s.snapshot(w);
  };
}
