// Queries that reach a worker other than their name's owner (TCP, and UDP where the kernel
// does not steer by name) are handed to the owner over a local stream socket and its answer
// relayed back, so every name is answered from one cache, one single-flight and one set of
// prepared answers whichever worker accepted the connection. A TCP client that leaves is
// reported to the owner (a frame of just the ID), so its query's upstream work stops there too.

import net from 'node:net';
import { logger } from '../log.js';
import type { Dispatcher } from './dispatcher.js';
import type { ClientInfo, LeaveListener, Transport } from './request.js';
import { shardOf, workerShard } from './shards.js';

const log = logger('');

/** Queries in flight on one link; past it the receiving worker answers itself. */
const MAX_PENDING = 16_384;
/** After a failed connection to a peer (it is being replaced), answer locally this long. */
const RETRY_MS = 100;
/** Largest frame accepted from a peer (a 64 KiB message plus its header). */
const MAX_FRAME = 70_000;

type Send = (b: Buffer | null, client: ClientInfo) => void;

interface Pending {
  msg: Buffer;
  client: ClientInfo;
  routerKey: string;
  send: Send;
  /** Follows a TCP client, to tell the owner when it leaves. */
  watch: LeaveWatch | null;
}

/** Tells the owner of a handed-over TCP query that its client left. */
class LeaveWatch implements LeaveListener {
  constructor(
    private readonly link: PeerLink,
    private readonly id: number,
  ) {}

  clientLeft(): void {
    this.link.clientLeft(this.id);
  }
}

/** The client of a query handed over by a peer; a TCP one leaves when the peer says so. */
class HandedClient implements ClientInfo {
  gone = false;
  private listeners: Set<LeaveListener> | null = null;

  constructor(
    readonly proto: Transport,
    readonly family: 1 | 2,
    readonly remotePort: number,
    readonly localPort: number,
    readonly remoteAddress: string,
    readonly localAddress: string,
  ) {}

  follow(l: LeaveListener): void {
    if (this.gone) l.clientLeft();
    else (this.listeners ??= new Set()).add(l);
  }

  unfollow(l: LeaveListener): void {
    this.listeners?.delete(l);
  }

  leave(): void {
    if (this.gone) return;
    this.gone = true;
    const ls = this.listeners;
    this.listeners = null;
    if (ls !== null) for (const l of ls) l.clientLeft();
  }
}

/** The abstract socket of shard `index` in this server (the primary's pid names the server). */
function linkPath(index: number, primaryPid = process.ppid): string {
  return `\0clusterdns-${primaryPid}-shard-${index}`;
}

/** What happens to a query its owner will not answer (the link closed): answered here, or dropped. */
type Unanswered = (msg: Buffer, client: ClientInfo, routerKey: string, send: Send) => void;

/** Splits a stream into length-prefixed frames (u32 length, then the frame). */
function frameReader(onFrame: (f: Buffer) => void, onBad: () => void): (chunk: Buffer) => void {
  let pending: Buffer | null = null;
  return (chunk) => {
    const buf = pending ? Buffer.concat([pending, chunk]) : chunk;
    pending = null;
    let off = 0;
    while (buf.length - off >= 4) {
      const len = buf.readUInt32BE(off);
      if (len > MAX_FRAME) {
        onBad();
        return;
      }
      if (buf.length - off - 4 < len) break;
      onFrame(buf.subarray(off + 4, off + 4 + len));
      off += 4 + len;
    }
    if (off < buf.length) pending = Buffer.from(buf.subarray(off));
  };
}

const uncork = (sock: net.Socket) => sock.uncork();

/** Writes a frame; the frames of one tick (a batch of datagrams) leave in one writev. */
function corkedWrite(sock: net.Socket, frame: Buffer): void {
  if (sock.writableCorked === 0) {
    sock.cork();
    process.nextTick(uncork, sock);
  }
  sock.write(frame);
}

/** One worker's links: a server its peers hand queries to, and a client link to each peer. */
export class ShardLinks {
  private readonly peers: Array<PeerLink | null>;
  private server: net.Server | null = null;

  constructor(
    readonly index: number,
    readonly count: number,
    private readonly dispatcher: Dispatcher,
  ) {
    const local: Unanswered = (msg, client, key, send) =>
      dispatcher.handle(msg, client, dispatcher.routers.get(key), send);
    this.peers = Array.from({ length: count }, (_, i) => (i === index ? null : new PeerLink(linkPath(i), local)));
  }

  listen(): Promise<void> {
    const server = net.createServer((sock) => this.serve(sock));
    this.server = server;
    return new Promise<void>((resolve) => {
      server.once('error', (e) => {
        // Another process of this server still holds the name (an old worker exiting): peers answer locally meanwhile.
        log.warn(`shard ${this.index}: cannot take query handoffs: ${e.message}`);
        resolve();
      });
      server.listen(linkPath(this.index), () => resolve());
    });
  }

  /** Hands `msg` to the worker that owns its name; false when this worker should answer it. */
  forward(msg: Buffer, client: ClientInfo, routerKey: string, send: Send): boolean {
    const owner = shardOf(msg, this.count);
    const peer = this.peers[owner];
    return peer !== null && peer !== undefined && peer.forward(msg, client, routerKey, send);
  }

  close(): void {
    this.server?.close();
    for (const p of this.peers) p?.close();
  }

  /** A peer's link: answer each query it hands over and send the answer back on the same link. */
  private serve(sock: net.Socket): void {
    sock.setNoDelay(true);
    sock.on('error', () => sock.destroy());
    const d = this.dispatcher;
    /** TCP queries of this link not answered yet, by the peer's ID. */
    const tcpClients = new Map<number, HandedClient>();
    sock.on('close', () => {
      // The peer is gone and its connections with it.
      for (const c of tcpClients.values()) c.leave();
      tcpClients.clear();
    });
    sock.on(
      'data',
      frameReader(
        (f) => {
          // Just an ID: that query's TCP client left.
          if (f.length === 4) {
            tcpClients.get(f.readUInt32BE(0))?.leave();
            return;
          }
          // id u32, proto u8, family u8, remotePort u16, localPort u16, 3 × (length u8, text), message
          if (f.length < 13) return;
          const id = f.readUInt32BE(0);
          let at = 10;
          const text = (): string => {
            const n = f[at]!;
            const s = f.toString('latin1', at + 1, at + 1 + n);
            at += 1 + n;
            return s;
          };
          const routerKey = text();
          const tcp = f[4] === 1;
          const family = f[5] === 2 ? 2 : 1;
          const client: ClientInfo = tcp
            ? new HandedClient('tcp', family, f.readUInt16BE(6), f.readUInt16BE(8), text(), text())
            : {
                proto: 'udp',
                family,
                remotePort: f.readUInt16BE(6),
                localPort: f.readUInt16BE(8),
                remoteAddress: text(),
                localAddress: text(),
              };
          if (at > f.length) return;
          const msg = Buffer.from(f.subarray(at));
          if (tcp) tcpClients.set(id, client as HandedClient);
          d.handle(msg, client, d.routers.get(routerKey), (out) => {
            if (tcp) tcpClients.delete(id);
            if (sock.destroyed) return;
            const r = Buffer.allocUnsafe(9 + (out?.length ?? 0));
            r.writeUInt32BE(5 + (out?.length ?? 0), 0);
            r.writeUInt32BE(id, 4);
            r[8] = out === null ? 1 : 0;
            out?.copy(r, 9);
            corkedWrite(sock, r);
          });
        },
        () => sock.destroy(),
      ),
    );
  }
}

/** The link from this process to one worker. */
export class PeerLink {
  private sock: net.Socket | null = null;
  private retryAt = 0;
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();

  constructor(
    private readonly path: string,
    private readonly unanswered: Unanswered,
  ) {}

  /** The link to shard `index` of the server whose primary is this process. */
  static fromPrimary(index: number, unanswered: Unanswered): PeerLink {
    return new PeerLink(linkPath(index, process.pid), unanswered);
  }

  forward(msg: Buffer, client: ClientInfo, routerKey: string, send: Send): boolean {
    if (this.sock === null && !this.connect()) return false;
    if (this.pending.size >= MAX_PENDING) return false;
    const id = this.nextId;
    this.nextId = (id + 1) >>> 0 || 1;
    const key = Buffer.from(routerKey, 'latin1');
    const ra = Buffer.from(client.remoteAddress, 'latin1');
    const la = Buffer.from(client.localAddress, 'latin1');
    if (key.length > 255 || ra.length > 255 || la.length > 255) return false;
    const len = 10 + 3 + key.length + ra.length + la.length + msg.length;
    const f = Buffer.allocUnsafe(4 + len);
    f.writeUInt32BE(len, 0);
    f.writeUInt32BE(id, 4);
    f[8] = client.proto === 'tcp' ? 1 : 0;
    f[9] = client.family;
    f.writeUInt16BE(client.remotePort, 10);
    f.writeUInt16BE(client.localPort, 12);
    let at = 14;
    for (const b of [key, ra, la]) {
      f[at] = b.length;
      b.copy(f, at + 1);
      at += 1 + b.length;
    }
    msg.copy(f, at);
    const p: Pending = { msg, client, routerKey, send, watch: null };
    this.pending.set(id, p);
    corkedWrite(this.sock!, f);
    if (client.follow !== undefined) {
      p.watch = new LeaveWatch(this, id);
      client.follow(p.watch);
    }
    return true;
  }

  /** The TCP client of handed-over query `id` left: the owner is told (its answer still comes back). */
  clientLeft(id: number): void {
    if (this.sock === null || !this.pending.has(id)) return;
    const f = Buffer.allocUnsafe(8);
    f.writeUInt32BE(4, 0);
    f.writeUInt32BE(id, 4);
    corkedWrite(this.sock, f);
  }

  private connect(): boolean {
    const now = Date.now();
    if (now < this.retryAt) return false;
    const sock = net.connect(this.path);
    this.sock = sock;
    sock.setNoDelay(true);
    sock.on(
      'data',
      frameReader(
        (f) => {
          if (f.length < 5) return;
          const p = this.pending.get(f.readUInt32BE(0));
          if (!p) return;
          this.pending.delete(f.readUInt32BE(0));
          if (p.watch !== null) p.client.unfollow?.(p.watch);
          p.send(f[4] === 1 ? null : Buffer.from(f.subarray(5)), p.client);
        },
        () => sock.destroy(),
      ),
    );
    sock.on('error', () => sock.destroy());
    sock.on('close', () => {
      if (this.sock === sock) this.sock = null;
      this.retryAt = Date.now() + RETRY_MS;
      // The owner went away (killed, being replaced): what it had not answered is answered here.
      const left = [...this.pending.values()];
      this.pending.clear();
      for (const p of left) {
        if (p.watch !== null) p.client.unfollow?.(p.watch);
        this.unanswered(p.msg, p.client, p.routerKey, p.send);
      }
    });
    return true;
  }

  close(): void {
    this.sock?.destroy();
  }
}

let links: ShardLinks | null | undefined;

/**
 * This worker's handoff links (listening once created), or null in a single process or when
 * the worker has no shard.
 */
export function shardLinks(dispatcher: Dispatcher): ShardLinks | null {
  if (links !== undefined) return links;
  const shard = workerShard();
  if (shard === null) return (links = null);
  links = new ShardLinks(shard.index, shard.count, dispatcher);
  void links.listen();
  return links;
}
