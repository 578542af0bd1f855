// UDP and TCP listeners. The server owns all socket I/O: parsing the question, routing to
// a server block, FORMERR/NOTIMP/REFUSED/BADVERS, truncation, TCP framing and limits.

import cluster from 'node:cluster';
import dgram from 'node:dgram';
import dns from 'node:dns';
import net from 'node:net';
import { logger } from '../log.js';
import type { ClientInfo } from './request.js';
import type { Dispatcher } from './dispatcher.js';
import type { Router } from './router.js';
import { TcpConnection, type Dispatch, type TcpLimits } from './tcp-conn.js';
import { udpBatchAddon, type UdpBatchAddon, type UdpBatchSocket } from './udp-native.js';
import { NativeUdp } from './udp-batch.js';
import { shardLinks, type ShardLinks } from './handoff.js';
import { inheritedUdpFd } from './shards.js';

const log = logger('');

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
