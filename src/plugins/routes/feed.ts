// The state behind the route stream: every ClusterIP Service of the allowed namespaces as a
// route, a version that grows by one with each change, and a bounded log of the last
// changes so a client that reconnects gets what it missed instead of everything again.
// Fed by a ClusterIndex (the kubernetes plugin's, or one of our own); each change is
// serialised once and the same line written to every subscriber that wants it.

import { randomInt } from 'node:crypto';
import type { ClusterChange, ClusterIndex } from '../../cluster/clusterindex.js';
import type { ServiceRecord } from '../../cluster/objects.js';

export interface Route {
  name: string;
  namespace: string;
  clusterIP: string;
  clusterIPs: string[];
}

export type ChangeType = 'ADDED' | 'MODIFIED' | 'DELETED';

/**
 * resourceVersion = generation × 2^32 + sequence, written in decimal. The generation is
 * drawn at random per feed (process, worker, reload), so a version from another feed is
 * never mistaken for one of ours; the result stays a safe integer for clients that parse it.
 */
const SEQ_SPACE = 2 ** 32;
const GENERATIONS = 2 ** 21;

/** Where a client that asks to resume stands. */
export type Resume = { kind: 'replay'; lines: readonly string[] } | { kind: 'snapshot' };

/** What the feed writes to: one HTTP response per subscriber (stream.ts). */
export interface RouteSink {
  /** Namespaces wanted; null = every allowed one. */
  readonly namespaces: ReadonlySet<string> | null;
  write(line: string): void;
  /** The feed has synced: the subscriber that waited gets its SNAPSHOT now. */
  synced(): void;
}

interface LoggedChange {
  seq: number;
  namespace: string;
  line: string;
}

function sameIPs(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

export class RouteFeed {
  readonly generation: number;
  private seq = 0;
  /** Oldest sequence whose change is still in the log (changes from firstSeq to seq are all there). */
  private firstSeq = 1;
  private readonly log: LoggedChange[] = [];
  private logStart = 0;
  readonly routes = new Map<string, Route>();
  readonly sinks = new Set<RouteSink>();
  synced = false;
  private index: ClusterIndex | null = null;

  constructor(
    /** Namespaces whose Services may be streamed; empty = all. */
    private readonly allowed: ReadonlySet<string>,
    /** Changes kept for resuming. */
    private readonly history: number,
    generation: number = randomInt(1, GENERATIONS),
  ) {
    this.generation = generation;
  }

  /** Starts following `index`. */
  attach(index: ClusterIndex): void {
    this.index = index;
    this.unlisten = index.listen({
      onChange: (c) => this.onChange(c),
      onSynced: () => this.resync(),
    });
    if (index.synced) this.resync();
  }

  private unlisten: (() => void) | null = null;

  /** Stops following the index (kept by the kubernetes plugin across reloads). */
  detach(): void {
    this.unlisten?.();
    this.unlisten = null;
    this.index = null;
  }

  get version(): string {
    return String(this.generation * SEQ_SPACE + this.seq);
  }

  private routeOf(rec: ServiceRecord | undefined): Route | null {
    if (rec === undefined || rec.kind !== 'ClusterIP' || rec.clusterIPs.length === 0) return null;
    if (this.allowed.size > 0 && !this.allowed.has(rec.namespace)) return null;
    return { name: rec.name, namespace: rec.namespace, clusterIP: rec.clusterIPs[0]!, clusterIPs: [...rec.clusterIPs] };
  }

  /** The first sync: the whole table at once, no change events (subscribers get a SNAPSHOT). */
  private resync(): void {
    if (this.synced || this.index === null) return;
    for (const [key, rec] of this.index.services) {
      const r = this.routeOf(rec);
      if (r !== null) this.routes.set(key, r);
    }
    this.seq++;
    this.firstSeq = this.seq + 1;
    this.synced = true;
    for (const s of [...this.sinks]) s.synced();
  }

  private onChange(c: ClusterChange): void {
    if (!this.synced || this.index === null) return;
    for (const key of c.services) {
      const now = this.routeOf(this.index.services.get(key));
      const before = this.routes.get(key);
      if (now === null) {
        if (before === undefined) continue;
        this.routes.delete(key);
        this.emit('DELETED', before);
      } else if (before === undefined) {
        this.routes.set(key, now);
        this.emit('ADDED', now);
      } else if (!sameIPs(before.clusterIPs, now.clusterIPs)) {
        this.routes.set(key, now);
        this.emit('MODIFIED', now);
      }
    }
  }

  private emit(type: ChangeType, route: Route): void {
    if (this.seq + 1 >= SEQ_SPACE) return;
    this.seq++;
    const line = `${JSON.stringify({ type, resourceVersion: this.version, route })}\n`;
    this.log.push({ seq: this.seq, namespace: route.namespace, line });
    if (this.log.length - this.logStart > this.history) {
      this.logStart++;
      this.firstSeq = this.logStart < this.log.length ? this.log[this.logStart]!.seq : this.seq + 1;
      // Compact now and then instead of shifting on every change.
      if (this.logStart > 1024 && this.logStart * 2 > this.log.length) {
        this.log.splice(0, this.logStart);
        this.logStart = 0;
      }
    }
    for (const s of [...this.sinks]) if (s.namespaces === null || s.namespaces.has(route.namespace)) s.write(line);
  }

  /** The SNAPSHOT line for these namespaces: routes sorted by namespace, then name. */
  snapshot(namespaces: ReadonlySet<string> | null): string {
    const routes: Route[] = [];
    for (const r of this.routes.values()) if (namespaces === null || namespaces.has(r.namespace)) routes.push(r);
    routes.sort((a, b) =>
      a.namespace === b.namespace
        ? a.name < b.name
          ? -1
          : a.name > b.name
            ? 1
            : 0
        : a.namespace < b.namespace
          ? -1
          : 1,
    );
    return `${JSON.stringify({ type: 'SNAPSHOT', resourceVersion: this.version, routes })}\n`;
  }

  bookmark(): string {
    return `${JSON.stringify({ type: 'BOOKMARK', resourceVersion: this.version })}\n`;
  }

  /** What a client that saw everything up to `resourceVersion` needs: the changes after it, or a SNAPSHOT. */
  resume(resourceVersion: string, namespaces: ReadonlySet<string> | null): Resume {
    const n = Number(resourceVersion);
    if (!this.synced || !Number.isSafeInteger(n)) return { kind: 'snapshot' };
    const gen = Math.floor(n / SEQ_SPACE);
    const seq = n - gen * SEQ_SPACE;
    // Another feed's version, one from the future, or older than what the log still holds.
    if (gen !== this.generation || seq > this.seq || seq < this.firstSeq - 1) return { kind: 'snapshot' };
    const lines: string[] = [];
    for (let i = this.logStart; i < this.log.length; i++) {
      const e = this.log[i]!;
      if (e.seq > seq && (namespaces === null || namespaces.has(e.namespace))) lines.push(e.line);
    }
    return { kind: 'replay', lines };
  }

  /** Changes held for resuming (for tests and the README's numbers). */
  get logged(): number {
    return this.log.length - this.logStart;
  }
}
