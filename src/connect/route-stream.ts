// Client of the routes plugin's stream (GET /routes, NDJSON): keeps a copy of the cluster's
// Service routes, reconnects with jittered exponential backoff, and resumes from the last
// resourceVersion so a reconnect replays only what it missed.
import http from 'node:http';
import https from 'node:https';
import { StringDecoder } from 'node:string_decoder';
import type { Logger } from '../log.js';
import { VERSION } from '../version.js';
import { parseRouteEvent, routeKey, RouteEventError, type Route, type RouteEvent } from './routes.js';

export interface RouteStreamOptions {
  url: URL;
  token?: string;
  namespaces: readonly string[];
  ca?: Buffer;
  log: Logger;
  /** Called after every change to the set of routes (not for bookmarks). */
  onChange(routes: ReadonlyMap<string, Route>): void;
  /** Reconnect when nothing (not even a bookmark) arrives for this long. Default 120 s. */
  idleTimeoutMs?: number;
  backoffMinMs?: number;
  backoffMaxMs?: number;
  /** A single line longer than this is refused and the connection dropped. Default 16 MiB. */
  maxLineBytes?: number;
}

type Outcome = 'ended' | 'unauthorized' | 'gone' | 'idle' | 'failed' | 'stopped';

export class RouteStream {
  private routes = new Map<string, Route>();
  private rv: string | undefined;
  private stopped = false;
  private attempt = 0;
  private current: http.ClientRequest | null = null;
  private wake: (() => void) | null = null;
  private loop: Promise<void> | null = null;
  private synced = false;
  /** Connections made, for tests and logs. */
  connections = 0;

  constructor(private readonly opts: RouteStreamOptions) {}

  get resourceVersion(): string | undefined {
    return this.rv;
  }

  get hasSynced(): boolean {
    return this.synced;
  }

  /** The routes as of the last event. */
  snapshot(): Iterable<Route> {
    return this.routes.values();
  }

  get size(): number {
    return this.routes.size;
  }

  start(): void {
    this.loop ??= this.run();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.current?.destroy();
    this.wake?.();
    await this.loop;
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      const outcome = await this.connectOnce().catch((err: Error) => {
        if (!this.stopped) this.opts.log.warn(`route stream ${this.opts.url.origin}: ${err.message}`);
        return 'failed' as const;
      });
      if (this.stopped || outcome === 'stopped') break;
      if (outcome === 'gone') {
        this.rv = undefined;
        continue;
      }
      const delay = this.nextDelay(outcome === 'unauthorized');
      this.opts.log.info(
        `route stream ${outcome === 'ended' ? 'closed' : outcome}; reconnecting in ${delay} ms${this.rv ? ` from resourceVersion ${this.rv}` : ''}`,
      );
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, delay);
        this.wake = () => {
          clearTimeout(t);
          resolve();
        };
      });
      this.wake = null;
    }
  }

  private nextDelay(atMax: boolean): number {
    const min = this.opts.backoffMinMs ?? 500;
    const max = this.opts.backoffMaxMs ?? 30_000;
    const base = atMax ? max : Math.min(max, min * 2 ** Math.min(this.attempt, 20));
    this.attempt++;
    return Math.round(base * (0.8 + Math.random() * 0.4));
  }

  private requestUrl(): URL {
    const u = new URL(this.opts.url.href);
    if (this.opts.namespaces.length) u.searchParams.set('namespaces', this.opts.namespaces.join(','));
    if (this.rv !== undefined) u.searchParams.set('resourceVersion', this.rv);
    else u.searchParams.delete('resourceVersion');
    return u;
  }

  private connectOnce(): Promise<Outcome> {
    const url = this.requestUrl();
    const headers: http.OutgoingHttpHeaders = {
      Accept: 'application/x-ndjson',
      'User-Agent': `clusterdns/${VERSION} connect`,
    };
    if (this.opts.token) headers['Authorization'] = `Bearer ${this.opts.token}`;
    const mod = url.protocol === 'https:' ? https : http;
    const idleMs = this.opts.idleTimeoutMs ?? 120_000;
    const maxLine = this.opts.maxLineBytes ?? 16 * 1024 * 1024;
    this.connections++;
    return new Promise<Outcome>((resolve, reject) => {
      let idle: NodeJS.Timeout | undefined;
      let done = false;
      const finish = (o: Outcome) => {
        if (done) return;
        done = true;
        clearTimeout(idle);
        this.current = null;
        resolve(o);
      };
      const armIdle = () => {
        clearTimeout(idle);
        idle = setTimeout(() => {
          finish('idle');
          req.destroy();
        }, idleMs);
      };
      const req = mod.request(url, { method: 'GET', headers, ...(this.opts.ca ? { ca: this.opts.ca } : {}) }, (res) => {
        const status = res.statusCode ?? 0;
        if (status !== 200) {
          res.resume();
          if (status === 401 || status === 403) {
            this.opts.log.error(
              `route stream ${url.origin}${url.pathname}: HTTP ${status}: the token was refused; check --token`,
            );
            return finish('unauthorized');
          }
          if (status === 410) return finish('gone');
          this.opts.log.warn(`route stream ${url.origin}${url.pathname}: HTTP ${status}`);
          return finish('failed');
        }
        armIdle();
        const decoder = new StringDecoder('utf8');
        let buf = '';
        res.on('data', (chunk: Buffer) => {
          armIdle();
          buf += decoder.write(chunk);
          let nl: number;
          while ((nl = buf.indexOf('\n')) !== -1) {
            const line = buf.slice(0, nl).trim();
            buf = buf.slice(nl + 1);
            if (line !== '') this.handleLine(line);
          }
          if (buf.length > maxLine) {
            this.opts.log.warn(`route stream: a line longer than ${maxLine} bytes; reconnecting`);
            finish('failed');
            req.destroy();
          }
        });
        res.on('end', () => finish('ended'));
        res.on('error', () => finish(this.stopped ? 'stopped' : 'ended'));
        res.on('close', () => finish(this.stopped ? 'stopped' : 'ended'));
      });
      this.current = req;
      armIdle();
      req.on('error', (err) => {
        if (done) return;
        if (this.stopped) return finish('stopped');
        clearTimeout(idle);
        done = true;
        this.current = null;
        reject(err);
      });
      req.end();
    });
  }

  private handleLine(line: string): void {
    let ev: RouteEvent;
    try {
      ev = parseRouteEvent(line);
    } catch (err) {
      if (err instanceof RouteEventError) {
        this.opts.log.warn(`route stream: ignoring a line: ${err.message}`);
        return;
      }
      throw err;
    }
    this.rv = ev.resourceVersion;
    switch (ev.type) {
      case 'BOOKMARK':
        return;
      case 'SNAPSHOT': {
        for (const why of ev.skipped) this.opts.log.warn(`route stream: skipping ${why}`);
        const next = new Map<string, Route>();
        for (const r of ev.routes) next.set(routeKey(r), r);
        this.routes = next;
        break;
      }
      case 'ADDED':
      case 'MODIFIED':
        this.routes.set(routeKey(ev.route), ev.route);
        break;
      case 'DELETED':
        this.routes.delete(routeKey(ev.route));
        break;
    }
    this.attempt = 0;
    this.synced = true;
    this.opts.onChange(this.routes);
  }
}
