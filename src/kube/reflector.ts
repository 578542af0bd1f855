// List + watch of one resource into a Map with client-go's reflector semantics: the streaming
// WatchList where the server has it, else a LIST from the watch cache (resourceVersion=0 or
// NotOlderThan the last version seen), a quorum LIST when that version is unavailable; every
// list is built aside and swapped in at once; it never stops on errors.
import { isDeepStrictEqual } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { KubeApiError, ResponseTooLargeError, type KubeClient, type Query } from './http.js';
import {
  describeObject,
  isList,
  isStatus,
  isWatchEvent,
  listMeta,
  objectKey,
  objectMeta,
  type Status,
} from './types.js';

export interface Projected<T> {
  key: string;
  value: T;
}

export interface BackoffOptions {
  /** First retry delay (ms). Default 500. */
  initialMs?: number;
  /** Cap (ms). Default 30 000. */
  maxMs?: number;
}

export interface ReflectorOptions<T> {
  client: KubeClient;
  /** Collection path, e.g. `/api/v1/services` or `/apis/discovery.k8s.io/v1/endpointslices`. */
  path: string;
  labelSelector?: string;
  fieldSelector?: string;
  /** Strip an API object to what the caller needs; null (malformed) skips it with a warning. */
  project(obj: unknown): Projected<T> | null;
  /** Key of an object `project` rejected, so a now-malformed object's old entry is dropped. Default `ns/name`. */
  keyOf?: (obj: unknown) => string | null;
  /** Whether two projections are the same (no update emitted). Default deep equality. */
  equals?: (a: T, b: T) => boolean;
  onAdd?(key: string, value: T): void;
  onUpdate?(key: string, old: T, value: T): void;
  onDelete?(key: string, old: T): void;
  /** First complete list applied (once). */
  onSynced?(): void;
  /** Each failure (before the retry); the reflector keeps going regardless. */
  onError?(err: Error): void;
  /** API reachable (a list page or watch opened) or not (a request failed). Called on changes only. */
  onConnectionChange?(connected: boolean): void;
  /** Non-fatal problems, e.g. a malformed object; defaults to stderr. */
  warn?: (msg: string) => void;
  /** How it lists, when that changes (e.g. the server has no WatchList); defaults to nowhere. */
  info?(msg: string): void;
  /** A full list (LIST pages or a WatchList's initial events) starts: a burst of allocation. */
  onListBegin?(): void;
  /** The list `onListBegin` announced ended: `completed` when its state was swapped in. */
  onListEnd?(completed: boolean): void;
  /** Try the streaming WatchList (`sendInitialEvents`) first; a server that refuses it gets LISTs. Default true. */
  watchList?: boolean;
  /** LIST page size (a paged quorum list; the watch cache ignores it). Default 500. */
  pageSize?: number;
  /** Server-side watch timeout is drawn from this range (s). Default [300, 600]. */
  watchTimeoutSeconds?: readonly [number, number];
  /**
   * Reconnect a watch that has sent no bytes for this long (ms). Default: the watch's
   * timeoutSeconds + 30 s, since the server ends every watch by then and bookmarks are not
   * guaranteed in between (client-go relies on the same).
   */
  idleTimeoutMs?: number;
  backoff?: BackoffOptions;
  /** A clean watch end sooner than this with no events counts as a failure, so a flapping server is not hammered. Default 1000 ms. */
  minWatchMs?: number;
}

export interface ReflectorCounters {
  lists: number;
  relists: number;
  watches: number;
  events: number;
  errors: number;
  malformed: number;
}

/** A 410 that means "your resourceVersion is gone": only a fresh list helps. */
export class ResourceExpiredError extends Error {
  readonly code = 'KUBE_ERR_EXPIRED';
  constructor(message: string) {
    super(message);
    this.name = 'ResourceExpiredError';
  }
}

/**
 * The server does not have the resourceVersion asked for yet (an etcd restore, a lagging watch
 * cache): HTTP 504 or an in-stream ERROR with the `ResourceVersionTooLarge` cause. Only a list
 * that does not name a version helps.
 */
export class ResourceVersionTooLargeError extends Error {
  readonly code = 'KUBE_ERR_RV_TOO_LARGE';
  constructor(
    message: string,
    readonly retryAfterMs: number | undefined,
  ) {
    super(message);
    this.name = 'ResourceVersionTooLargeError';
  }
}

/** RBAC refused a verb on the collection; the message names both, as `kubectl auth can-i` would ask. */
export class ForbiddenError extends Error {
  readonly code = 'KUBE_ERR_FORBIDDEN';
  constructor(
    readonly verb: 'list' | 'watch',
    readonly resource: string,
    path: string,
    serverMessage: string | undefined,
  ) {
    super(`${path}: forbidden: cannot ${verb} ${resource}${serverMessage ? ` (${serverMessage})` : ''}`);
    this.name = 'ForbiddenError';
  }
}

/** A watch line that is not a JSON watch event; the watch is restarted from the last good resourceVersion. */
export class WatchDecodeError extends Error {
  readonly code = 'KUBE_ERR_WATCH_DECODE';
  constructor(message: string) {
    super(message);
    this.name = 'WatchDecodeError';
  }
}

/** Capped exponential backoff with jitter: delay n is uniform in [d/2, d], d = min(max, initial·2ⁿ). */
export class Backoff {
  #attempt = 0;
  readonly initialMs: number;
  readonly maxMs: number;

  constructor(opts: BackoffOptions = {}) {
    this.initialMs = opts.initialMs ?? 500;
    this.maxMs = opts.maxMs ?? 30_000;
  }

  get attempt(): number {
    return this.#attempt;
  }

  next(floorMs = 0): number {
    const d = Math.min(this.maxMs, this.initialMs * 2 ** Math.min(this.#attempt, 30));
    this.#attempt++;
    return Math.max(Math.min(floorMs, this.maxMs), d / 2 + Math.random() * (d / 2));
  }

  reset(): void {
    this.#attempt = 0;
  }
}

/** How long past its timeoutSeconds a watch may stay silent before the connection is presumed dead. */
const WATCH_END_GRACE_MS = 30_000;
/** The annotation on the BOOKMARK that ends a WatchList's initial events (API Concepts › Streaming lists). */
const INITIAL_EVENTS_END = 'k8s.io/initial-events-end';

type WatchEnd =
  | { kind: 'closed'; events: number; durationMs: number }
  | { kind: 'expired'; events: number }
  | { kind: 'tooLarge'; error: ResourceVersionTooLargeError }
  /** The server refused `sendInitialEvents` (older than 1.27, or its WatchList gate is off). */
  | { kind: 'watchListRefused'; error: Error };

/** The initial events of a WatchList, collected aside until the bookmark that ends them. */
interface InitialEvents<T> {
  items: Map<string, T>;
  done: boolean;
}

export class Reflector<T> {
  readonly path: string;
  /** `path?labelSelector=…` for messages. */
  readonly name: string;
  readonly counters: ReflectorCounters = { lists: 0, relists: 0, watches: 0, events: 0, errors: 0, malformed: 0 };
  readonly #o: ReflectorOptions<T>;
  readonly #store = new Map<string, T>();
  readonly #backoff: Backoff;
  readonly #abort = new AbortController();
  readonly #warn: (msg: string) => void;
  readonly #equals: (a: T, b: T) => boolean;
  readonly #keyOf: (obj: unknown) => string | null;
  #rv = '';
  #needList = true;
  #synced = false;
  #connected = false;
  #lastSyncTime: number | undefined;
  #running: Promise<void> | undefined;
  #syncWaiters: Array<() => void> = [];
  /** One immediate relist is allowed per healthy period; repeated 410s go through the backoff. */
  #quickRelist = true;
  /** client-go's isLastSyncResourceVersionUnavailable: the next list is a quorum read naming no version. */
  #rvUnavailable = false;
  /** The server refused a WatchList once; this reflector LISTs from then on. */
  #watchListRefused = false;
  /** A LIST came back in pages (no watch cache in front): relists page too. */
  #paginated = false;
  /** The watch cache's whole-list answer was over the body limit: page from etcd from then on. */
  #pagedOnly = false;
  /** The list announced by onListBegin that has not ended yet. */
  #listOpen = false;

  constructor(opts: ReflectorOptions<T>) {
    this.#o = opts;
    this.path = opts.path;
    const sel = [
      opts.labelSelector ? `labelSelector=${opts.labelSelector}` : '',
      opts.fieldSelector ? `fieldSelector=${opts.fieldSelector}` : '',
    ].filter(Boolean);
    this.name = sel.length ? `${opts.path}?${sel.join('&')}` : opts.path;
    this.#backoff = new Backoff(opts.backoff);
    this.#warn = opts.warn ?? ((msg) => process.stderr.write(`[WARNING] kube: ${msg}\n`));
    this.#equals = opts.equals ?? isDeepStrictEqual;
    this.#keyOf = opts.keyOf ?? objectKey;
  }

  /** The objects, keyed as `project` keyed them. Read-only: mutate only through the API. */
  get store(): ReadonlyMap<string, T> {
    return this.#store;
  }

  /** The first full list has been applied. Stays true through later outages (stale data is still served). */
  get hasSynced(): boolean {
    return this.#synced;
  }

  /** When (ms since epoch) the store was last confirmed current: a list completed or a watch event/bookmark arrived. */
  get lastSyncTime(): number | undefined {
    return this.#lastSyncTime;
  }

  get connected(): boolean {
    return this.#connected;
  }

  get resourceVersion(): string {
    return this.#rv;
  }

  /** Start listing and watching; idempotent. */
  start(): this {
    this.#running ??= this.#run();
    return this;
  }

  /** Resolves after the first full list, or rejects if `signal` aborts or the reflector stops first. */
  waitForSync(signal?: AbortSignal): Promise<void> {
    if (this.#synced) return Promise.resolve();
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (this.#abort.signal.aborted) return Promise.reject(this.#abort.signal.reason);
    return new Promise((ok, fail) => {
      const onAbort = () => fail(signal?.reason ?? this.#abort.signal.reason);
      const done = () => {
        signal?.removeEventListener('abort', onAbort);
        this.#abort.signal.removeEventListener('abort', onAbort);
        ok();
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#abort.signal.addEventListener('abort', onAbort, { once: true });
      this.#syncWaiters.push(done);
    });
  }

  /** Abort in-flight requests and timers; resolves when the loop has exited. The store is kept. */
  async stop(): Promise<void> {
    this.#abort.abort(new Error(`${this.name}: reflector stopped`));
    await this.#running;
  }

  async #run(): Promise<void> {
    const signal = this.#abort.signal;
    while (!signal.aborted) {
      let delay = 0;
      try {
        let end: WatchEnd | undefined;
        if (this.#needList && this.#o.watchList !== false && !this.#watchListRefused) {
          end = await this.#watch(true);
          if (end.kind === 'watchListRefused') {
            this.#watchListRefused = true;
            this.#o.info?.(`${this.name}: the server refused a streaming list (${end.error.message}); using LIST`);
            end = undefined;
          }
        }
        if (!end) {
          if (this.#needList) {
            await this.#list();
            // A complete list means the API is back: later failures start from a short delay.
            this.#backoff.reset();
          }
          end = await this.#watch(false);
        }
        if (end.kind === 'expired') {
          this.#needList = true;
          delay = this.#relistDelay();
        } else if (end.kind === 'tooLarge') {
          delay = this.#tooLarge(end.error);
        } else if (end.kind === 'closed' && end.events === 0 && end.durationMs < (this.#o.minWatchMs ?? 1000)) {
          delay = this.#backoff.next();
        } else if (end.kind === 'closed' && end.events === 0) {
          this.#backoff.reset(); // a long quiet watch that ended on time is healthy
        }
      } catch (err) {
        if (signal.aborted) break;
        const error = err instanceof Error ? err : new Error(String(err));
        if (error instanceof ResourceVersionTooLargeError) {
          delay = this.#tooLarge(error);
        } else if (isExpired(error)) {
          this.#needList = true;
          delay = this.#relistDelay();
        } else {
          this.counters.errors++;
          this.#setConnected(false);
          if (this.#o.onError) this.#safe(() => this.#o.onError?.(error), 'onError');
          else this.#warn(`${this.name}: ${error.message}`);
          const retryAfter = error instanceof KubeApiError ? error.retryAfterMs : undefined;
          delay = this.#backoff.next(retryAfter);
        }
      } finally {
        this.#endList(false);
      }
      if (delay > 0) {
        try {
          await sleep(delay, undefined, { signal });
        } catch {
          break;
        }
      }
    }
  }

  #relistDelay(): number {
    if (this.#quickRelist) {
      this.#quickRelist = false;
      return 0;
    }
    return this.#backoff.next();
  }

  /** Our version is ahead of the server's: relist from a quorum read, after the backoff (and at least Retry-After). */
  #tooLarge(err: ResourceVersionTooLargeError): number {
    this.#needList = true;
    this.#rvUnavailable = true;
    this.#warn(`${this.name}: ${err.message}; relisting`);
    return this.#backoff.next(err.retryAfterMs);
  }

  #beginList(): void {
    if (this.#listOpen) return;
    this.#listOpen = true;
    if (this.#synced) this.counters.relists++;
    this.#safe(() => this.#o.onListBegin?.(), 'onListBegin');
  }

  #endList(completed: boolean): void {
    if (!this.#listOpen) return;
    this.#listOpen = false;
    this.#safe(() => this.#o.onListEnd?.(completed), 'onListEnd');
  }

  /**
   * The first page's query, as client-go's reflector asks it (API Concepts › Resource versions):
   * `resourceVersion=0` (any version, from the watch cache) at first, then NotOlderThan the last
   * version seen without a limit (the cache serves only unpaged lists for a version other than
   * 0), and a paged quorum read with no version once ours is unavailable.
   */
  #firstPageQuery(consistent: boolean): Query {
    const limit = this.#o.pageSize ?? 500;
    if (consistent) return { limit, ...this.#selectors() };
    if (!this.#rv) return { resourceVersion: '0', resourceVersionMatch: 'NotOlderThan', limit, ...this.#selectors() };
    return {
      resourceVersion: this.#rv,
      resourceVersionMatch: 'NotOlderThan',
      limit: this.#paginated ? limit : undefined,
      ...this.#selectors(),
    };
  }

  /** Page through the collection into a new map; swap it in only once the last page arrived. */
  async #list(): Promise<void> {
    const signal = this.#abort.signal;
    this.#beginList();
    let consistent = this.#rvUnavailable || this.#pagedOnly;
    let next = new Map<string, T>();
    let cont = '';
    let restarts = 0;
    for (;;) {
      const query: Query = cont
        ? { limit: this.#o.pageSize ?? 500, continue: cont, ...this.#selectors() }
        : this.#firstPageQuery(consistent);
      let body: unknown;
      const into = next;
      try {
        // Items are projected as the body arrives; a list that fails drops `next` whole.
        body = await this.#o.client.listItems(
          this.path,
          query,
          (item) => {
            const p = this.#project(item);
            if (p) into.set(p.key, p.value);
          },
          { signal },
        );
      } catch (err) {
        if (cont && err instanceof KubeApiError && err.status === 410) {
          // The continue token outlived its snapshot: start over from a fresh map.
          next = new Map();
          cont = '';
          if (restarts++ > 0) await sleep(this.#backoff.next(), undefined, { signal });
          continue;
        }
        const tooLarge = err instanceof KubeApiError ? tooLargeError(this.path, err.body, err.retryAfterMs) : undefined;
        if (tooLarge) throw tooLarge;
        if (!cont && !consistent && err instanceof ResponseTooLargeError) {
          // The cache ignores limit; a collection this big can only be read in pages.
          this.#pagedOnly = true;
          consistent = true;
          next = new Map();
          this.#warn(`${this.name}: ${err.message}; listing in pages from etcd from now on`);
          continue;
        }
        if (
          !cont &&
          !consistent &&
          err instanceof KubeApiError &&
          (err.status === 410 || err.status === 400 || err.status === 422)
        ) {
          // Our version is compacted away, or the server refuses the version parameters: read from etcd (client-go does the same at once).
          consistent = true;
          this.#rvUnavailable = true;
          next = new Map();
          continue;
        }
        throw this.#forbidden(err, 'list');
      }
      this.#setConnected(true);
      if (!isList(body)) throw new Error(`${this.path}: LIST answer has no items array`);
      const meta = listMeta(body);

      if (meta.continue) {
        this.#paginated = true;
        cont = meta.continue;
        continue;
      }
      this.counters.lists++;
      this.#rvUnavailable = false;
      this.#replace(next, meta.resourceVersion ?? '');
      return;
    }
  }

  /** Swap a complete list in: one synchronous pass of deletes, adds and updates, so readers see the old state or the new. */
  #replace(next: Map<string, T>, rv: string): void {
    for (const [key, old] of this.#store) {
      if (!next.has(key)) {
        this.#store.delete(key);
        this.#safe(() => this.#o.onDelete?.(key, old), 'onDelete');
      }
    }
    for (const [key, value] of next) this.#upsert(key, value);
    this.#rv = rv;
    this.#needList = false;
    this.#markCurrent();
    this.#endList(true);
    if (!this.#synced) {
      this.#synced = true;
      this.#safe(() => this.#o.onSynced?.(), 'onSynced');
      for (const w of this.#syncWaiters.splice(0)) w();
    }
  }

  /** A 403 names the verb and the resource RBAC must grant; anything else passes through. */
  #forbidden(err: unknown, verb: 'list' | 'watch'): unknown {
    if (!(err instanceof KubeApiError) || err.status !== 403) return err;
    const parts = this.path.split('/');
    const group = parts[1] === 'apis' ? parts[2] : '';
    const resource = `${parts.at(-1) ?? this.path}${group ? `.${group}` : ''}`;
    return new ForbiddenError(verb, resource, this.path, err.body?.message);
  }

  /** A watch; with `initial`, a WatchList whose first events are the state, swapped in at their closing bookmark. */
  async #watch(initial: boolean): Promise<WatchEnd> {
    const [lo, hi] = this.#o.watchTimeoutSeconds ?? [300, 600];
    const timeoutSeconds = Math.round(lo + Math.random() * (hi - lo));
    const query: Query = initial
      ? {
          watch: 1,
          sendInitialEvents: true,
          allowWatchBookmarks: true,
          resourceVersionMatch: 'NotOlderThan',
          resourceVersion: this.#rvUnavailable ? undefined : this.#rv,
          timeoutSeconds,
          ...this.#selectors(),
        }
      : { watch: 1, resourceVersion: this.#rv, allowWatchBookmarks: true, timeoutSeconds, ...this.#selectors() };
    const started = Date.now();
    let events = 0;
    const pending: InitialEvents<T> | undefined = initial ? { items: new Map(), done: false } : undefined;
    if (initial) this.#beginList();
    this.counters.watches++;
    try {
      await this.#o.client.streamLines(this.path, query, {
        signal: this.#abort.signal,
        idleTimeoutMs: this.#o.idleTimeoutMs ?? timeoutSeconds * 1000 + WATCH_END_GRACE_MS,
        onOpen: () => this.#setConnected(true),
        onLine: (line) => {
          this.#handleLine(line, pending);
          events++;
        },
      });
    } catch (err) {
      if (err instanceof ResourceExpiredError) return { kind: 'expired', events };
      if (err instanceof ResourceVersionTooLargeError) return { kind: 'tooLarge', error: err };
      const tooLarge = err instanceof KubeApiError ? tooLargeError(this.path, err.body, err.retryAfterMs) : undefined;
      if (tooLarge) return { kind: 'tooLarge', error: tooLarge };
      if (err instanceof KubeApiError && err.status === 410) return { kind: 'expired', events };
      if (pending && !pending.done && refusesWatchList(err)) return { kind: 'watchListRefused', error: err as Error };
      throw this.#forbidden(err, 'watch');
    }
    if (pending && !pending.done) {
      // A server that ignores sendInitialEvents never sends the closing bookmark: list instead.
      return { kind: 'watchListRefused', error: new Error('the stream ended before its initial-events-end bookmark') };
    }
    return { kind: 'closed', events, durationMs: Date.now() - started };
  }

  /** Apply one watch line. Throws to end the stream: 410 → relist, other ERROR/garbage → re-watch from the last RV. */
  #handleLine(line: string, initial: InitialEvents<T> | undefined): void {
    let event: unknown;
    try {
      event = JSON.parse(line);
    } catch {
      throw new WatchDecodeError(`${this.path}: watch sent a line that is not JSON: ${line.slice(0, 120)}`);
    }
    if (!isWatchEvent(event)) {
      // Valid JSON, so not a transmission error: a replay would repeat it forever. Skip it.
      this.counters.malformed++;
      this.#warn(`${this.path}: skipping malformed watch event: ${line.slice(0, 200)}`);
      return;
    }
    const obj = event.object;
    if (event.type === 'ERROR') {
      const status: Status | undefined = isStatus(obj) ? obj : undefined;
      const tooLarge = tooLargeError(this.path, status, undefined);
      if (tooLarge) throw tooLarge;
      if (status?.code === 410 || status?.reason === 'Expired' || status?.reason === 'Gone') {
        throw new ResourceExpiredError(`${this.path}: ${status.message ?? 'resourceVersion expired'}`);
      }
      const error = new Error(
        `${this.path}: watch ERROR event: ${status?.message ?? JSON.stringify(obj).slice(0, 200)} (code ${status?.code ?? '?'})`,
      );
      if (initial && !initial.done && (status?.code === 400 || status?.code === 422))
        throw new KubeApiError(status.code, this.path, status, undefined);
      throw error;
    }
    this.counters.events++;
    if (initial && !initial.done) {
      this.#collectInitial(event.type, obj, initial);
      return;
    }
    if (event.type !== 'BOOKMARK') {
      if (event.type === 'DELETED') this.#applyDelete(obj);
      else {
        const p = this.#project(obj);
        if (p) this.#upsert(p.key, p.value);
        else this.#dropStale(obj);
      }
    }
    const rv = objectMeta(obj)?.resourceVersion;
    if (rv) this.#rv = rv;
    this.#markCurrent();
    this.#backoff.reset();
    this.#quickRelist = true;
  }

  /** A WatchList's initial events go aside; the bookmark annotated initial-events-end swaps them in. */
  #collectInitial(type: string, obj: unknown, initial: InitialEvents<T>): void {
    if (type === 'BOOKMARK') {
      const meta = objectMeta(obj);
      if (meta?.annotations?.[INITIAL_EVENTS_END] !== 'true') return;
      initial.done = true;
      this.counters.lists++;
      this.#rvUnavailable = false;
      this.#replace(initial.items, meta.resourceVersion ?? this.#rv);
      this.#backoff.reset();
      this.#quickRelist = true;
      return;
    }
    if (type === 'DELETED') {
      const key = this.#safeProject(obj)?.key ?? this.#keyOf(obj);
      if (key !== null) initial.items.delete(key);
      return;
    }
    const p = this.#project(obj);
    if (p) initial.items.set(p.key, p.value);
    else {
      const key = this.#keyOf(obj);
      if (key !== null) initial.items.delete(key);
    }
  }

  #applyDelete(obj: unknown): void {
    const key = this.#safeProject(obj)?.key ?? this.#keyOf(obj);
    if (key === null) {
      this.#warn(`${this.path}: ignoring DELETED event for an object without a name: ${describeObject(obj)}`);
      return;
    }
    const old = this.#store.get(key);
    if (old === undefined && !this.#store.has(key)) return;
    this.#store.delete(key);
    this.#safe(() => this.#o.onDelete?.(key, old as T), 'onDelete');
  }

  /** An update made the object malformed: its old entry no longer describes it, so drop it. */
  #dropStale(obj: unknown): void {
    const key = this.#keyOf(obj);
    if (key === null || !this.#store.has(key)) return;
    const old = this.#store.get(key) as T;
    this.#store.delete(key);
    this.#safe(() => this.#o.onDelete?.(key, old), 'onDelete');
  }

  #upsert(key: string, value: T): void {
    if (!this.#store.has(key)) {
      this.#store.set(key, value);
      this.#safe(() => this.#o.onAdd?.(key, value), 'onAdd');
      return;
    }
    const old = this.#store.get(key) as T;
    if (this.#equals(old, value)) return;
    this.#store.set(key, value);
    this.#safe(() => this.#o.onUpdate?.(key, old, value), 'onUpdate');
  }

  #project(obj: unknown): Projected<T> | null {
    const p = this.#safeProject(obj);
    if (!p) {
      this.counters.malformed++;
      this.#warn(`${this.path}: skipping malformed object ${describeObject(obj)}`);
    }
    return p;
  }

  #safeProject(obj: unknown): Projected<T> | null {
    try {
      const p = this.#o.project(obj);
      return p && typeof p.key === 'string' ? p : null;
    } catch {
      return null; // a projection that throws on bad input is treated like one that returns null
    }
  }

  #selectors(): Query {
    return { labelSelector: this.#o.labelSelector, fieldSelector: this.#o.fieldSelector };
  }

  #markCurrent(): void {
    this.#lastSyncTime = Date.now();
  }

  #setConnected(connected: boolean): void {
    if (this.#connected === connected) return;
    this.#connected = connected;
    this.#safe(() => this.#o.onConnectionChange?.(connected), 'onConnectionChange');
  }

  /** A throwing handler is a bug in the caller; it must not kill the watch loop. */
  #safe(fn: () => void, what: string): void {
    try {
      fn();
    } catch (err) {
      this.#warn(`${this.name}: ${what} handler threw: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
}

function isExpired(err: Error): boolean {
  return err instanceof ResourceExpiredError || (err instanceof KubeApiError && err.status === 410);
}

/**
 * The forms of "too large resource version" (API Concepts › Resource versions › Unavailable
 * resource versions), as client-go tells them: the `ResourceVersionTooLarge` cause (1.18.6+),
 * a Timeout whose cause says "Too large resource version" (1.17.0–1.18.5), or only the message (older).
 */
function tooLargeError(
  path: string,
  status: Status | undefined,
  retryAfterMs: number | undefined,
): ResourceVersionTooLargeError | undefined {
  if (!status) return undefined;
  const causes = Array.isArray(status.details?.causes) ? status.details.causes : [];
  const match =
    causes.some((c) => c?.reason === 'ResourceVersionTooLarge' || c?.message === 'Too large resource version') ||
    (typeof status.message === 'string' && status.message.includes('Too large resource version'));
  if (!match) return undefined;
  const fromBody = status.details?.retryAfterSeconds;
  const retry = retryAfterMs ?? (typeof fromBody === 'number' && fromBody >= 0 ? fromBody * 1000 : undefined);
  return new ResourceVersionTooLargeError(
    `${path}: ${status.message ?? 'Too large resource version'} (HTTP ${status.code ?? '?'})`,
    retry,
  );
}

/** How a server without WatchList answers `sendInitialEvents`: 422 Invalid (1.27+, gate off) or 400 (older). */
function refusesWatchList(err: unknown): boolean {
  return err instanceof KubeApiError && (err.status === 400 || err.status === 422);
}
