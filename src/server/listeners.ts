// UDP and TCP listeners. The server owns all socket I/O: parsing the question, routing to
// a server block, FORMERR/NOTIMP/REFUSED/BADVERS, truncation, TCP framing and limits.

import cluster from 'node:cluster';
import dgram from 'node:dgram';
import dns from 'node:dns';
import net from 'node:net';
import { QClass, Rcode } from '../dns/constants.js';
import { parseQuery, QueryProblem } from '../dns/query.js';
import { logger } from '../log.js';
import { bareReply, finalizeReply } from './reply.js';
import { Request, type ClientInfo, type HandlerResult } from './request.js';
import { serverStats, type ZoneStats } from './stats.js';
import { queryNames } from '../status/names.js';
import { TcpConnection, type Dispatch, type TcpLimits } from './tcp-conn.js';
import {
  FLAG_TRUNCATED,
  META_INTS,
  OUT_INTS,
  udpBatchAddon,
  type UdpBatchAddon,
  type UdpBatchSocket,
} from './udp-native.js';
import { shardLinks, type ShardLinks } from './handoff.js';
import { inheritedUdpFd } from './shards.js';

const log = logger('');

/** A server block as the listener sees it. */
export interface RoutedBlock {
  zone: string;
  serverLabel: string;
  chain: (req: Request) => HandlerResult;
  /** Where this block's queries are counted (absent in unit tests that route by hand). */
  stats?: ZoneStats;
  /** True when a plugin of the block answers classes other than IN (`chaos`); else they are REFUSED. */
  anyClass?: boolean;
  /** The `view` plugin's test: the block takes a query only when it passes. */
  filter?: (req: Request) => boolean;
  /** The next block on the same zone and port, tried when this one's filter says no. */
  nextView?: RoutedBlock;
}

/** Finds the block with the longest zone that contains a (lowercase) name. */
export class Router {
  private readonly zones = new Map<string, RoutedBlock>();
  /** Distinct lengths of the zones, longest first: a lookup tries one suffix per length. */
  private lengths: number[] = [];
  private root: RoutedBlock | undefined;
  /** Where queries that reach no chain are counted (CoreDNS's zone label "dropped"). */
  dropped: ZoneStats | null = null;

  add(routed: RoutedBlock): void {
    this.dropped ??= serverStats.zone(routed.serverLabel, 'dropped');
    // Each router links its own copies: the same block may sit behind several listeners.
    const block: RoutedBlock = { ...routed, nextView: undefined };
    if (block.zone === '.') {
      this.root = Router.chain(this.root, block);
      return;
    }
    this.zones.set(block.zone, Router.chain(this.zones.get(block.zone), block));
    if (!this.lengths.includes(block.zone.length))
      this.lengths = [...this.lengths, block.zone.length].sort((a, b) => b - a);
  }

  /** Blocks with a view are tried in the order they came; one without a view goes last. */
  private static chain(first: RoutedBlock | undefined, block: RoutedBlock): RoutedBlock {
    if (first === undefined) return block;
    if (first.filter === undefined) {
      block.nextView = first;
      return block;
    }
    let at = first;
    while (at.nextView !== undefined && at.nextView.filter !== undefined) at = at.nextView;
    block.nextView = at.nextView;
    at.nextView = block;
    return first;
  }

  /** The block for a query: the longest zone containing the name whose view (if any) accepts it. */
  route(req: Request): RoutedBlock | undefined {
    const lengths = this.lengths;
    const name = req.name;
    const n = name.length;
    for (let i = 0; i < lengths.length; i++) {
      const len = lengths[i]!;
      if (len > n) continue;
      if (len < n && name.charCodeAt(n - len - 1) !== 0x2e) continue;
      let b = this.zones.get(len === n ? name : name.slice(n - len));
      while (b !== undefined && b.filter !== undefined && !b.filter(req)) b = b.nextView;
      if (b !== undefined) return b;
    }
    let r = this.root;
    while (r !== undefined && r.filter !== undefined && !r.filter(req)) r = r.nextView;
    return r;
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
  /** Most TCP connections from one client address. */
  tcpMaxPerClient?: number;
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
    else {
      block = router?.route(req);
      if (block === undefined || (q.qclass !== QClass.IN && block.anyClass !== true)) {
        block = undefined;
        early = Rcode.REFUSED;
      }
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
          if (res.dropped || client.gone === true) {
            // Nothing to send: `acl`'s drop, or a TCP client that left while its answer was worked out.
            send(null);
            this.done();
            return;
          }
          const out = finalizeReply(req, res);
          send(out);
          if (res.more !== null && client.sendMore) for (const m of res.more) client.sendMore(m);
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
    if (result.dropped) {
      send(null);
      return;
    }
    const out = finalizeReply(req, result);
    send(out);
    if (result.more !== null && client.sendMore) for (const m of result.more) client.sendMore(m);
    if (counting && block.stats) this.count(block.stats, req, out, result.plugin, start);
  }

  private count(stats: ZoneStats, req: Request, out: Buffer, plugin: string, start: number): void {
    const rcode = out.length >= 4 ? out[3]! & 0xf : 0;
    stats.record(
      req.client.proto === 'udp' ? 0 : 1,
      req.client.family,
      req.qtype,
      req.do,
      req.raw.length,
      out.length,
      rcode,
      plugin,
      (performance.now() - start) / 1000,
    );
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
function headerOnlyReply(buf: Buffer, rcode: number, at = 0): Buffer {
  const out = Buffer.alloc(12);
  out.writeUInt16BE(buf.readUInt16BE(at), 0);
  const flags = buf.readUInt16BE(at + 2);
  out.writeUInt16BE(0x8000 | (flags & 0x7900) | (rcode & 0xf), 2);
  return out;
}

export class DnsListener {
  readonly key: string;
  private udp: dgram.Socket | null = null;
  private tcp: net.Server | null = null;
  private readonly conns = new Set<net.Socket>();
  private readonly connsPerClient = new Map<string, number>();
  /** The native batched socket (native/udpbatch.c), when it is used instead of `udp`. */
  private batch: NativeUdp | null = null;
  private closing = false;
  /** UDP queries handed to the dispatcher and not yet answered (or dropped). */
  private udpPending = 0;
  private udpOpen = true;
  private drained: (() => void) | null = null;
  boundPort = 0;
  /** With several workers: hands a query whose name another worker owns to that worker (TCP, and UDP the kernel did not steer). */
  private tcpHandoff: ShardLinks | null = null;
  /** @internal */
  udpHandoff: ShardLinks | null = null;

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
    const { addon, why } = udpBatchAddon();
    // Cluster workers read the SO_REUSEPORT socket of their shard, which the primary bound and
    // steers by question name (shards.ts). Where it could not, they share the primary's socket
    // (or, with CLUSTERDNS_NATIVE_UDP=reuseport, bind one each) and hand each query to the
    // worker that owns its name.
    const reusePort = cluster.isWorker && process.env.CLUSTERDNS_NATIVE_UDP === 'reuseport' && port !== 0;
    // The socket of this worker's shard, bound by the primary and steered by question name.
    const steeredFd = addon && cluster.isWorker ? inheritedUdpFd(host, port) : undefined;
    this.tcpHandoff = cluster.isWorker ? shardLinks(this.dispatcher) : null;
    this.udpHandoff = steeredFd === undefined ? this.tcpHandoff : null;
    let how = '';
    if (addon && steeredFd !== undefined) {
      this.startNative(addon, addon.adopt({ fd: steeredFd }));
      how = 'SO_REUSEPORT socket per worker, steered by question name';
    } else if (addon && !cluster.isWorker) {
      this.startNative(addon, this.openNative(addon, family === 'udp6', false));
      how = 'own socket';
    } else if (addon && reusePort) {
      this.startNative(addon, this.openNative(addon, family === 'udp6', true));
      how = 'SO_REUSEPORT socket per worker';
    } else if (addon) {
      await this.startDgram(family);
      const adopted = this.adoptDgram(addon);
      how = adopted ? 'socket shared by the workers' : '';
    } else {
      await this.startDgram(family);
    }
    if (how) logUdpPath(`UDP: batched native socket (recvmmsg/sendmmsg, ${how})`);
    else {
      const text = `UDP: node:dgram (native batched socket unavailable: ${addon ? 'cannot take over the socket node:dgram opened' : why})`;
      // Asked for by name and not there: say so; otherwise the fallback is normal (an image built without a compiler).
      logUdpPath(
        text,
        !addon && (process.env.CLUSTERDNS_NATIVE_UDP === '1' || process.env.CLUSTERDNS_NATIVE_UDP === 'reuseport'),
      );
    }
    try {
      await this.startTcp(port === 0 ? this.boundPort : port);
    } catch (e) {
      // The TCP port is taken: do not leave the UDP socket bound behind the failed start.
      this.batch?.close();
      this.batch = null;
      const u = this.udp;
      this.udp = null;
      if (u) await new Promise<void>((r) => u.close(() => r()));
      throw e;
    }
  }

  private openNative(addon: UdpBatchAddon, ipv6: boolean, reusePort: boolean): UdpBatchSocket {
    const { host, port } = this.opts;
    const workers = Number(process.env.CLUSTERDNS_WORKERS);
    return addon.open({
      address: host || (ipv6 ? '::' : '0.0.0.0'),
      port,
      ipv6,
      ipv6Only: this.opts.ipv6Only === true,
      reusePort,
      spread: reusePort && workers > 1 ? workers : 0,
      // The default buffer (~208 KiB) drops bursts of a few hundred queries.
      recvBuffer: this.opts.udpRecvBuffer ?? 4 * 1024 * 1024,
      sendBuffer: 1024 * 1024,
    });
  }

  /**
   * Reads the socket node:dgram bound (in a cluster worker: the one the primary holds for all
   * workers) through the addon: dgram stops reading, the addon polls a duplicate of the fd.
   * The dgram socket stays open, so the primary keeps sharing it.
   */
  private adoptDgram(addon: UdpBatchAddon): boolean {
    const udp = this.udp!;
    const state = Object.getOwnPropertySymbols(udp).find((k) => k.description === 'state symbol');
    const handle = state
      ? (udp as unknown as Record<symbol, { handle?: { fd?: number; recvStop?: () => number } }>)[state]?.handle
      : undefined;
    if (!handle || typeof handle.fd !== 'number' || handle.fd < 0 || typeof handle.recvStop !== 'function')
      return false;
    let sock: UdpBatchSocket;
    try {
      sock = addon.adopt({ fd: handle.fd });
    } catch {
      return false;
    }
    handle.recvStop();
    udp.removeAllListeners('message');
    this.startNative(addon, sock);
    return true;
  }

  private startNative(addon: UdpBatchAddon, sock: UdpBatchSocket): void {
    this.boundPort = sock.port;
    this.batch = new NativeUdp(addon, sock, this, this.dispatcher);
    this.batch.start();
  }

  /** @internal */
  routerForUdp(): Router | undefined {
    return this.router();
  }

  /** @internal One UDP query taken on (it must end with udpAnswered). */
  udpTaken(): void {
    this.udpPending++;
  }

  /** @internal */
  udpAnswered(): void {
    this.udpDone();
  }

  /** @internal False once the socket closed: late answers are dropped. */
  get udpIsOpen(): boolean {
    return this.udpOpen;
  }

  private async startDgram(family: 'udp4' | 'udp6'): Promise<void> {
    const { host, port } = this.opts;
    const udp = dgram.createSocket({
      type: family,
      reuseAddr: false,
      ipv6Only: this.opts.ipv6Only === true,
      lookup: literalLookup(family),
    });
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
      const answer = (out: Buffer | null) => {
        // An answer that finishes after the socket closed (shutdown, or a reload that dropped
        // this listener) is lost: dgram would throw ERR_SOCKET_DGRAM_NOT_RUNNING.
        if (out === null || !this.udpOpen) this.udpDone();
        // While closing, the socket waits for the send itself: close() cancels queued sends.
        else if (this.closing) udp.send(out, rinfo.port, rinfo.address, this.udpDoneCb);
        else {
          udp.send(out, rinfo.port, rinfo.address);
          this.udpDone();
        }
      };
      const h = this.udpHandoff;
      if (h === null || !h.forward(msg, client, this.key, answer)) d.handle(msg, client, this.router(), answer);
    });
    this.udp = udp;
  }

  private async startTcp(port: number): Promise<void> {
    const { host } = this.opts;
    const limits: TcpLimits = {
      firstReadMs: TCP_FIRST_READ_MS,
      idleMs: this.opts.tcpIdleMs ?? TCP_IDLE_MS,
      writeMs: TCP_WRITE_MS,
      maxInflight: this.opts.tcpMaxInflightPerConn ?? TCP_MAX_INFLIGHT,
      maxUnsent: TCP_MAX_UNSENT,
    };
    const perClient = this.opts.tcpMaxPerClient ?? TCP_MAX_PER_CLIENT;
    const server = net.createServer({ pauseOnConnect: false, noDelay: true });
    server.maxConnections = this.opts.tcpMaxConnections ?? TCP_MAX_CONNECTIONS;
    server.on('connection', (sock) => this.onConnection(sock, limits, perClient));
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

  private onConnection(sock: net.Socket, limits: TcpLimits, perClient: number): void {
    if (this.closing) {
      sock.destroy();
      return;
    }
    const from = sock.remoteAddress ?? '';
    const open = this.connsPerClient.get(from) ?? 0;
    if (open >= perClient) {
      // One address cannot take the whole listener's connections from everyone else.
      sock.destroy();
      return;
    }
    this.connsPerClient.set(from, open + 1);
    this.conns.add(sock);
    sock.on('close', () => {
      this.conns.delete(sock);
      const left = (this.connsPerClient.get(from) ?? 1) - 1;
      if (left > 0) this.connsPerClient.set(from, left);
      else this.connsPerClient.delete(from);
    });
    new TcpConnection(sock, this.dispatchTcp, limits);
  }

  /** A TCP query goes to the worker that owns its name (one cache); a zone transfer, several messages long, is answered here. */
  private readonly dispatchTcp: Dispatch = (msg, client, send) => {
    const h = this.tcpHandoff;
    if (h === null || isZoneTransferQuery(msg) || !h.forward(msg, client, this.key, send))
      this.dispatcher.handle(msg, client, this.router(), send);
  };

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
    const u = this.udp;
    const b = this.batch;
    if (u || b) {
      // No new queries (on the native path datagrams wait in the kernel); answers still being
      // worked out (a forward in flight) get up to a second to go out before the socket closes.
      if (b) b.pause();
      else u!.removeAllListeners('message');
      tasks.push(
        this.udpDrained(UDP_DRAIN_MS).then(async () => {
          this.udpOpen = false;
          b?.close();
          if (u) await new Promise<void>((r) => u.close(() => r()));
        }),
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

/** TCP defaults (README, "How a query is answered"): CoreDNS's read, idle and write timeouts. */
const TCP_FIRST_READ_MS = 3000;
const TCP_IDLE_MS = 10_000;
const TCP_WRITE_MS = 5000;
const TCP_MAX_CONNECTIONS = 1000;
const TCP_MAX_PER_CLIENT = 100;
const TCP_MAX_INFLIGHT = 128;
const TCP_MAX_UNSENT = 256 * 1024;

/**
 * dgram resolves the destination of every send() with dns.lookup, which for an address
 * literal (always the case: answers go to rinfo's address) still costs a process.nextTick
 * per answer; this answers literals at once (less CPU per query on the dgram path) and
 * leaves names to dns.lookup.
 */
function literalLookup(type: 'udp4' | 'udp6'): dgram.SocketOptions['lookup'] {
  const family = type === 'udp6' ? 6 : 4;
  const f = (
    address: string,
    options: unknown,
    cb: (err: Error | null, address: string, family: number) => void,
  ): void => {
    if (net.isIP(address) !== 0) cb(null, address, family);
    else dns.lookup(address, options as dns.LookupOneOptions, cb as never);
  };
  return f;
}

let udpPathLogged = false;

/** Which UDP path this process uses, once, at debug level (a warning when it was asked for and is missing). */
function logUdpPath(text: string, warn = false): void {
  if (udpPathLogged) return;
  udpPathLogged = true;
  if (warn) log.warn(text);
  else log.debug(text);
}

/**
 * A UDP client on the native path: the peer's address stays four numbers until a plugin asks
 * for it as text. `send` answers into the current batch when it is called while the batch is
 * being handled, else straight to the peer.
 */
class BatchClient implements ClientInfo {
  remotePort: number;
  family: 1 | 2;
  private text: string | undefined;
  readonly send = (out: Buffer | null): void => this.path.reply(this, out);

  constructor(
    private readonly path: NativeUdp,
    readonly gen: number,
    readonly slot: number,
    readonly af: number,
    port: number,
    readonly scope: number,
    readonly a0: number,
    readonly a1: number,
    readonly a2: number,
    readonly a3: number,
  ) {
    this.remotePort = port;
    this.family = af === 6 ? 2 : 1;
  }

  get proto(): 'udp' {
    return 'udp';
  }

  get remoteAddress(): string {
    if (this.text === undefined) {
      const a = this.a0;
      this.text =
        this.af === 4 ? `${a >>> 24}.${(a >>> 16) & 255}.${(a >>> 8) & 255}.${a & 255}` : this.path.ntop(this);
    }
    return this.text;
  }

  get localAddress(): string {
    return this.path.localAddress;
  }

  get localPort(): number {
    return this.path.localPort;
  }
}

/**
 * The UDP side of a DnsListener on the native socket: one call per batch of datagrams
 * (recvmmsg); answers made while the batch is handled are packed into the shared `out` slab
 * and leave in one sendmmsg when the callback returns; answers that come later (forward)
 * leave one by one.
 */
class NativeUdp {
  readonly localAddress: string;
  readonly localPort: number;
  private readonly inBuf: Buffer;
  private readonly meta: Int32Array;
  private readonly out: Uint8Array;
  private readonly outMeta: Int32Array;
  private readonly slotSize: number;
  private gen = 0;
  private inBatch = false;
  private outCount = 0;
  private outOff = 0;

  constructor(
    private readonly addon: UdpBatchAddon,
    private readonly sock: UdpBatchSocket,
    private readonly listener: DnsListener,
    private readonly dispatcher: Dispatcher,
  ) {
    this.localAddress = sock.address;
    this.localPort = sock.port;
    this.inBuf = Buffer.from(sock.in);
    this.meta = new Int32Array(sock.meta);
    this.out = new Uint8Array(sock.out);
    this.outMeta = new Int32Array(sock.outMeta);
    this.slotSize = sock.slotSize;
  }

  start(): void {
    this.addon.start(this.sock, this.onBatch);
  }

  pause(): void {
    this.addon.pause(this.sock);
  }

  close(): void {
    this.addon.close(this.sock);
  }

  ntop(c: BatchClient): string {
    return this.addon.ntop(c.af, c.scope, c.a0, c.a1, c.a2, c.a3);
  }

  private readonly onBatch = (n: number): number => {
    const meta = this.meta;
    const inBuf = this.inBuf;
    const l = this.listener;
    const d = this.dispatcher;
    const router = l.routerForUdp();
    const handoff = l.udpHandoff;
    const gen = ++this.gen;
    this.outCount = 0;
    this.outOff = 0;
    this.inBatch = true;
    try {
      for (let i = 0; i < n; i++) {
        const m = i * META_INTS;
        const len = meta[m]!;
        const af = meta[m + 2]!;
        if (af !== 4 && af !== 6) continue;
        const c = new BatchClient(
          this,
          gen,
          i,
          af,
          meta[m + 3]!,
          meta[m + 4]!,
          meta[m + 5]!,
          meta[m + 6]!,
          meta[m + 7]!,
          meta[m + 8]!,
        );
        const at = i * this.slotSize;
        l.udpTaken();
        if ((meta[m + 1]! & FLAG_TRUNCATED) !== 0) {
          // Longer than a slot (64 KiB: cannot happen with the default slots): what arrived is
          // not the whole query. A readable query header gets FORMERR, anything else is dropped.
          c.send(len >= 12 && (inBuf[at + 2]! & 0x80) === 0 ? headerOnlyReply(inBuf, Rcode.FORMERR, at) : null);
          continue;
        }
        // A copy: the slot is reused by the next batch, and an answer worked out later
        // (forward) still reads the query; a view instead saved nothing measurable.
        const msg = Buffer.allocUnsafe(len);
        inBuf.copy(msg, 0, at, at + len);
        if (handoff === null || !handoff.forward(msg, c, l.key, c.send)) d.handle(msg, c, router, c.send);
      }
    } finally {
      this.inBatch = false;
    }
    return this.outCount;
  };

  reply(c: BatchClient, out: Buffer | null): void {
    const l = this.listener;
    if (out !== null && l.udpIsOpen) {
      const len = out.length;
      if (this.inBatch && c.gen === this.gen && len <= this.out.length - this.outOff) {
        const at = this.outOff;
        this.out.set(out, at);
        const k = this.outCount++ * OUT_INTS;
        this.outMeta[k] = at;
        this.outMeta[k + 1] = len;
        this.outMeta[k + 2] = c.slot;
        this.outOff = at + len;
      } else {
        this.addon.sendTo(this.sock, out, c.af, c.remotePort, c.scope, c.a0, c.a1, c.a2, c.a3);
      }
    }
    l.udpAnswered();
  }
}

/** AXFR or IXFR, read from the raw question (a name of plain labels; anything else is not one). */
function isZoneTransferQuery(msg: Buffer): boolean {
  let p = 12;
  while (p < msg.length && msg[p]! !== 0) {
    if (msg[p]! > 63) return false;
    p += 1 + msg[p]!;
  }
  if (p + 3 > msg.length) return false;
  const qtype = (msg[p + 1]! << 8) | msg[p + 2]!;
  return qtype === 252 || qtype === 251;
}

export function listenerKey(host: string, port: number): string {
  return `${host}|${port}`;
}
