// A test Kubernetes API server that speaks the real list/watch protocol over HTTP(S) on
// 127.0.0.1: paginated LIST with expiring continue tokens, a watch cache's resourceVersion
// semantics (RV=0 ignores limit, NotOlderThan, "Too large resource version"), WATCH with replay
// from an event log, the streaming WatchList, bookmarks, 410 Gone (HTTP or in-stream), timeouts,
// writes, auth, RBAC denials with Kubernetes' Status bodies, and fault knobs. It stores plain
// JSON objects; it validates only what the real server would reject. Each behaviour follows the
// Kubernetes documentation, "API Concepts" (https://kubernetes.io/docs/reference/using-api/api-concepts/).
import { randomBytes, randomUUID } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { TLSSocket } from 'node:tls';
import { isDeepStrictEqual } from 'node:util';
import { isRecord } from '../../src/kube/types.js';
import { makeTestPki, type TestPki } from './kubeapi-pki.js';
import { parseFieldSelector, parseLabelSelector, SelectorError, type Matcher } from './kubeapi-selectors.js';

export interface ResourceType {
  group: string;
  version: string;
  plural: string;
  kind: string;
  namespaced: boolean;
}

export const RESOURCE_TYPES: readonly ResourceType[] = [
  { group: '', version: 'v1', plural: 'services', kind: 'Service', namespaced: true },
  { group: '', version: 'v1', plural: 'pods', kind: 'Pod', namespaced: true },
  { group: '', version: 'v1', plural: 'namespaces', kind: 'Namespace', namespaced: false },
  { group: '', version: 'v1', plural: 'nodes', kind: 'Node', namespaced: false },
  { group: '', version: 'v1', plural: 'configmaps', kind: 'ConfigMap', namespaced: true },
  { group: '', version: 'v1', plural: 'endpoints', kind: 'Endpoints', namespaced: true },
  { group: 'discovery.k8s.io', version: 'v1', plural: 'endpointslices', kind: 'EndpointSlice', namespaced: true },
  { group: 'apps', version: 'v1', plural: 'deployments', kind: 'Deployment', namespaced: true },
];

export type KubeObject = Record<string, unknown> & { metadata: Record<string, unknown> };

type EventType = 'ADDED' | 'MODIFIED' | 'DELETED';

interface LoggedEvent {
  rv: number;
  type: EventType;
  rt: ResourceType;
  object: KubeObject;
  /** State before this event (MODIFIED/DELETED), to turn selector transitions into ADDED/DELETED. */
  previous?: KubeObject;
}

interface Watch {
  rt: ResourceType;
  namespace?: string;
  matches: Matcher;
  bookmarks: boolean;
  res: http.ServerResponse;
  /** Stalled: the connection stays open but nothing is ever written to it again. */
  dead: boolean;
  timeout?: NodeJS.Timeout;
}

interface Snapshot {
  rv: number;
  items: KubeObject[];
}

interface FailRule {
  remaining: number;
  status: number;
  retryAfter?: number;
  match?: (r: RequestInfo) => boolean;
}

export interface RequestInfo {
  method: string;
  path: string;
  query: Record<string, string>;
  /** LIST, WATCH, GET (one object), WRITE, OTHER. */
  verb: 'list' | 'watch' | 'get' | 'write' | 'other';
  status: number;
  /** Date.now() at arrival. */
  time: number;
  authorization?: string;
  userAgent?: string;
}

export interface KubeApiServerOptions {
  /** Serve HTTPS with a freshly generated CA (see `pki`). */
  tls?: boolean;
  /** With tls: accept a client certificate signed by the test CA as authentication. */
  clientCertAuth?: boolean;
  /** Require `Authorization: Bearer <token>` (or a client cert when clientCertAuth); 401 otherwise. */
  token?: string;
  /** BOOKMARK interval for watches that allow them (ms). Default 60 000. */
  bookmarkIntervalMs?: number;
  /** Events kept for watch replay; older resourceVersions get 410. Default 10 000. */
  eventWindow?: number;
  /** How an expired (or too large) watch resourceVersion is reported: in-stream ERROR event (default) or HTTP status. */
  expiredWatch?: 'event' | 'status';
  port?: number;
  /**
   * A watch cache in front of storage, as kube-apiserver has by default: RV=0 lists and unpaged
   * NotOlderThan lists come from it, whole (limit ignored). false: every list is read from
   * "etcd" and paged (`--watch-cache=false`). Default true.
   */
  watchCache?: boolean;
  /** Serve `sendInitialEvents=true` watches (the WatchList feature gate: on by default in 1.32 and from 1.34). Default false, as 1.27–1.31 and 1.33. */
  watchList?: boolean;
  /** How long a request for a resourceVersion the server does not have yet waits before 504 (the real cache waits 3 s). Default 3000. */
  tooLargeWaitMs?: number;
  /**
   * The body of a "too large resource version" answer, by server version: `cause` (1.18.6+, the
   * ResourceVersionTooLarge cause), `legacy-cause` (1.17.0–1.18.5), `message` (before 1.17). Default `cause`.
   */
  tooLargeForm?: 'cause' | 'legacy-cause' | 'message';
  /** The user RBAC denials name. Default the CoreDNS ServiceAccount. */
  user?: string;
}

const GONE_MESSAGE = 'too old resource version';

export class KubeApiServer {
  pki?: TestPki;
  port = 0;
  /** Accepted bearer token; change it to simulate rotation. */
  token: string | undefined;
  expiredWatch: 'event' | 'status';
  bookmarkIntervalMs: number;
  watchList: boolean;
  tooLargeForm: 'cause' | 'legacy-cause' | 'message';
  /** Delay before each LIST answer with a `continue` token or after one (ms): a slow, paged list. */
  pageDelayMs = 0;
  /** A WatchList's connection is cut after this many initial events (undefined: never). */
  cutInitialEventsAfter: number | undefined;
  readonly requestLog: RequestInfo[] = [];
  /** Called for every request before it is served (after logging): a hook to act between two requests. */
  onRequest?: (r: RequestInfo) => void;

  readonly #opts: KubeApiServerOptions;
  #server: http.Server;
  #objects = new Map<string, Map<string, KubeObject>>();
  #log: LoggedEvent[] = [];
  #rv = 1;
  /** Watches and continue tokens from a resourceVersion below this get 410. */
  #minValidRv = 0;
  #watches = new Set<Watch>();
  #snapshots = new Map<string, Snapshot>();
  #failRules: FailRule[] = [];
  #stalled = false;
  #sockets = new Set<Socket>();
  #bookmarkTimer?: NodeJS.Timeout;
  #listening = false;
  /** `verb resource` pairs RBAC denies, e.g. `list services`. */
  #denied = new Set<string>();

  private constructor(opts: KubeApiServerOptions, pki: TestPki | undefined) {
    this.#opts = opts;
    this.pki = pki;
    this.token = opts.token;
    this.expiredWatch = opts.expiredWatch ?? 'event';
    this.bookmarkIntervalMs = opts.bookmarkIntervalMs ?? 60_000;
    this.watchList = opts.watchList ?? false;
    this.tooLargeForm = opts.tooLargeForm ?? 'cause';
    const handler = (req: http.IncomingMessage, res: http.ServerResponse) => this.#handle(req, res);
    this.#server = pki
      ? https.createServer(
          {
            key: pki.serverKey,
            cert: pki.serverCert,
            ca: pki.ca,
            requestCert: !!opts.clientCertAuth,
            rejectUnauthorized: false,
          },
          handler,
        )
      : http.createServer(handler);
    this.#server.on(pki ? 'secureConnection' : 'connection', (s: Socket) => {
      this.#sockets.add(s);
      s.on('close', () => this.#sockets.delete(s));
    });
    for (const rt of RESOURCE_TYPES) this.#objects.set(rt.plural, new Map());
  }

  static async create(opts: KubeApiServerOptions = {}): Promise<KubeApiServer> {
    const pki = opts.tls ? await makeTestPki() : undefined;
    const server = new KubeApiServer(opts, pki);
    server.port = opts.port ?? 0;
    await server.start();
    return server;
  }

  /** `http://127.0.0.1:PORT` or `https://…`. */
  get url(): string {
    return `${this.pki ? 'https' : 'http'}://127.0.0.1:${this.port}`;
  }

  get resourceVersion(): number {
    return this.#rv;
  }

  get listRequests(): number {
    return this.requestLog.filter((r) => r.verb === 'list').length;
  }

  get watchRequests(): number {
    return this.requestLog.filter((r) => r.verb === 'watch').length;
  }

  /** Open watch streams (including stalled ones). */
  get activeWatches(): number {
    return this.#watches.size;
  }

  /** Requests whose path starts with `pathPrefix`, optionally of one verb. */
  requestCount(pathPrefix = '/', verb?: RequestInfo['verb']): number {
    return this.requestLog.filter((r) => r.path.startsWith(pathPrefix) && (!verb || r.verb === verb)).length;
  }

  /** Listen (again, on the same port after stop()). */
  async start(): Promise<void> {
    if (this.#listening) return;
    await new Promise<void>((ok, fail) => {
      this.#server.once('error', fail);
      this.#server.listen(this.port, '127.0.0.1', () => {
        this.#server.off('error', fail);
        ok();
      });
    });
    this.port = (this.#server.address() as AddressInfo).port;
    this.#listening = true;
    if (this.bookmarkIntervalMs > 0) {
      this.#bookmarkTimer = setInterval(() => this.sendBookmarks(), this.bookmarkIntervalMs);
      this.#bookmarkTimer.unref();
    }
  }

  /** An outage: stop listening and cut every connection (watches included). State is kept. */
  async stop(): Promise<void> {
    if (!this.#listening) return;
    this.#listening = false;
    clearInterval(this.#bookmarkTimer);
    for (const w of this.#watches) clearTimeout(w.timeout);
    this.#watches.clear();
    const closed = new Promise<void>((ok) => this.#server.close(() => ok()));
    for (const s of this.#sockets) s.destroy();
    this.#server.closeAllConnections();
    await closed;
  }

  /** Final teardown: stop and remove the generated PKI. */
  async close(): Promise<void> {
    await this.stop();
    await this.pki?.remove();
  }

  // ---- direct JS API ----

  /** Create or replace an object (unconditionally); returns the stored copy with its new resourceVersion. */
  apply(obj: Record<string, unknown>): KubeObject {
    const rt = this.#typeOf(obj.kind);
    const copy = structuredClone(obj);
    if (!isKubeObject(copy) || typeof copy.metadata.name !== 'string')
      throw new Error('apply: metadata.name is required');
    const meta = copy.metadata;
    if (rt.namespaced) meta.namespace = typeof meta.namespace === 'string' ? meta.namespace : 'default';
    else delete meta.namespace;
    const key = keyFor(rt, typeof meta.namespace === 'string' ? meta.namespace : undefined, copy.metadata.name);
    const existing = this.#objects.get(rt.plural)?.get(key);
    return existing ? this.#update(rt, key, copy, existing) : this.#create(rt, key, copy);
  }

  /** Delete; returns false if it did not exist. */
  remove(kind: string, namespace: string | undefined, name: string): boolean {
    const rt = this.#typeOf(kind);
    const key = keyFor(rt, namespace, name);
    const existing = this.#objects.get(rt.plural)?.get(key);
    if (!existing) return false;
    this.#delete(rt, key, existing);
    return true;
  }

  get(kind: string, namespace: string | undefined, name: string): KubeObject | undefined {
    const rt = this.#typeOf(kind);
    const obj = this.#objects.get(rt.plural)?.get(keyFor(rt, namespace, name));
    return obj && structuredClone(obj);
  }

  /** Number of stored objects of a kind. */
  count(kind: string): number {
    return this.#objects.get(this.#typeOf(kind).plural)?.size ?? 0;
  }

  /** Drop the event log and all continue tokens: every resourceVersion issued so far now gets 410. */
  compact(): void {
    this.#rv++; // the new current RV stays valid, so a fresh LIST can be watched from
    this.#minValidRv = this.#rv;
    this.#log = [];
    this.#snapshots.clear();
  }

  /**
   * An etcd restore from a backup: the store's revision goes back to `rv` (events after it are
   * forgotten), so a client holding a later resourceVersion asks for one the server does not have.
   */
  rewindResourceVersion(rv: number): void {
    this.#rv = rv;
    this.#log = this.#log.filter((e) => e.rv <= rv);
    this.#snapshots.clear();
  }

  // ---- fault knobs ----

  /** RBAC: deny `verb` (list, watch, get) on `resource` (the plural, e.g. services) until allow(). */
  deny(verb: string, resource: string): void {
    this.#denied.add(`${verb} ${resource}`);
  }

  allow(verb: string, resource: string): void {
    this.#denied.delete(`${verb} ${resource}`);
  }

  /** The next `n` requests (matching `match`, if given) fail with `status` (+ Retry-After seconds). */
  failNext(n: number, status: number, retryAfter?: number, match?: string | ((r: RequestInfo) => boolean)): void {
    const m = typeof match === 'string' ? (r: RequestInfo) => r.path.startsWith(match) : match;
    this.#failRules.push({ remaining: n, status, retryAfter, match: m });
  }

  /** Forget pending failNext() rules. */
  clearFailures(): void {
    this.#failRules = [];
  }

  /** End every watch cleanly (the terminating chunk is sent), as the server does at timeoutSeconds. */
  closeAllWatches(): number {
    const n = this.#watches.size;
    for (const w of [...this.#watches]) this.#endWatch(w);
    return n;
  }

  /** While on, watches (open or new) get nothing, not even an end: a half-open connection. They stay dead after. */
  stallWatches(on: boolean): void {
    this.#stalled = on;
    if (on) for (const w of this.#watches) w.dead = true;
  }

  /** Write half of an event line to every live watch, then destroy its socket. */
  cutMidLine(): number {
    let n = 0;
    for (const w of [...this.#watches]) {
      if (w.dead) continue;
      n++;
      const line = JSON.stringify({
        type: 'MODIFIED',
        object: {
          kind: w.rt.kind,
          apiVersion: apiVersion(w.rt),
          metadata: { name: 'cut-mid-line', namespace: 'default', resourceVersion: String(this.#rv + 1) },
        },
      });
      const socket = w.res.socket;
      this.#watches.delete(w);
      clearTimeout(w.timeout);
      w.res.write(line.slice(0, Math.floor(line.length / 2)), () => socket?.destroy());
    }
    return n;
  }

  /** Write an arbitrary line (plus `\n`) to every live watch, e.g. garbage or a hand-made event. */
  writeRawToWatches(line: string): void {
    for (const w of this.#watches) if (!w.dead) w.res.write(`${line}\n`);
  }

  /** Send a BOOKMARK at the current resourceVersion to every live watch that allows them. */
  sendBookmarks(): void {
    for (const w of this.#watches) {
      if (w.dead || !w.bookmarks) continue;
      this.#bookmark(w);
    }
  }

  #bookmark(w: Watch): void {
    this.#writeEvent(w, 'BOOKMARK', {
      kind: w.rt.kind,
      apiVersion: apiVersion(w.rt),
      metadata: { resourceVersion: String(this.#rv) },
    });
  }

  // ---- storage and events ----

  #create(rt: ResourceType, key: string, obj: KubeObject): KubeObject {
    const rv = ++this.#rv;
    obj.kind = rt.kind;
    obj.apiVersion = apiVersion(rt);
    obj.metadata.uid = randomUUID();
    obj.metadata.creationTimestamp = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
    obj.metadata.resourceVersion = String(rv);
    this.#objects.get(rt.plural)?.set(key, obj);
    this.#record({ rv, type: 'ADDED', rt, object: obj });
    return structuredClone(obj);
  }

  #update(rt: ResourceType, key: string, obj: KubeObject, existing: KubeObject): KubeObject {
    obj.kind = rt.kind;
    obj.apiVersion = apiVersion(rt);
    obj.metadata.uid = existing.metadata.uid;
    obj.metadata.creationTimestamp = existing.metadata.creationTimestamp;
    obj.metadata.resourceVersion = existing.metadata.resourceVersion;
    // The real server does not bump the resourceVersion (or notify watchers) for a no-op update.
    if (isDeepStrictEqual(obj, existing)) return structuredClone(existing);
    const rv = ++this.#rv;
    obj.metadata.resourceVersion = String(rv);
    this.#objects.get(rt.plural)?.set(key, obj);
    this.#record({ rv, type: 'MODIFIED', rt, object: obj, previous: existing });
    return structuredClone(obj);
  }

  #delete(rt: ResourceType, key: string, existing: KubeObject): KubeObject {
    const rv = ++this.#rv;
    this.#objects.get(rt.plural)?.delete(key);
    const last = structuredClone(existing);
    last.metadata.resourceVersion = String(rv);
    this.#record({ rv, type: 'DELETED', rt, object: last, previous: existing });
    return structuredClone(last);
  }

  #record(ev: LoggedEvent): void {
    this.#log.push(ev);
    const window = this.#opts.eventWindow ?? 10_000;
    while (this.#log.length > window) {
      const dropped = this.#log.shift();
      if (dropped) this.#minValidRv = Math.max(this.#minValidRv, dropped.rv);
    }
    for (const [id, s] of this.#snapshots) if (s.rv < this.#minValidRv) this.#snapshots.delete(id);
    for (const w of this.#watches) this.#deliver(w, ev);
  }

  /** Send `ev` to `w` as the real server would: selector transitions become ADDED/DELETED. */
  #deliver(w: Watch, ev: LoggedEvent): void {
    if (w.dead || ev.rt !== w.rt) return;
    if (w.namespace !== undefined && ev.object.metadata.namespace !== w.namespace) return;
    const now = ev.type !== 'DELETED' && w.matches(ev.object);
    const before = ev.previous !== undefined && w.matches(ev.previous);
    let type: EventType;
    if (ev.type === 'DELETED') {
      if (!before) return;
      type = 'DELETED';
    } else if (now && before) type = 'MODIFIED';
    else if (now) type = 'ADDED';
    else if (before) type = 'DELETED';
    else return;
    this.#writeEvent(w, type, ev.object);
  }

  #writeEvent(w: Watch, type: string, object: unknown): void {
    w.res.write(`${JSON.stringify({ type, object })}\n`);
  }

  #endWatch(w: Watch): void {
    clearTimeout(w.timeout);
    this.#watches.delete(w);
    w.res.end();
  }

  #typeOf(kind: unknown): ResourceType {
    const rt = RESOURCE_TYPES.find((t) => t.kind === kind || t.plural === kind);
    if (!rt) throw new Error(`test API server: unknown kind ${String(kind)}`);
    return rt;
  }

  // ---- HTTP ----

  #handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const url = new URL(req.url ?? '/', 'http://x');
    const query = Object.fromEntries(url.searchParams);
    const method = req.method ?? 'GET';
    const route = parseRoute(url.pathname);
    const isWatch = query.watch === '1' || query.watch === 'true';
    const verb: RequestInfo['verb'] =
      !route || route.kind === 'meta'
        ? 'other'
        : method !== 'GET'
          ? 'write'
          : route.kind === 'collection'
            ? isWatch
              ? 'watch'
              : 'list'
            : 'get';
    const info: RequestInfo = {
      method,
      path: url.pathname,
      query,
      verb,
      status: 0,
      time: Date.now(),
      authorization: req.headers.authorization,
      userAgent: req.headers['user-agent'],
    };
    this.requestLog.push(info);
    this.onRequest?.(info);
    const send = (status: number, body: unknown, headers: http.OutgoingHttpHeaders = {}) => {
      info.status = status;
      res.writeHead(status, { 'Content-Type': 'application/json', 'Cache-Control': 'no-cache, private', ...headers });
      res.end(JSON.stringify(body));
    };
    const fail = (status: number, message: string, retryAfter?: number) =>
      send(
        status,
        statusBody(status, message, retryAfter),
        retryAfter !== undefined ? { 'Retry-After': String(retryAfter) } : {},
      );

    if (!this.#authorized(req)) return fail(401, 'Unauthorized');
    if (route && route.kind !== 'meta' && this.#denied.has(`${verb} ${route.rt.plural}`)) {
      info.status = 403;
      res.writeHead(403, { 'Content-Type': 'application/json', 'Cache-Control': 'no-cache, private' });
      return void res.end(
        JSON.stringify(
          forbiddenBody(
            this.#opts.user ?? 'system:serviceaccount:kube-system:coredns',
            verb,
            route.rt,
            route.namespace,
          ),
        ),
      );
    }
    const rule = this.#failRules.find((r) => r.remaining > 0 && (!r.match || r.match(info)));
    if (rule) {
      rule.remaining--;
      this.#failRules = this.#failRules.filter((r) => r.remaining > 0);
      return fail(rule.status, `injected failure ${rule.status}`, rule.retryAfter);
    }
    if (!route) return fail(404, 'the server could not find the requested resource');
    if (route.kind === 'meta') {
      if (route.what === 'version')
        return send(200, { major: '1', minor: '30', gitVersion: 'v1.30.0-clusterdns-test', platform: 'linux/amd64' });
      info.status = 200;
      res.writeHead(200, { 'Content-Type': 'text/plain' });
      return void res.end('ok');
    }

    void readJson(req).then(
      (body) => {
        try {
          if (route.kind === 'collection') {
            if (method === 'GET')
              return isWatch ? this.#watch(route, query, res, info, fail) : this.#list(route, query, send, fail);
            if (method === 'POST') return this.#post(route, body, send, fail);
          } else if (route.kind === 'object') {
            if (method === 'GET') return this.#getOne(route, send, fail);
            if (method === 'PUT') return this.#put(route, body, send, fail);
            if (method === 'PATCH') return this.#patch(route, body, req.headers['content-type'], send, fail);
            if (method === 'DELETE') return this.#deleteOne(route, send, fail);
          } else if (route.kind === 'scale') {
            if (method === 'GET' || method === 'PUT' || method === 'PATCH')
              return this.#scale(route, method, body, req.headers['content-type'], send, fail);
          }
          fail(405, `method ${method} not allowed here`);
        } catch (err) {
          if (err instanceof SelectorError) fail(400, err.message);
          else fail(500, `test API server bug: ${err instanceof Error ? err.stack : String(err)}`);
        }
      },
      (err: Error) => fail(400, `invalid JSON body: ${err.message}`),
    );
  }

  #authorized(req: http.IncomingMessage): boolean {
    if (this.token === undefined && !this.#opts.clientCertAuth) return true;
    if (this.token !== undefined && req.headers.authorization === `Bearer ${this.token}`) return true;
    if (this.#opts.clientCertAuth) {
      const sock = req.socket;
      if (sock instanceof TLSSocket && sock.authorized && Object.keys(sock.getPeerCertificate()).length > 0)
        return true;
    }
    return false;
  }

  /**
   * LIST as kube-apiserver answers it (API Concepts › Resource versions › Semantics for get and
   * list; › Retrieving large results sets in chunks): RV unset is a paged read from storage;
   * RV=0 is served whole from the watch cache, limit ignored (as most versions do: the cache
   * cannot page; the client follows `continue` should a server page it); RV=N NotOlderThan without a limit
   * is served whole from the cache once it has N (504 "Too large resource version" after a
   * short wait if it never gets there); with a limit it goes to storage, which pages.
   */
  #list(route: CollectionRoute, query: Record<string, string>, send: Send, fail: Fail): void {
    const limit = query.limit ? Number(query.limit) : 0;
    if (!Number.isInteger(limit) || limit < 0) return fail(400, `invalid limit "${query.limit}"`);
    const rvParam = query.resourceVersion ?? '';
    const match = query.resourceVersionMatch ?? '';
    const invalid = listOptionsInvalid(query, false, this.watchList);
    if (invalid) return send(422, invalid);
    if (query.continue && rvParam !== '' && rvParam !== '0')
      return fail(400, 'specifying resource version is not allowed when using continue');
    const wanted = rvParam === '' || rvParam === '0' ? undefined : Number(rvParam);
    if (wanted !== undefined && !Number.isInteger(wanted)) return fail(400, `invalid resourceVersion "${rvParam}"`);
    const cached =
      this.#opts.watchCache !== false &&
      !query.continue &&
      (rvParam === '0' || (wanted !== undefined && !limit && match !== 'Exact'));
    if (wanted !== undefined && match === 'Exact' && wanted < this.#minValidRv) {
      return fail(410, 'The resourceVersion for the provided list is too old.');
    }
    const serve = () => {
      if (wanted !== undefined && wanted > this.#rv)
        return send(504, tooLargeBody(wanted, this.#rv, this.tooLargeForm), { 'Retry-After': '1' });
      this.#serveList(route, query, cached ? 0 : limit, send, fail);
    };
    // The cache waits for a version it does not have yet; storage (etcd) answers at once.
    if (wanted !== undefined && wanted > this.#rv && cached) this.#waitForRv(wanted, serve);
    else serve();
  }

  /** Calls `then` once the store reaches `rv`, or after tooLargeWaitMs. */
  #waitForRv(rv: number, then: () => void): void {
    const deadline = Date.now() + (this.#opts.tooLargeWaitMs ?? 3000);
    const poll = () => (this.#rv >= rv || Date.now() >= deadline ? then() : setTimeout(poll, 20));
    poll();
  }

  #serveList(route: CollectionRoute, query: Record<string, string>, limit: number, send: Send, fail: Fail): void {
    let snap: Snapshot;
    let offset = 0;
    let snapId: string;
    if (query.continue) {
      const tok = decodeContinue(query.continue);
      if (!tok) return fail(400, 'continue key is not valid');
      const found = this.#snapshots.get(tok.id);
      if (tok.rv < this.#minValidRv || !found) {
        return fail(
          410,
          'The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.',
        );
      }
      snap = found;
      snapId = tok.id;
      offset = tok.offset;
    } else {
      snap = {
        rv: this.#rv,
        items: this.#current(route, this.#matcher(route, query)).sort((a, b) => keyOf(a).localeCompare(keyOf(b))),
      };
      snapId = randomBytes(6).toString('hex');
    }
    const end = limit > 0 ? Math.min(offset + limit, snap.items.length) : snap.items.length;
    const page = snap.items.slice(offset, end).map(asListItem);
    const metadata: Record<string, unknown> = { resourceVersion: String(snap.rv) };
    if (end < snap.items.length) {
      this.#snapshots.set(snapId, snap);
      // Abandoned pagings must not pile up: keep the newest 100 snapshots.
      for (const id of this.#snapshots.keys()) {
        if (this.#snapshots.size <= 100) break;
        this.#snapshots.delete(id);
      }
      metadata.continue = Buffer.from(JSON.stringify({ id: snapId, rv: snap.rv, offset: end })).toString('base64url');
      metadata.remainingItemCount = snap.items.length - end;
    } else {
      this.#snapshots.delete(snapId);
    }
    const respond = () =>
      send(200, { kind: `${route.rt.kind}List`, apiVersion: apiVersion(route.rt), metadata, items: page });
    if (this.pageDelayMs > 0 && (query.continue || metadata.continue)) setTimeout(respond, this.pageDelayMs);
    else respond();
  }

  /** The objects of the collection (and namespace) that match, unsorted. */
  #current(route: CollectionRoute, matches: Matcher): KubeObject[] {
    return [...(this.#objects.get(route.rt.plural)?.values() ?? [])].filter(
      (o) => (route.namespace === undefined || o.metadata.namespace === route.namespace) && matches(o),
    );
  }

  /**
   * WATCH (API Concepts › Efficient detection of changes; › Watch bookmarks; › Streaming lists):
   * replay from the event log, 410 for a compacted version, "Too large resource version" for one
   * the store does not have yet, and with sendInitialEvents the current state as ADDED events
   * closed by a BOOKMARK annotated `k8s.io/initial-events-end: "true"`.
   */
  #watch(
    route: CollectionRoute,
    query: Record<string, string>,
    res: http.ServerResponse,
    info: RequestInfo,
    fail: Fail,
  ): void {
    const invalid = listOptionsInvalid(query, true, this.watchList);
    if (invalid) {
      info.status = 422;
      res.writeHead(422, { 'Content-Type': 'application/json', 'Cache-Control': 'no-cache, private' });
      return void res.end(JSON.stringify(invalid));
    }
    const matches = this.#matcher(route, query);
    const rvParam = query.resourceVersion ?? '';
    const fromRv = rvParam === '' || rvParam === '0' ? undefined : Number(rvParam);
    if (fromRv !== undefined && !Number.isInteger(fromRv)) return fail(400, `invalid resourceVersion "${rvParam}"`);
    const initial = query.sendInitialEvents === 'true' || query.sendInitialEvents === '1';
    if (fromRv !== undefined && fromRv > this.#rv) {
      this.#waitForRv(fromRv, () => {
        if (res.destroyed) return;
        if (fromRv <= this.#rv) return this.#openWatch(route, query, res, info, matches, fromRv, initial);
        const body = tooLargeBody(fromRv, this.#rv, this.tooLargeForm);
        if (this.expiredWatch === 'status') {
          info.status = 504;
          res.writeHead(504, {
            'Content-Type': 'application/json',
            'Cache-Control': 'no-cache, private',
            'Retry-After': '1',
          });
          return void res.end(JSON.stringify(body));
        }
        info.status = 200;
        res.writeHead(200, {
          'Content-Type': 'application/json',
          'Transfer-Encoding': 'chunked',
          'Cache-Control': 'no-cache, private',
        });
        res.end(`${JSON.stringify({ type: 'ERROR', object: body })}\n`);
      });
      return;
    }
    // NotOlderThan a version the server has: the current state qualifies.
    this.#openWatch(route, query, res, info, matches, initial ? undefined : fromRv, initial);
  }

  #openWatch(
    route: CollectionRoute,
    query: Record<string, string>,
    res: http.ServerResponse,
    info: RequestInfo,
    matches: Matcher,
    fromRv: number | undefined,
    initial: boolean,
  ): void {
    const expired = !initial && fromRv !== undefined && fromRv < this.#minValidRv;
    if (expired && this.expiredWatch === 'status') {
      info.status = 410;
      res.writeHead(410, { 'Content-Type': 'application/json', 'Cache-Control': 'no-cache, private' });
      return void res.end(JSON.stringify(statusBody(410, `${GONE_MESSAGE}: ${fromRv} (${this.#minValidRv})`)));
    }
    info.status = 200;
    res.writeHead(200, {
      'Content-Type': 'application/json',
      'Transfer-Encoding': 'chunked',
      'Cache-Control': 'no-cache, private',
    });
    const w: Watch = {
      rt: route.rt,
      namespace: route.namespace,
      matches,
      bookmarks: query.allowWatchBookmarks === 'true' || query.allowWatchBookmarks === '1',
      res,
      dead: this.#stalled,
    };
    res.socket?.setNoDelay(true);
    if (w.dead) {
      // Half-open: not even the headers get through.
      this.#watches.add(w);
      res.on('close', () => this.#watches.delete(w));
      return;
    }
    res.flushHeaders();
    if (expired) {
      this.#writeEvent(w, 'ERROR', statusBody(410, `${GONE_MESSAGE}: ${fromRv} (${this.#minValidRv})`));
      res.end();
      return;
    }
    if (fromRv === undefined) {
      // "Get state and start at most recent" (or a WatchList): synthetic ADDED for everything that exists now.
      const items = this.#current(route, matches).sort(
        (a, b) => Number(a.metadata.resourceVersion) - Number(b.metadata.resourceVersion),
      );
      const cutAfter = initial ? this.cutInitialEventsAfter : undefined;
      // kube-apiserver flushes a watch only when no more events are queued: one write for the burst.
      res.cork();
      for (const [i, o] of items.entries()) {
        if (cutAfter !== undefined && i === cutAfter) {
          res.uncork();
          res.socket?.destroy();
          return;
        }
        this.#writeEvent(w, 'ADDED', o);
      }
      if (initial) {
        this.#writeEvent(w, 'BOOKMARK', {
          kind: w.rt.kind,
          apiVersion: apiVersion(w.rt),
          metadata: { resourceVersion: String(this.#rv), annotations: { 'k8s.io/initial-events-end': 'true' } },
        });
      }
      res.uncork();
    } else {
      for (const ev of this.#log) if (ev.rv > fromRv) this.#deliver(w, ev);
    }
    this.#watches.add(w);
    const timeoutSeconds = Number(query.timeoutSeconds ?? 0);
    if (timeoutSeconds > 0) {
      w.timeout = setTimeout(() => !w.dead && this.#endWatch(w), timeoutSeconds * 1000);
      // The watch cache also sends a bookmark 2 s before a watch's deadline.
      if (w.bookmarks && timeoutSeconds > 2) {
        const pre = setTimeout(() => !w.dead && this.#watches.has(w) && this.#bookmark(w), (timeoutSeconds - 2) * 1000);
        res.on('close', () => clearTimeout(pre));
      }
    }
    res.on('close', () => {
      clearTimeout(w.timeout);
      this.#watches.delete(w);
    });
  }

  #getOne(route: ObjectRoute, send: Send, fail: Fail): void {
    const obj = this.#objects.get(route.rt.plural)?.get(keyFor(route.rt, route.namespace, route.name));
    if (!obj) return fail(404, `${route.rt.plural} "${route.name}" not found`);
    send(200, obj);
  }

  #post(route: CollectionRoute, body: unknown, send: Send, fail: Fail): void {
    if (route.rt.namespaced && route.namespace === undefined) return fail(405, 'create needs a namespaced path');
    const obj = this.#checkBody(route.rt, body, route.namespace, fail);
    if (!obj) return;
    if (typeof obj.metadata.name !== 'string' && typeof obj.metadata.generateName === 'string') {
      obj.metadata.name = obj.metadata.generateName + randomBytes(3).toString('hex').slice(0, 5);
    }
    if (typeof obj.metadata.name !== 'string' || !obj.metadata.name) return fail(422, 'metadata.name: Required value');
    const key = keyFor(route.rt, route.namespace, obj.metadata.name);
    if (this.#objects.get(route.rt.plural)?.has(key))
      return fail(409, `${route.rt.plural} "${obj.metadata.name}" already exists`);
    send(201, this.#create(route.rt, key, obj));
  }

  #put(route: ObjectRoute, body: unknown, send: Send, fail: Fail): void {
    const obj = this.#checkBody(route.rt, body, route.namespace, fail);
    if (!obj) return;
    if (obj.metadata.name !== route.name) return fail(400, 'the name of the object does not match the name on the URL');
    const key = keyFor(route.rt, route.namespace, route.name);
    const existing = this.#objects.get(route.rt.plural)?.get(key);
    if (!existing) return fail(404, `${route.rt.plural} "${route.name}" not found`);
    if (conflicts(obj, existing))
      return fail(
        409,
        `Operation cannot be fulfilled on ${route.rt.plural} "${route.name}": the object has been modified; please apply your changes to the latest version and try again`,
      );
    send(200, this.#update(route.rt, key, obj, existing));
  }

  #patch(route: ObjectRoute, body: unknown, contentType: string | undefined, send: Send, fail: Fail): void {
    if (!isMergePatch(contentType))
      return fail(415, `the body of the request was in an unknown format: ${contentType ?? ''}`);
    const key = keyFor(route.rt, route.namespace, route.name);
    const existing = this.#objects.get(route.rt.plural)?.get(key);
    if (!existing) return fail(404, `${route.rt.plural} "${route.name}" not found`);
    if (!isRecord(body)) return fail(400, 'patch body must be a JSON object');
    const patched = mergePatch(structuredClone(existing), body);
    if (!isKubeObject(patched) || patched.metadata.name !== route.name)
      return fail(400, 'patch may not change metadata.name');
    if (conflicts(patched, existing))
      return fail(
        409,
        `Operation cannot be fulfilled on ${route.rt.plural} "${route.name}": the object has been modified`,
      );
    send(200, this.#update(route.rt, key, patched, existing));
  }

  #deleteOne(route: ObjectRoute, send: Send, fail: Fail): void {
    const key = keyFor(route.rt, route.namespace, route.name);
    const existing = this.#objects.get(route.rt.plural)?.get(key);
    if (!existing) return fail(404, `${route.rt.plural} "${route.name}" not found`);
    send(200, this.#delete(route.rt, key, existing));
  }

  /** The autoscaling/v1 Scale view of a Deployment's spec.replicas. */
  #scale(
    route: ObjectRoute,
    method: string,
    body: unknown,
    contentType: string | undefined,
    send: Send,
    fail: Fail,
  ): void {
    if (route.rt.plural !== 'deployments') return fail(404, 'the server could not find the requested resource');
    const key = keyFor(route.rt, route.namespace, route.name);
    const dep = this.#objects.get(route.rt.plural)?.get(key);
    if (!dep) return fail(404, `deployments.apps "${route.name}" not found`);
    if (method !== 'GET') {
      if (method === 'PATCH' && !isMergePatch(contentType))
        return fail(415, `unsupported patch type ${contentType ?? ''}`);
      if (!isRecord(body)) return fail(400, 'Scale body must be a JSON object');
      const desired = method === 'PATCH' ? mergePatch(toScale(dep), body) : body;
      if (
        !isRecord(desired) ||
        !isRecord(desired.spec) ||
        !Number.isInteger(desired.spec.replicas) ||
        Number(desired.spec.replicas) < 0
      ) {
        return fail(422, 'Scale.spec.replicas: must be a non-negative integer');
      }
      if (method === 'PUT' && isRecord(desired.metadata) && conflicts({ metadata: desired.metadata }, dep)) {
        return fail(
          409,
          `Operation cannot be fulfilled on deployments.apps "${route.name}": the object has been modified`,
        );
      }
      const next = structuredClone(dep);
      next.spec = { ...(isRecord(next.spec) ? next.spec : {}), replicas: desired.spec.replicas };
      this.#update(route.rt, key, next, dep);
    }
    const current = this.#objects.get(route.rt.plural)?.get(key);
    if (current) send(200, toScale(current));
  }

  #checkBody(rt: ResourceType, body: unknown, namespace: string | undefined, fail: Fail): KubeObject | undefined {
    if (!isKubeObject(body)) {
      fail(400, 'body must be an object with metadata');
      return undefined;
    }
    if (body.kind !== undefined && body.kind !== rt.kind) {
      fail(400, `kind ${JSON.stringify(body.kind)} does not match ${rt.kind}`);
      return undefined;
    }
    if (rt.namespaced) {
      if (body.metadata.namespace !== undefined && body.metadata.namespace !== namespace) {
        fail(400, 'the namespace of the provided object does not match the namespace sent on the request');
        return undefined;
      }
      body.metadata.namespace = namespace;
    }
    return body;
  }

  #matcher(route: CollectionRoute, query: Record<string, string>): Matcher {
    const label = query.labelSelector ? parseLabelSelector(query.labelSelector) : undefined;
    const field = query.fieldSelector ? parseFieldSelector(query.fieldSelector, route.rt.plural) : undefined;
    return (o) => (!label || label(o)) && (!field || field(o));
  }
}

// ---- routing ----

interface CollectionRoute {
  kind: 'collection';
  rt: ResourceType;
  namespace?: string;
}
interface ObjectRoute {
  kind: 'object' | 'scale';
  rt: ResourceType;
  namespace?: string;
  name: string;
}
type Route = CollectionRoute | ObjectRoute | { kind: 'meta'; what: 'version' | 'health' };
type Send = (status: number, body: unknown, headers?: http.OutgoingHttpHeaders) => void;
type Fail = (status: number, message: string, retryAfter?: number) => void;

function parseRoute(pathname: string): Route | undefined {
  if (pathname === '/version') return { kind: 'meta', what: 'version' };
  if (pathname === '/healthz' || pathname === '/readyz' || pathname === '/livez')
    return { kind: 'meta', what: 'health' };
  const parts = pathname.split('/').filter(Boolean).map(decodeURIComponent);
  let group: string;
  let version: string;
  let rest: string[];
  if (parts[0] === 'api' && parts.length >= 2) [group, version, rest] = ['', parts[1]!, parts.slice(2)];
  else if (parts[0] === 'apis' && parts.length >= 3) [group, version, rest] = [parts[1]!, parts[2]!, parts.slice(3)];
  else return undefined;
  const find = (plural: string | undefined) =>
    RESOURCE_TYPES.find((t) => t.group === group && t.version === version && t.plural === plural);
  if (rest[0] === 'namespaces' && rest.length >= 3) {
    const rt = find(rest[2]);
    if (!rt || !rt.namespaced) return undefined;
    const namespace = rest[1];
    if (rest.length === 3) return { kind: 'collection', rt, namespace };
    if (rest.length === 4) return { kind: 'object', rt, namespace, name: rest[3]! };
    if (rest.length === 5 && rest[4] === 'scale') return { kind: 'scale', rt, namespace, name: rest[3]! };
    return undefined;
  }
  const rt = find(rest[0]);
  if (!rt) return undefined;
  if (rest.length === 1) return { kind: 'collection', rt };
  if (rest.length === 2 && !rt.namespaced) return { kind: 'object', rt, name: rest[1]! };
  return undefined;
}

// ---- small pure helpers ----

function apiVersion(rt: ResourceType): string {
  return rt.group ? `${rt.group}/${rt.version}` : rt.version;
}

function keyFor(rt: ResourceType, namespace: string | undefined, name: string): string {
  return rt.namespaced ? `${namespace ?? 'default'}/${name}` : name;
}

function keyOf(o: KubeObject): string {
  const ns = typeof o.metadata.namespace === 'string' ? o.metadata.namespace : '';
  return `${ns}/${String(o.metadata.name)}`;
}

/** Items inside a real List carry no kind/apiVersion. */
function asListItem(o: KubeObject): Record<string, unknown> {
  const { kind: _kind, apiVersion: _apiVersion, ...rest } = o;
  return rest;
}

function isKubeObject(v: unknown): v is KubeObject {
  return isRecord(v) && isRecord(v.metadata);
}

function conflicts(obj: { metadata: Record<string, unknown> }, existing: KubeObject): boolean {
  const rv = obj.metadata.resourceVersion;
  return rv !== undefined && rv !== '' && rv !== existing.metadata.resourceVersion;
}

function isMergePatch(contentType: string | undefined): boolean {
  const t = (contentType ?? '').split(';')[0]!.trim();
  return t === 'application/merge-patch+json' || t === 'application/strategic-merge-patch+json';
}

/** RFC 7386 JSON merge patch. */
function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isRecord(patch)) return patch;
  const out: Record<string, unknown> = isRecord(target) ? target : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

function toScale(dep: KubeObject): Record<string, unknown> {
  const spec = isRecord(dep.spec) ? dep.spec : {};
  const status = isRecord(dep.status) ? dep.status : {};
  const replicas = typeof spec.replicas === 'number' ? spec.replicas : 1;
  const matchLabels = isRecord(spec.selector) && isRecord(spec.selector.matchLabels) ? spec.selector.matchLabels : {};
  return {
    kind: 'Scale',
    apiVersion: 'autoscaling/v1',
    metadata: {
      name: dep.metadata.name,
      namespace: dep.metadata.namespace,
      uid: dep.metadata.uid,
      resourceVersion: dep.metadata.resourceVersion,
      creationTimestamp: dep.metadata.creationTimestamp,
    },
    spec: { replicas },
    status: {
      replicas: typeof status.replicas === 'number' ? status.replicas : replicas,
      selector: Object.entries(matchLabels)
        .map(([k, v]) => `${k}=${String(v)}`)
        .join(','),
    },
  };
}

const REASONS: Record<number, string> = {
  400: 'BadRequest',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'NotFound',
  405: 'MethodNotAllowed',
  409: 'Conflict',
  410: 'Expired',
  415: 'UnsupportedMediaType',
  422: 'Invalid',
  429: 'TooManyRequests',
  500: 'InternalError',
  503: 'ServiceUnavailable',
  504: 'Timeout',
};

export function statusBody(code: number, message: string, retryAfter?: number): Record<string, unknown> {
  const body: Record<string, unknown> = {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message,
    reason: REASONS[code] ?? 'Unknown',
    code,
  };
  if (retryAfter !== undefined) body.details = { retryAfterSeconds: retryAfter };
  return body;
}

/**
 * A 504 for a resourceVersion the server does not have yet, in the body each server generation
 * sends (apimachinery's NewTooLargeResourceVersionError and its predecessors).
 */
export function tooLargeBody(
  requested: number,
  current: number,
  form: 'cause' | 'legacy-cause' | 'message',
): Record<string, unknown> {
  const body = statusBody(504, `Too large resource version: ${requested}, current: ${current}`, 1);
  if (form === 'cause')
    body.details = {
      causes: [{ reason: 'ResourceVersionTooLarge', message: 'Too large resource version' }],
      retryAfterSeconds: 1,
    };
  else if (form === 'legacy-cause')
    body.details = { causes: [{ message: 'Too large resource version' }], retryAfterSeconds: 1 };
  return body;
}

/** Kubernetes' 403 for a verb RBAC does not grant (the authorizer's "forbidden" Status). */
export function forbiddenBody(
  user: string,
  verb: string,
  rt: ResourceType,
  namespace: string | undefined,
): Record<string, unknown> {
  const qualified = rt.group ? `${rt.plural}.${rt.group}` : rt.plural;
  const scope = namespace === undefined ? 'at the cluster scope' : `in the namespace "${namespace}"`;
  return {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message: `${qualified} is forbidden: User "${user}" cannot ${verb} resource "${rt.plural}" in API group "${rt.group}" ${scope}`,
    reason: 'Forbidden',
    details: rt.group ? { group: rt.group, kind: rt.plural } : { kind: rt.plural },
    code: 403,
  };
}

/**
 * apimachinery's ValidateListOptions for the parameters this server knows, as the 422 Invalid
 * Status it answers with; undefined when the options are valid.
 */
function listOptionsInvalid(
  query: Record<string, string>,
  watch: boolean,
  watchListEnabled: boolean,
): Record<string, unknown> | undefined {
  const errors: Array<{ field: string; message: string }> = [];
  const rv = query.resourceVersion ?? '';
  const match = query.resourceVersionMatch ?? '';
  const sendInitial = query.sendInitialEvents !== undefined;
  const bookmarks = query.allowWatchBookmarks === 'true' || query.allowWatchBookmarks === '1';
  if (match !== '' && !watch) {
    if (rv === '')
      errors.push({
        field: 'resourceVersionMatch',
        message: 'resourceVersionMatch is forbidden unless resourceVersion is provided',
      });
    if (query.continue)
      errors.push({
        field: 'resourceVersionMatch',
        message: 'resourceVersionMatch is forbidden when continue is provided',
      });
    if (match !== 'NotOlderThan' && match !== 'Exact')
      errors.push({ field: 'resourceVersionMatch', message: `Unsupported value: "${match}"` });
    if (match === 'Exact' && rv === '0')
      errors.push({
        field: 'resourceVersionMatch',
        message: 'resourceVersionMatch "exact" is forbidden for resourceVersion "0"',
      });
  }
  if (sendInitial && !watchListEnabled) {
    errors.push({
      field: 'sendInitialEvents',
      message: 'sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled',
    });
  } else if (sendInitial) {
    if (!watch) errors.push({ field: 'sendInitialEvents', message: 'sendInitialEvents is forbidden for list' });
    if (match !== 'NotOlderThan')
      errors.push({
        field: 'resourceVersionMatch',
        message: 'sendInitialEvents requires setting resourceVersionMatch to NotOlderThan',
      });
    if (!bookmarks)
      errors.push({
        field: 'allowWatchBookmarks',
        message: 'sendInitialEvents requires setting allowWatchBookmarks to true',
      });
  } else if (watch && match !== '') {
    errors.push({
      field: 'resourceVersionMatch',
      message: 'resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided',
    });
  }
  if (errors.length === 0) return undefined;
  const text = errors.map((e) => `${e.field}: Forbidden: ${e.message}`);
  return {
    kind: 'Status',
    apiVersion: 'v1',
    metadata: {},
    status: 'Failure',
    message: `ListOptions.meta.k8s.io "" is invalid: ${text.length === 1 ? text[0] : `[${text.join(', ')}]`}`,
    reason: 'Invalid',
    details: {
      group: 'meta.k8s.io',
      kind: 'ListOptions',
      causes: errors.map((e) => ({
        reason: 'FieldValueForbidden',
        message: `Forbidden: ${e.message}`,
        field: e.field,
      })),
    },
    code: 422,
  };
}

function decodeContinue(token: string): { id: string; rv: number; offset: number } | undefined {
  try {
    const v: unknown = JSON.parse(Buffer.from(token, 'base64url').toString('utf8'));
    if (isRecord(v) && typeof v.id === 'string' && typeof v.rv === 'number' && typeof v.offset === 'number') {
      return { id: v.id, rv: v.rv, offset: v.offset };
    }
  } catch {
    return undefined;
  }
  return undefined;
}

async function readJson(req: http.IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    const b = chunk as Buffer;
    size += b.length;
    if (size > 10 << 20) throw new Error('request body too large');
    chunks.push(b);
  }
  if (size === 0) return undefined;
  return JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown;
}
