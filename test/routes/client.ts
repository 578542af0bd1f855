// A test client for the route stream: opens `GET /routes`, and hands out the NDJSON lines
// one at a time as they arrive, so tests can assert each frame and when it came.

import http from 'node:http';

export interface RouteJson {
  name: string;
  namespace: string;
  clusterIP: string;
  clusterIPs: string[];
}

export interface Frame {
  type: 'SNAPSHOT' | 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK';
  resourceVersion: string;
  routes?: RouteJson[];
  route?: RouteJson;
}

export interface RouteStreamClient {
  status: number;
  headers: http.IncomingHttpHeaders;
  /** The body of a refused request (401, 403...). */
  body: string;
  /** The next frame, or an error after `ms`. */
  next(ms?: number): Promise<Frame>;
  /** The next frame that is not a BOOKMARK. */
  nextChange(ms?: number): Promise<Frame>;
  /** Frames received and not yet taken. */
  readonly pending: Frame[];
  /** Resolves when the server ends or cuts the stream. */
  readonly ended: Promise<void>;
  /** Stops reading from the socket (a slow client). */
  pause(): void;
  close(): void;
}

export function openRoutes(
  port: number,
  query = '',
  token: string | null = 'secret',
  host = '127.0.0.1',
): Promise<RouteStreamClient> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = {};
    if (token !== null) headers.authorization = `Bearer ${token}`;
    const req = http.get({ host, port, path: `/routes${query}`, headers }, (res) => {
      const pending: Frame[] = [];
      const waiters: Array<() => void> = [];
      let buf = '';
      let body = '';
      let endedResolve!: () => void;
      const ended = new Promise<void>((r) => (endedResolve = r));
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        if (res.statusCode !== 200) {
          body += chunk;
          return;
        }
        buf += chunk;
        let nl: number;
        while ((nl = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, nl);
          buf = buf.slice(nl + 1);
          if (line.trim() !== '') pending.push(JSON.parse(line) as Frame);
        }
        for (const w of waiters.splice(0)) w();
      });
      const done = () => {
        endedResolve();
        for (const w of waiters.splice(0)) w();
      };
      res.on('end', done);
      res.on('close', done);
      res.on('error', done);
      const client: RouteStreamClient = {
        status: res.statusCode ?? 0,
        headers: res.headers,
        get body() {
          return body;
        },
        pending,
        ended,
        next(ms = 3000) {
          return new Promise((ok, fail) => {
            const t = setTimeout(() => {
              // A waiter that gave up must not take a later frame.
              const i = waiters.indexOf(check);
              if (i >= 0) waiters.splice(i, 1);
              fail(new Error(`no frame within ${ms} ms`));
            }, ms);
            const check = () => {
              const f = pending.shift();
              if (f !== undefined) {
                clearTimeout(t);
                ok(f);
              } else if (res.complete || res.destroyed) {
                clearTimeout(t);
                fail(new Error('the stream ended'));
              } else waiters.push(check);
            };
            check();
          });
        },
        async nextChange(ms = 3000) {
          const end = Date.now() + ms;
          for (;;) {
            const f = await client.next(Math.max(1, end - Date.now()));
            if (f.type !== 'BOOKMARK') return f;
          }
        },
        pause: () => {
          res.pause();
          res.socket.pause();
        },
        close: () => {
          req.destroy();
          res.destroy();
        },
      };
      if (res.statusCode !== 200) res.on('end', () => resolve(client));
      else resolve(client);
    });
    req.on('error', reject);
  });
}
