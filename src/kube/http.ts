// HTTP(S) to the API server over node:http/https: one keep-alive Agent per connection,
// bearer auth, JSON bodies, and newline-delimited watch streams with an idle watchdog.
import http from 'node:http';
import https from 'node:https';
import { StringDecoder } from 'node:string_decoder';
import type { ApiConnection } from './connection.js';
import { ListItemScanner } from './list-stream.js';
import { isStatus, type Status } from './types.js';
import { VERSION } from '../version.js';

/** A non-2xx answer from the API server; `status` is the HTTP status, `body` its Status object if any. */
export class KubeApiError extends Error {
  readonly code = 'KUBE_ERR_API_STATUS';
  constructor(
    readonly status: number,
    readonly path: string,
    readonly body: Status | undefined,
    /** From Retry-After (seconds) or Status details.retryAfterSeconds, in ms. */
    readonly retryAfterMs: number | undefined,
  ) {
    const reason = body?.reason ? ` ${body.reason}` : '';
    const msg = body?.message ? `: ${body.message}` : '';
    super(`${path}: HTTP ${status}${reason}${msg}`);
    this.name = 'KubeApiError';
  }

  get reason(): string | undefined {
    return this.body?.reason;
  }
}

/** No bytes arrived on a watch for longer than the idle timeout (half-open TCP, stuck proxy). */
export class WatchIdleError extends Error {
  readonly code = 'KUBE_ERR_WATCH_IDLE';
  constructor(path: string, idleMs: number) {
    super(`${path}: watch silent for ${idleMs} ms, reconnecting`);
    this.name = 'WatchIdleError';
  }
}

/** The response body was larger than we are willing to buffer. */
export class ResponseTooLargeError extends Error {
  readonly code = 'KUBE_ERR_TOO_LARGE';
  constructor(path: string, limit: number) {
    super(`${path}: response exceeds ${limit} bytes`);
    this.name = 'ResponseTooLargeError';
  }
}

export type Query = Record<string, string | number | boolean | undefined>;

export interface KubeClientOptions {
  /** Default `clusterdns/<version>`. */
  userAgent?: string;
  /** Socket-idle timeout for non-watch requests (ms). Default 60 s. */
  requestTimeoutMs?: number;
  /** Largest non-watch body or single watch line we buffer. Default 256 MiB / 16 MiB. */
  maxBodyBytes?: number;
  maxLineBytes?: number;
}

export interface StreamOptions {
  signal?: AbortSignal;
  /** Abort with WatchIdleError if no bytes arrive for this long (ms), headers included. */
  idleTimeoutMs: number;
  /** Called once when the 200 response headers arrive. */
  onOpen?(): void;
  /** Called for each complete `\n`-terminated line; throwing aborts the stream with that error. */
  onLine(line: string): void;
}

export interface RequestOptions {
  signal?: AbortSignal;
  query?: Query;
  /** For PATCH: default application/merge-patch+json. */
  contentType?: string;
}

type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

interface Exchange {
  req: http.ClientRequest;
  res: http.IncomingMessage;
  /** Drop the abort listener and in-flight count; call once the body is consumed or abandoned. */
  release: () => void;
  /** Why we cut the request ourselves (abort, timeout), if we did. */
  failure(): Error | undefined;
}

const MAX_ERROR_BODY = 64 * 1024;

/** One per ApiConnection: owns the keep-alive Agent all requests to that server share. */
export class KubeClient {
  readonly userAgent: string;
  readonly #conn: ApiConnection;
  readonly #isHttps: boolean;
  readonly #requestTimeoutMs: number;
  readonly #maxBodyBytes: number;
  readonly #maxLineBytes: number;
  #agent: http.Agent;
  /** Client cert the current agent was built with (exec plugins may rotate it). */
  #agentCert: Buffer | undefined;
  #inFlight = new Map<http.Agent, number>();
  #retired = new Set<http.Agent>();
  #closed = false;

  constructor(conn: ApiConnection, opts: KubeClientOptions = {}) {
    this.#conn = conn;
    this.#isHttps = conn.server.protocol === 'https:';
    this.userAgent = opts.userAgent ?? `clusterdns/${VERSION}`;
    this.#requestTimeoutMs = opts.requestTimeoutMs ?? 60_000;
    this.#maxBodyBytes = opts.maxBodyBytes ?? 256 << 20;
    this.#maxLineBytes = opts.maxLineBytes ?? 16 << 20;
    this.#agent = this.#newAgent(conn.cert, conn.key);
    this.#agentCert = conn.cert;
  }

  get server(): URL {
    return this.#conn.server;
  }

  /** GET and parse a JSON body; non-2xx throws KubeApiError. */
  async getJSON(path: string, query?: Query, opts: { signal?: AbortSignal } = {}): Promise<unknown> {
    return this.request('GET', path, undefined, { ...opts, query });
  }

  /** Any verb with an optional JSON body (the autoscaler's PUT/PATCH of /scale); returns the parsed answer. */
  async request(method: Method, path: string, body?: unknown, opts: RequestOptions = {}): Promise<unknown> {
    const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    const contentType = payload
      ? (opts.contentType ?? (method === 'PATCH' ? 'application/merge-patch+json' : 'application/json'))
      : undefined;
    const ex = await this.#open(method, path, opts.query, payload, contentType, opts.signal, this.#requestTimeoutMs);
    let text: string;
    try {
      const status = ex.res.statusCode ?? 0;
      if (status < 200 || status > 299) throw await this.#apiError(ex.res, path);
      text = await readBody(ex.res, this.#maxBodyBytes, path);
    } catch (err) {
      throw ex.failure() ?? err;
    } finally {
      ex.release();
    }
    if (text.length === 0) return undefined;
    try {
      return JSON.parse(text) as unknown;
    } catch (err) {
      throw new Error(`${path}: response is not JSON: ${err instanceof Error ? err.message : String(err)}`, {
        cause: err,
      });
    }
  }

  /**
   * GET a LIST, handing each element of `items` to `onItem` parsed, as the body arrives; resolves
   * with the rest of the list (`items` empty). Non-2xx throws KubeApiError.
   */
  async listItems(
    path: string,
    query: Query,
    onItem: (item: unknown) => void,
    opts: { signal?: AbortSignal } = {},
  ): Promise<unknown> {
    const ex = await this.#open('GET', path, query, undefined, undefined, opts.signal, this.#requestTimeoutMs);
    try {
      const status = ex.res.statusCode ?? 0;
      if (status < 200 || status > 299) throw await this.#apiError(ex.res, path);
      const scanner = new ListItemScanner((json) => onItem(JSON.parse(json) as unknown), this.#maxLineBytes);
      await new Promise<void>((ok, fail) => {
        const res = ex.res;
        const decoder = new StringDecoder('utf8');
        let size = 0;
        let failed = false;
        const stop = (err: unknown) => {
          if (failed) return;
          failed = true;
          res.destroy();
          fail(err);
        };
        res.on('data', (chunk: Buffer) => {
          if (failed) return;
          size += chunk.length;
          if (size > this.#maxBodyBytes) return stop(new ResponseTooLargeError(path, this.#maxBodyBytes));
          try {
            scanner.write(decoder.write(chunk));
          } catch (err) {
            stop(
              err instanceof SyntaxError
                ? new Error(`${path}: a list item is not JSON: ${err.message}`, { cause: err })
                : err,
            );
          }
        });
        res.on('end', () => {
          if (failed) return;
          try {
            scanner.write(decoder.end());
            ok();
          } catch (err) {
            stop(err);
          }
        });
        res.on('error', stop);
        res.on('close', () => {
          if (!res.complete) stop(new Error(`${path}: connection closed before the response was complete`));
        });
      });
      return scanner.end();
    } catch (err) {
      throw ex.failure() ?? err;
    } finally {
      ex.release();
    }
  }

  /**
   * A watch: resolves when the server ends the stream cleanly, rejects on HTTP errors,
   * socket errors, idle timeout, or whatever `onLine` throws. A partial last line is dropped.
   */
  async streamLines(path: string, query: Query, opts: StreamOptions): Promise<void> {
    // One controller for both causes: AbortSignal.any() on a long-lived parent leaks (nodejs/node#55351).
    const local = new AbortController();
    const signal = local.signal;
    let timer: NodeJS.Timeout | undefined;
    const touch = () => {
      if (timer) timer.refresh();
      else timer = setTimeout(() => local.abort(new WatchIdleError(path, opts.idleTimeoutMs)), opts.idleTimeoutMs);
    };
    const parent = opts.signal;
    const onParentAbort = () => local.abort(parent?.reason);
    if (parent?.aborted) onParentAbort();
    else parent?.addEventListener('abort', onParentAbort, { once: true });
    let release: (() => void) | undefined;
    try {
      // The idle clock starts when the request is sent, not while credentials are fetched.
      const opened = await this.#open('GET', path, query, undefined, undefined, signal, undefined, touch);
      release = opened.release;
      const { req, res } = opened;
      touch();
      if (res.statusCode !== 200) throw await this.#apiError(res, path);
      opts.onOpen?.();
      await new Promise<void>((ok, fail) => {
        const decoder = new StringDecoder('utf8');
        let tail = '';
        let failed = false;
        const abort = (err: unknown) => {
          if (failed) return;
          failed = true;
          req.destroy();
          fail(err);
        };
        res.on('data', (chunk: Buffer) => {
          if (failed) return;
          touch();
          let text = tail + decoder.write(chunk);
          let start = 0;
          // The tail has no newline: scan only the new bytes, or a big object costs O(n²).
          for (let nl = text.indexOf('\n', tail.length); nl !== -1; nl = text.indexOf('\n', start)) {
            const line = text.slice(start, nl);
            start = nl + 1;
            if (line.trim().length === 0) continue;
            try {
              opts.onLine(line);
            } catch (err) {
              abort(err);
              return;
            }
          }
          text = start === 0 ? text : text.slice(start);
          if (text.length > this.#maxLineBytes) {
            abort(new ResponseTooLargeError(path, this.#maxLineBytes));
            return;
          }
          tail = text;
        });
        // `complete` tells a clean end (terminating chunk seen) from a socket cut mid-stream.
        res.on('end', () => {
          if (failed) return;
          if (res.complete) ok();
          else abort(new Error(`${path}: watch stream cut before its end`));
        });
        res.on('error', (err) =>
          abort(
            signal.aborted
              ? signal.reason
              : new Error(`${path}: watch connection lost: ${err.message}`, { cause: err }),
          ),
        );
        res.on('close', () => {
          if (!res.complete)
            abort(signal.aborted ? signal.reason : new Error(`${path}: watch connection closed mid-stream`));
        });
      });
    } catch (err) {
      // An abort surfaces as a generic AbortError; report the reason we aborted for.
      if (signal.aborted && signal.reason !== undefined) throw signal.reason;
      throw err;
    } finally {
      clearTimeout(timer);
      parent?.removeEventListener('abort', onParentAbort);
      release?.();
    }
  }

  /** Destroys the agent and its sockets (idle and active). */
  close(): void {
    this.#closed = true;
    this.#agent.destroy();
    for (const a of this.#retired) a.destroy();
    this.#retired.clear();
  }

  /**
   * Send a request and resolve at the response headers. Aborts (signal, socket timeout) destroy the
   * request without an error argument: Node re-emits such errors on a socket that may already be
   * back in the keep-alive pool, where nothing listens. `failure()` tells why we cut it.
   */
  async #open(
    method: Method,
    path: string,
    query: Query | undefined,
    payload: Buffer | undefined,
    contentType: string | undefined,
    signal: AbortSignal | undefined,
    socketTimeoutMs: number | undefined,
    beforeSend?: () => void,
  ): Promise<Exchange> {
    if (this.#closed) throw new Error('KubeClient is closed');
    const token = await this.#conn.token();
    const agent = await this.#currentAgent();
    signal?.throwIfAborted();
    const url = this.#url(path, query);
    const headers: http.OutgoingHttpHeaders = {
      Accept: 'application/json',
      'User-Agent': this.userAgent,
    };
    if (token) headers.Authorization = `Bearer ${token}`;
    if (payload) {
      headers['Content-Type'] = contentType;
      headers['Content-Length'] = payload.length;
    }
    const hostname = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
    const options: https.RequestOptions = {
      method,
      hostname,
      port: url.port || (this.#isHttps ? 443 : 80),
      path: url.pathname + url.search,
      headers,
      agent,
    };
    beforeSend?.();
    const req = (this.#isHttps ? https : http).request(options);
    let reason: Error | undefined;
    const kill = (why: unknown) => {
      if (reason) return;
      reason = why instanceof Error ? why : new Error(String(why));
      req.destroy();
    };
    const onAbort = () => kill(signal?.reason);
    signal?.addEventListener('abort', onAbort, { once: true });
    this.#inFlight.set(agent, (this.#inFlight.get(agent) ?? 0) + 1);
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      signal?.removeEventListener('abort', onAbort);
      const n = (this.#inFlight.get(agent) ?? 1) - 1;
      if (n > 0) this.#inFlight.set(agent, n);
      else {
        this.#inFlight.delete(agent);
        if (this.#retired.delete(agent)) agent.destroy();
      }
    };
    try {
      const res = await new Promise<http.IncomingMessage>((ok, fail) => {
        req.on('response', ok);
        req.on('error', (err) => fail(reason ?? err));
        if (socketTimeoutMs !== undefined) {
          req.setTimeout(socketTimeoutMs, () =>
            kill(new Error(`${method} ${path}: no answer within ${socketTimeoutMs} ms`)),
          );
        }
        req.end(payload);
      });
      return { req, res, release, failure: () => reason };
    } catch (err) {
      release();
      throw err;
    }
  }

  async #apiError(res: http.IncomingMessage, path: string): Promise<KubeApiError> {
    const status = res.statusCode ?? 0;
    if (status === 401) this.#conn.invalidate?.();
    let body: Status | undefined;
    try {
      const text = await readBody(res, MAX_ERROR_BODY, path);
      const parsed: unknown = text ? JSON.parse(text) : undefined;
      if (isStatus(parsed)) body = parsed;
    } catch {
      body = undefined; // a proxy's HTML error page: the status code alone will do
    }
    return new KubeApiError(status, path, body, retryAfterMs(res.headers['retry-after'], body));
  }

  async #currentAgent(): Promise<http.Agent> {
    const fresh = await this.#conn.clientCertificate?.();
    if (fresh && !(this.#agentCert && this.#agentCert.equals(fresh.cert))) {
      // Rotated exec-plugin certificate: new sockets use it; the old agent goes once its requests end.
      const old = this.#agent;
      this.#agent = this.#newAgent(fresh.cert, fresh.key);
      this.#agentCert = fresh.cert;
      if (this.#inFlight.has(old)) this.#retired.add(old);
      else old.destroy();
    }
    return this.#agent;
  }

  #newAgent(cert: Buffer | undefined, key: Buffer | undefined): http.Agent {
    const base = { keepAlive: true, keepAliveMsecs: 30_000 };
    if (!this.#isHttps) return new http.Agent(base);
    const c = this.#conn;
    return new https.Agent({
      ...base,
      ca: c.ca,
      cert,
      key,
      rejectUnauthorized: !c.insecureSkipTLSVerify,
      servername: c.tlsServerName,
    });
  }

  #url(path: string, query: Query | undefined): URL {
    const base = this.#conn.server;
    const prefix = base.pathname.endsWith('/') ? base.pathname.slice(0, -1) : base.pathname;
    const url = new URL(base.href);
    url.pathname = prefix + path;
    url.search = '';
    if (query) {
      for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== '') url.searchParams.set(k, String(v));
    }
    return url;
  }
}

/**
 * The body as text. Each chunk is decoded as it arrives, so the socket's buffers are freed at
 * once and no body-sized Buffer is made: a LIST page of big objects stays in the JS heap, and
 * does not leave the C heap fragmented (resident) after the initial list.
 */
function readBody(res: http.IncomingMessage, limit: number, path: string): Promise<string> {
  return new Promise((ok, fail) => {
    const decoder = new StringDecoder('utf8');
    const parts: string[] = [];
    let size = 0;
    res.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        res.destroy();
        fail(new ResponseTooLargeError(path, limit));
        return;
      }
      parts.push(decoder.write(chunk));
    });
    res.on('end', () => ok(parts.join('') + decoder.end()));
    res.on('error', fail);
    res.on('close', () => {
      if (!res.complete) fail(new Error(`${path}: connection closed before the response was complete`));
    });
  });
}

function retryAfterMs(header: string | undefined, body: Status | undefined): number | undefined {
  if (header) {
    const secs = Number(header);
    if (Number.isFinite(secs) && secs >= 0) return secs * 1000;
    const date = Date.parse(header);
    if (!Number.isNaN(date)) return Math.max(0, date - Date.now());
  }
  const fromBody = body?.details?.retryAfterSeconds;
  return typeof fromBody === 'number' && fromBody >= 0 ? fromBody * 1000 : undefined;
}
