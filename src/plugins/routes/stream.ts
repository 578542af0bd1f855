// `GET /routes?namespaces=a,b[&resourceVersion=N]` with `Authorization: Bearer TOKEN`:
// newline-delimited JSON, chunked, one write (one chunk, sent at once) per line. First a
// SNAPSHOT (or, when resuming, the changes after N), then every change as it happens, and a
// BOOKMARK every interval. A client that does not keep up is disconnected rather than
// buffered without bound; it resumes from the last resourceVersion it read.

import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RouteFeed, RouteSink } from './feed.js';

/** Bytes queued for one client before it is cut off. */
export const MAX_BUFFERED = 1 << 20;
/** Streams served at once by one instance. */
export const MAX_SUBSCRIBERS = 1000;

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const DIGITS = /^\d{1,20}$/;

export interface StreamOptions {
  /** The accepted bearer token now (a token file is read again on each request). */
  token(): string;
  /** Namespaces the plugin may stream; empty = all. */
  allowed: ReadonlySet<string>;
}

function digest(s: string): Buffer {
  return createHash('sha256').update(s).digest();
}

function fail(res: ServerResponse, status: number, message: string, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store', ...headers });
  res.end(`${JSON.stringify({ error: message })}\n`);
}

/** One client's stream. */
class Subscriber implements RouteSink {
  closed = false;

  constructor(
    private readonly feed: RouteFeed,
    private readonly res: ServerResponse,
    readonly namespaces: ReadonlySet<string> | null,
  ) {}

  write(line: string): void {
    if (this.closed) return;
    this.res.write(line);
    if (this.res.writableLength > MAX_BUFFERED) this.close();
  }

  synced(): void {
    this.write(this.feed.snapshot(this.namespaces));
  }

  /** Cut (a client this far behind is not brought up to date by what is queued), or ended cleanly. */
  close(graceful = false): void {
    if (this.closed) return;
    this.closed = true;
    this.feed.sinks.delete(this);
    if (graceful) this.res.end();
    else this.res.destroy();
  }
}

export class RouteStream {
  private bookmarkTimer: NodeJS.Timeout | null = null;
  private stopped = false;

  constructor(
    private readonly feed: RouteFeed,
    private readonly o: StreamOptions,
    bookmarkMs: number,
  ) {
    this.bookmarkTimer = setInterval(() => this.bookmarks(), bookmarkMs);
    this.bookmarkTimer.unref();
  }

  private bookmarks(): void {
    if (!this.feed.synced) return;
    const line = this.feed.bookmark();
    for (const s of [...this.feed.sinks]) s.write(line);
  }

  private authorized(req: IncomingMessage): boolean {
    const m = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(req.headers.authorization ?? '');
    if (m === null) return false;
    const want = this.o.token();
    return want !== '' && timingSafeEqual(digest(m[1]!), digest(want));
  }

  readonly handle = (req: IncomingMessage, res: ServerResponse): void => {
    if (req.method !== 'GET') {
      fail(res, 405, 'only GET is served here', { allow: 'GET' });
      return;
    }
    if (!this.authorized(req)) {
      fail(res, 401, 'a valid "Authorization: Bearer TOKEN" header is required', {
        'www-authenticate': 'Bearer realm="clusterdns routes"',
      });
      return;
    }
    const url = new URL(req.url ?? '/', 'http://routes');
    let namespaces: Set<string> | null = null;
    const nsParam = url.searchParams.getAll('namespaces').join(',');
    for (const ns of nsParam.split(',')) {
      const n = ns.trim();
      if (n === '') continue;
      if (!DNS_LABEL.test(n)) {
        fail(res, 400, `namespace "${n.slice(0, 80)}" is not a DNS label`);
        return;
      }
      if (this.o.allowed.size > 0 && !this.o.allowed.has(n)) {
        fail(res, 403, `namespace "${n}" is not served by this routes plugin`);
        return;
      }
      (namespaces ??= new Set()).add(n);
    }
    const rv = url.searchParams.get('resourceVersion');
    if (rv !== null && rv !== '' && !DIGITS.test(rv)) {
      fail(res, 400, `resourceVersion "${rv.slice(0, 40)}" is not a number`);
      return;
    }
    if (this.stopped) {
      fail(res, 503, 'shutting down', { 'retry-after': '1' });
      return;
    }
    if (this.feed.sinks.size >= MAX_SUBSCRIBERS) {
      fail(res, 503, `more than ${MAX_SUBSCRIBERS} streams open`, { 'retry-after': '10' });
      return;
    }
    res.writeHead(200, {
      'content-type': 'application/x-ndjson',
      'cache-control': 'no-store',
      'x-content-type-options': 'nosniff',
    });
    res.flushHeaders();
    res.socket?.setNoDelay(true);
    const sub = new Subscriber(this.feed, res, namespaces);
    res.on('close', () => sub.close());
    if (this.feed.synced) {
      const resume = rv !== null && rv !== '' ? this.feed.resume(rv, namespaces) : ({ kind: 'snapshot' } as const);
      if (resume.kind === 'snapshot') sub.write(this.feed.snapshot(namespaces));
      else for (const line of resume.lines) sub.write(line);
    }
    // Not synced yet: the SNAPSHOT comes with the first sync (RouteSink.synced).
    if (!sub.closed) this.feed.sinks.add(sub);
  };

  /** Ends every stream (the configuration is going away). */
  stop(): void {
    this.stopped = true;
    if (this.bookmarkTimer) clearInterval(this.bookmarkTimer);
    this.bookmarkTimer = null;
    for (const s of [...this.feed.sinks]) {
      this.feed.sinks.delete(s);
      if (s instanceof Subscriber) s.close(true);
    }
  }
}
