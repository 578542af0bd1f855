// UDP and TCP listeners. The server owns all socket I/O: parsing the question, routing to
// a server block, FORMERR/NOTIMP/REFUSED/BADVERS, truncation, TCP framing and limits.

import dgram from 'node:dgram';
import net from 'node:net';
import { QClass, Rcode } from '../dns/constants.js';
import { parseQuery, QueryProblem } from '../dns/query.js';
import { logger } from '../log.js';
import { bareReply, finalizeReply } from './reply.js';
import { Request, type ClientInfo, type HandlerResult, type Response } from './request.js';
import { serverStats, type ZoneStats } from './stats.js';
import { queryNames } from '../status/names.js';

const log = logger('');

/** A server block as the listener sees it. */
export interface RoutedBlock {
  zone: string;
  serverLabel: string;
  chain: (req: Request) => HandlerResult;
  /** Where this block's queries are counted (absent in unit tests that route by hand). */
  stats?: ZoneStats;
}

/** Finds the block with the longest zone that contains a (lowercase) name. */
export class Router {
  private readonly zones = new Map<string, RoutedBlock>();
  /** Distinct lengths of the zones, longest first: a lookup tries one suffix per length. */
  private lengths: number[] = [];
  private root: RoutedBlock | undefined;
  /** Where queries that reach no chain are counted (CoreDNS's zone label "dropped"). */
  dropped: ZoneStats | null = null;

  add(block: RoutedBlock): void {
    this.dropped ??= serverStats.zone(block.serverLabel, 'dropped');
    if (block.zone === '.') {
      this.root = block;
      return;
    }
    this.zones.set(block.zone, block);
    if (!this.lengths.includes(block.zone.length)) this.lengths = [...this.lengths, block.zone.length].sort((a, b) => b - a);
  }

  match(name: string): RoutedBlock | undefined {
    const lengths = this.lengths;
    const n = name.length;
    for (let i = 0; i < lengths.length; i++) {
      const len = lengths[i]!;
      if (len > n) continue;
      // The suffix must start at a label boundary.
      if (len < n && name.charCodeAt(n - len - 1) !== 0x2e) continue;
      const b = this.zones.get(len === n ? name : name.slice(n - len));
      if (b !== undefined) return b;
    }
    return this.root;
  }
}

export interface ListenerOptions {
  host: string;
  port: number;
  /** Which routing table this listener uses (several sockets can share one). */
  routerKey: string;
  ipv6Only?: boolean;
  tcpIdleMs?: number;
  tcpMaxConnections?: number;
  /** Largest number of queries answered concurrently on one TCP connection. */
  tcpMaxInflightPerConn?: number;
  udpRecvBuffer?: number;
}

/** State shared by all listeners of a process: the current routing tables and counters. */
export class Dispatcher {
  routers = new Map<string, Router>();
  inflight = 0;
  private idleWaiters: Array<() => void> = [];

  /** Handles one message; `send` is called exactly once, with null when the message is dropped. */
  handle(buf: Buffer, client: ClientInfo, router: Router | undefined, send: (b: Buffer | null) => void): void {
    const q = parseQuery(buf);
    if (typeof q === 'number') {
      if (q === QueryProblem.Drop) {
        send(null);
        return;
      }
      send(headerOnlyReply(buf, q));
      return;
    }
    const req = new Request(buf, q, client);
    const counting = serverStats.enabled;
    const start = counting ? performance.now() : 0;
    let early = -1;
    let block: RoutedBlock | undefined;
    if (q.edns !== null && q.edns.version > 0) early = Rcode.BADVERS;
    else if (q.qclass !== QClass.IN) early = Rcode.REFUSED;
    else {
      block = router?.match(req.name);
      if (block === undefined) early = Rcode.REFUSED;
    }
    if (block === undefined) {
      const out = bareReply(req, early);
      send(out);
      if (counting && router?.dropped) this.count(router.dropped, req, out, '', start);
      return;
    }
    req.zone = block.zone;
    req.server = block.serverLabel;
    let result: HandlerResult;
    try {
      result = block.chain(req);
    } catch (e) {
      this.panic(req, e);
      const out = bareReply(req, Rcode.SERVFAIL);
      send(out);
      if (counting && block.stats) this.count(block.stats, req, out, '', start);
      return;
    }
    if (result instanceof Promise) {
      this.inflight++;
      const b = block;
      result.then(
        (res) => {
          const out = finalizeReply(req, res);
          send(out);
          if (counting && b.stats) this.count(b.stats, req, out, res.plugin, start);
          this.done();
        },
        (e: unknown) => {
          this.panic(req, e);
          const out = bareReply(req, Rcode.SERVFAIL);
          send(out);
          if (counting && b.stats) this.count(b.stats, req, out, '', start);
          this.done();
        },
      );
      return;
    }
    const out = finalizeReply(req, result);
    send(out);
    if (counting && block.stats) this.count(block.stats, req, out, result.plugin, start);
  }

  private count(stats: ZoneStats, req: Request, out: Buffer, plugin: string, start: number): void {
    const rcode = out.length >= 4 ? out[3]! & 0xf : 0;
    stats.record(req.client.proto === 'udp' ? 0 : 1, req.client.family, req.qtype, req.do, req.raw.length, out.length, rcode, plugin, (performance.now() - start) / 1000);
    if (queryNames.enabled) queryNames.record(req.name, rcode);
  }

  private panic(req: Request, e: unknown): void {
    serverStats.panics++;
    log.error(`plugin failed on ${req.qname}: ${(e as Error)?.stack ?? String(e)}`);
  }

  private done(): void {
    this.inflight--;
    if (this.inflight === 0 && this.idleWaiters.length) {
      const w = this.idleWaiters;
      this.idleWaiters = [];
      for (const f of w) f();
    }
  }

  /** Resolves when no query is in flight (or after `timeoutMs`). */
  drained(timeoutMs: number): Promise<void> {
    if (this.inflight === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const t = setTimeout(resolve, timeoutMs);
      this.idleWaiters.push(() => {
        clearTimeout(t);
        resolve();
      });
    });
  }
}

/** FORMERR/NOTIMP for a message whose header is readable but that is not a usable query. */
function headerOnlyReply(buf: Buffer, rcode: number): Buffer {
  const out = Buffer.alloc(12);
  out.writeUInt16BE(buf.readUInt16BE(0), 0);
  const flags = buf.readUInt16BE(2);
  out.writeUInt16BE(0x8000 | (flags & 0x7900) | (rcode & 0xf), 2);
  return out;
}

export class DnsListener {
  readonly key: string;
  private udp: dgram.Socket | null = null;
  private tcp: net.Server | null = null;
  private readonly conns = new Set<net.Socket>();
  private closing = false;
  /** UDP queries handed to the dispatcher and not yet answered (or dropped). */
  private udpPending = 0;
  private udpOpen = true;
  private drained: (() => void) | null = null;
  boundPort = 0;

  constructor(
    private readonly opts: ListenerOptions,
    private readonly dispatcher: Dispatcher,
  ) {
    this.key = opts.routerKey;
  }

  private router(): Router | undefined {
    return this.dispatcher.routers.get(this.key);
  }

  async start(): Promise<void> {
    const { host, port } = this.opts;
    const family = host.includes(':') ? 'udp6' : 'udp4';
    const udp = dgram.createSocket({ type: family, reuseAddr: false, ipv6Only: this.opts.ipv6Only === true });
    await new Promise<void>((resolve, reject) => {
      udp.once('error', reject);
      udp.bind({ address: host || (family === 'udp6' ? '::' : '0.0.0.0'), port }, () => {
        udp.off('error', reject);
        resolve();
      });
    });
    try {
      // The default buffer (~208 KiB) drops bursts of a few hundred queries.
      udp.setRecvBufferSize(this.opts.udpRecvBuffer ?? 4 * 1024 * 1024);
      udp.setSendBufferSize(1024 * 1024);
    } catch {
      // The kernel caps these at net.core.rmem_max; a smaller buffer still works.
    }
    this.boundPort = udp.address().port;
    udp.on('error', (e) => log.error(`udp ${this.key}: ${e.message}`));
    const d = this.dispatcher;
    const family2: 1 | 2 = family === 'udp6' ? 2 : 1;
    const localAddress = udp.address().address;
    const localPort = this.boundPort;
    udp.on('message', (msg, rinfo) => {
      const client: ClientInfo = {
        proto: 'udp',
        remoteAddress: rinfo.address,
        remotePort: rinfo.port,
        family: rinfo.family === 'IPv6' ? 2 : family2,
        localAddress,
        localPort,
      };
      this.udpPending++;
      d.handle(msg, client, this.router(), (out) => {
        // An answer that finishes after the socket closed (shutdown, or a reload that dropped
        // this listener) is lost: dgram would throw ERR_SOCKET_DGRAM_NOT_RUNNING.
        if (out === null || !this.udpOpen) this.udpDone();
        // While closing, the socket waits for the send itself: close() cancels queued sends.
        else if (this.closing) udp.send(out, rinfo.port, rinfo.address, this.udpDoneCb);
        else {
          udp.send(out, rinfo.port, rinfo.address);
          this.udpDone();
        }
      });
    });
    this.udp = udp;
    await this.startTcp(port === 0 ? this.boundPort : port);
  }

  private async startTcp(port: number): Promise<void> {
    const { host } = this.opts;
    const idleMs = this.opts.tcpIdleMs ?? 10_000;
    const maxInflight = this.opts.tcpMaxInflightPerConn ?? 128;
    const server = net.createServer({ pauseOnConnect: false, noDelay: true });
    server.maxConnections = this.opts.tcpMaxConnections ?? 1000;
    server.on('connection', (sock) => this.onConnection(sock, idleMs, maxInflight));
    server.on('error', (e) => log.error(`tcp ${this.key}: ${e.message}`));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ host: host || '0.0.0.0', port, exclusive: false, ipv6Only: this.opts.ipv6Only === true }, () => {
        server.off('error', reject);
        resolve();
      });
    });
    this.tcp = server;
  }

  private onConnection(sock: net.Socket, idleMs: number, maxInflight: number): void {
    if (this.closing) {
      sock.destroy();
      return;
    }
    this.conns.add(sock);
    sock.setTimeout(idleMs, () => sock.destroy());
    sock.on('error', () => sock.destroy());
    sock.on('close', () => this.conns.delete(sock));
    const client: ClientInfo = {
      proto: 'tcp',
      remoteAddress: sock.remoteAddress ?? '',
      remotePort: sock.remotePort ?? 0,
      family: sock.remoteFamily === 'IPv6' ? 2 : 1,
      localAddress: sock.localAddress ?? '',
      localPort: sock.localPort ?? 0,
    };
    let pending: Buffer | null = null;
    let inflight = 0;
    let paused = false;
    const send = (out: Buffer | null) => {
      inflight--;
      if (sock.destroyed || out === null) return;
      const frame = Buffer.allocUnsafe(2 + out.length);
      frame.writeUInt16BE(out.length, 0);
      out.copy(frame, 2);
      sock.write(frame);
      // A client that does not read its answers is cut off rather than buffered without bound.
      if (sock.writableLength > 4 * 1024 * 1024) sock.destroy();
      if (paused && inflight < maxInflight) {
        paused = false;
        sock.resume();
      }
    };
    sock.on('data', (chunk: Buffer) => {
      let buf = pending ? Buffer.concat([pending, chunk]) : chunk;
      pending = null;
      let off = 0;
      while (buf.length - off >= 2) {
        const len = buf.readUInt16BE(off);
        if (len < 12) {
          // Not even a DNS header: the stream cannot be resynchronised.
          sock.destroy();
          return;
        }
        if (buf.length - off - 2 < len) break;
        const msg = buf.subarray(off + 2, off + 2 + len);
        off += 2 + len;
        inflight++;
        this.dispatcher.handle(Buffer.from(msg), client, this.router(), send);
        if (inflight >= maxInflight && !paused) {
          paused = true;
          sock.pause();
        }
      }
      if (off < buf.length) pending = Buffer.from(buf.subarray(off));
      buf = Buffer.alloc(0);
    });
  }

  /** Number of open TCP connections (for tests and metrics). */
  get tcpConnections(): number {
    return this.conns.size;
  }

  private udpDone(): void {
    if (--this.udpPending === 0 && this.drained) this.drained();
  }

  private readonly udpDoneCb = () => this.udpDone();

  private udpDrained(maxMs: number): Promise<void> {
    if (this.udpPending === 0) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const timer = setTimeout(done, maxMs);
      timer.unref();
      function done(): void {
        clearTimeout(timer);
        resolve();
      }
      this.drained = done;
    });
  }

  async close(): Promise<void> {
    this.closing = true;
    const tasks: Promise<void>[] = [];
    if (this.udp) {
      const u = this.udp;
      // No new queries; answers still being worked out (a forward in flight) get up to a
      // second to go out before the socket closes.
      u.removeAllListeners('message');
      tasks.push(
        this.udpDrained(UDP_DRAIN_MS).then(
          () =>
            new Promise<void>((r) => {
              this.udpOpen = false;
              u.close(() => r());
            }),
        ),
      );
    }
    if (this.tcp) {
      const t = this.tcp;
      tasks.push(new Promise<void>((r) => t.close(() => r())));
    }
    for (const c of this.conns) c.end();
    setTimeout(() => {
      for (const c of this.conns) c.destroy();
    }, 1000).unref();
    await Promise.all(tasks);
  }
}

const UDP_DRAIN_MS = 1000;

export function listenerKey(host: string, port: number): string {
  return `${host}|${port}`;
}
