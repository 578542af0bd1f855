// A stand-in for the routes plugin's stream (GET /routes, NDJSON over chunked HTTP) with the
// same protocol: bearer auth, SNAPSHOT then ADDED/MODIFIED/DELETED and BOOKMARK, resume from a
// resourceVersion by replaying later changes, or a fresh SNAPSHOT when it is too old.
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface FakeRoute {
  name: string;
  namespace: string;
  clusterIP: string;
  clusterIPs: string[];
}

export interface RouteRequest {
  namespaces: string[] | null;
  resourceVersion: string | null;
  authorization: string | undefined;
}

interface Change {
  rv: number;
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  route: FakeRoute;
}

interface Client {
  res: http.ServerResponse;
  namespaces: string[] | null;
}

export function route(namespace: string, name: string, ...ips: string[]): FakeRoute {
  return { name, namespace, clusterIP: ips[0] ?? 'None', clusterIPs: ips.length ? ips : ['None'] };
}

export class FakeRouteServer {
  readonly requests: RouteRequest[] = [];
  /** When true, new connections get 200 and headers but never a byte of body. */
  mute = false;
  private server = http.createServer((req, res) => this.handle(req, res));
  private routes = new Map<string, FakeRoute>();
  private history: Change[] = [];
  private rv = 100;
  private compactedAt = 100;
  private clients = new Set<Client>();
  private waiters: Array<() => void> = [];

  constructor(readonly token: string) {}

  async listen(): Promise<string> {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    return this.url;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/routes`;
  }

  get connected(): number {
    return this.clients.size;
  }

  get resourceVersion(): string {
    return String(this.rv);
  }

  /** Resolves once `n` requests have been made in total. */
  async waitForRequests(n: number, timeoutMs = 10_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.requests.length < n) {
      if (Date.now() > deadline) throw new Error(`only ${this.requests.length} route requests, wanted ${n}`);
      await new Promise<void>((r) => {
        this.waiters.push(r);
        setTimeout(r, 50);
      });
    }
  }

  set(r: FakeRoute): void {
    const key = `${r.namespace}/${r.name}`;
    const type = this.routes.has(key) ? 'MODIFIED' : 'ADDED';
    this.routes.set(key, r);
    this.emit({ rv: ++this.rv, type, route: r });
  }

  delete(namespace: string, name: string): void {
    const key = `${namespace}/${name}`;
    const r = this.routes.get(key);
    if (!r) return;
    this.routes.delete(key);
    this.emit({ rv: ++this.rv, type: 'DELETED', route: r });
  }

  bookmark(): void {
    for (const c of this.clients) this.write(c, { type: 'BOOKMARK', resourceVersion: String(this.rv) });
  }

  /** Sends raw text to every client (for malformed-line tests). */
  raw(text: string): void {
    for (const c of this.clients) c.res.write(text);
  }

  /** Forgets the change history, so a resume from before now gets a fresh SNAPSHOT. */
  compact(): void {
    this.history = [];
    this.compactedAt = this.rv;
  }

  /** Cuts every stream (the server restarting, a proxy timing out). */
  dropClients(): void {
    for (const c of this.clients) c.res.socket?.destroy();
    this.clients.clear();
  }

  async close(): Promise<void> {
    this.dropClients();
    this.server.closeAllConnections();
    await new Promise<void>((r) => this.server.close(() => r()));
  }

  private visible(c: Client, r: FakeRoute): boolean {
    return c.namespaces === null || c.namespaces.includes(r.namespace);
  }

  private emit(ch: Change): void {
    this.history.push(ch);
    for (const c of this.clients) {
      if (this.visible(c, ch.route)) this.write(c, { type: ch.type, resourceVersion: String(ch.rv), route: ch.route });
    }
  }

  private write(c: Client, obj: unknown): void {
    c.res.write(JSON.stringify(obj) + '\n');
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const u = new URL(req.url ?? '/', 'http://x');
    if (u.pathname !== '/routes') {
      res.writeHead(404).end();
      return;
    }
    const nsParam = u.searchParams.get('namespaces');
    const namespaces = nsParam === null ? null : nsParam.split(',').filter((s) => s !== '');
    const rvParam = u.searchParams.get('resourceVersion');
    this.requests.push({ namespaces, resourceVersion: rvParam, authorization: req.headers.authorization });
    for (const w of this.waiters.splice(0)) w();
    if (req.headers.authorization !== `Bearer ${this.token}`) {
      res.writeHead(401, { 'Content-Type': 'text/plain' }).end('unauthorized\n');
      return;
    }
    res.writeHead(200, { 'Content-Type': 'application/x-ndjson', 'Cache-Control': 'no-store' });
    res.flushHeaders();
    const client: Client = { res, namespaces };
    if (this.mute) {
      this.clients.add(client);
      res.on('close', () => this.clients.delete(client));
      return;
    }
    const from = rvParam === null ? NaN : Number(rvParam);
    if (Number.isInteger(from) && from >= this.compactedAt && from <= this.rv) {
      for (const ch of this.history) {
        if (ch.rv > from && this.visible(client, ch.route))
          this.write(client, { type: ch.type, resourceVersion: String(ch.rv), route: ch.route });
      }
    } else {
      const routes = [...this.routes.values()].filter((r) => this.visible(client, r));
      this.write(client, { type: 'SNAPSHOT', resourceVersion: String(this.rv), routes });
    }
    this.clients.add(client);
    res.on('close', () => this.clients.delete(client));
  }
}
