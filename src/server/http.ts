// HTTP listeners shared by plugins (health, ready, prometheus, status): one server per
// address, routes added and removed as configurations come and go, so a reload that keeps
// `health :8080` never closes that port.

import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { logger } from '../log.js';
import { formatHostPort, listenErrorMessage, ListenError } from './system-errors.js';

export type HttpHandler = (req: IncomingMessage, res: ServerResponse) => void;

const log = logger('http');

interface Listener {
  address: string;
  server: Server;
  /** Per path, the handlers of the configurations that added it; the newest serves. */
  routes: Map<string, HttpHandler[]>;
  listening: Promise<void>;
}

/** Splits "host:port", ":port", "[v6]:port" into host and port (host '' means all). */
export function splitHostPort(address: string, defaultPort: number): { host: string; port: number } {
  let host = address;
  let port = defaultPort;
  const m = /^\[([^\]]+)\](?::(\d+))?$/.exec(address);
  if (m) {
    host = m[1]!;
    if (m[2]) port = Number(m[2]);
  } else {
    const i = address.lastIndexOf(':');
    if (i >= 0 && address.indexOf(':') === i) {
      host = address.slice(0, i);
      port = Number(address.slice(i + 1));
    }
  }
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`invalid port in address "${address}"`);
  if (host === 'localhost') host = '127.0.0.1';
  return { host, port };
}

export class HttpServices {
  private readonly listeners = new Map<string, Listener>();

  /**
   * Adds a route on `address` ("host:port"); starts the listener if needed.
   * Returns a function that removes the route (and closes the listener when it was the last).
   */
  async route(address: string, path: string, handler: HttpHandler): Promise<() => Promise<void>> {
    let l = this.listeners.get(address);
    if (!l) {
      const { host, port } = splitHostPort(address, 0);
      const routes = new Map<string, HttpHandler[]>();
      const server = createServer((req, res) => {
        const p = (req.url ?? '/').split('?')[0]!;
        const h = routes.get(p)?.at(-1);
        if (!h) {
          res.writeHead(404, { 'content-type': 'text/plain' });
          res.end('404 page not found\n');
          return;
        }
        try {
          h(req, res);
        } catch (e) {
          log.error(`handler for ${p} failed: ${(e as Error).message}`);
          if (!res.headersSent) res.writeHead(500);
          res.end();
        }
      });
      server.keepAliveTimeout = 5000;
      const listening = new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen({ host: host || undefined, port }, () => {
          server.off('error', reject);
          resolve();
        });
      });
      l = { address, server, routes, listening };
      this.listeners.set(address, l);
      try {
        await listening;
      } catch (e) {
        this.listeners.delete(address);
        throw new ListenError(
          listenErrorMessage(host ? address : `${address} (${formatHostPort('::', port)})`, port, e),
        );
      }
    } else {
      await l.listening;
    }
    const listener = l;
    // A newer configuration's handler replaces the old one's (reload keeps the port open); if the
    // newer one is released first (its reload failed), the old one serves again.
    const handlers = listener.routes.get(path) ?? [];
    handlers.push(handler);
    listener.routes.set(path, handlers);
    return async () => {
      const i = handlers.lastIndexOf(handler);
      if (i >= 0) handlers.splice(i, 1);
      if (handlers.length === 0 && listener.routes.get(path) === handlers) listener.routes.delete(path);
      if (listener.routes.size === 0 && this.listeners.get(address) === listener) {
        this.listeners.delete(address);
        listener.server.closeAllConnections();
        await new Promise<void>((r) => listener.server.close(() => r()));
      }
    };
  }

  /** The port a listener really got (for ":0" in tests). */
  boundPort(address: string): number | undefined {
    const a = this.listeners.get(address)?.server.address();
    return a && typeof a === 'object' ? a.port : undefined;
  }

  async closeAll(): Promise<void> {
    const all = [...this.listeners.values()];
    this.listeners.clear();
    await Promise.all(
      all.map(
        (l) =>
          new Promise<void>((r) => {
            l.server.closeAllConnections();
            l.server.close(() => r());
          }),
      ),
    );
  }
}
