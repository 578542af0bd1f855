// TCP and DNS-over-TLS to one upstream: pooled connections that carry many queries at
// once (pipelined, answers matched by ID in any order), reused while busy and closed
// after `expire` without use, as CoreDNS's connection cache does.

import net from 'node:net';
import tls from 'node:tls';
import { answersQuestion, randomId } from './wire.js';
import { goErrorText, joinHostPort, takeBack, type ConnStats, type Outstanding, type PendingTry } from './exchange.js';

/** Queries in flight on one connection before another is opened. */
const MAX_PIPELINE = 64;

/**
 * Where every plain-TCP upstream connection reads into: each read is parsed before the next
 * begins, so one buffer serves them all instead of a fresh 64 KB one per read (each of which
 * counts toward V8's external memory and brings its next collection sooner).
 */
const READ_BUFFER = Buffer.allocUnsafeSlow(65536);

export interface StreamTarget {
  host: string;
  port: number;
  /** TLS settings for DNS over TLS; null for plain TCP. */
  tls: tls.ConnectionOptions | null;
}

interface ConnOwner {
  onIdle(c: StreamConn): void;
  onClosed(c: StreamConn): void;
  onSession?: (session: Buffer) => void;
}

/** One TCP or TLS connection and the queries waiting on it. */
export class StreamConn implements PendingTry {
  private readonly sock: net.Socket;
  private readonly pending = new Map<number, Outstanding>();
  /** The message being put together from several reads, allocated once at its full length. */
  private frame: Buffer | null = null;
  private have = 0;
  /** First octet of a length prefix whose second has not arrived, or -1. */
  private lenHi = -1;
  private connected = false;
  private readonly remote: string;
  private readonly tlsConn: boolean;
  private lastError = '';
  private local = '';
  /** Queries sent so far (a query on a connection that already served one is a cache hit). */
  served = 0;
  lastUsed = Date.now();
  /** No new queries: a query timed out on it, or it is closing. */
  draining = false;
  closed = false;

  constructor(
    target: StreamTarget,
    private readonly owner: ConnOwner | null,
    session: Buffer | undefined,
  ) {
    this.remote = joinHostPort(target.host, target.port);
    this.tlsConn = target.tls !== null;
    if (target.tls) {
      const s = tls.connect({ ...target.tls, host: target.host, port: target.port, session });
      s.once('secureConnect', this.onConnect);
      if (owner?.onSession) s.on('session', owner.onSession);
      this.sock = s;
    } else {
      this.sock = net.connect({
        host: target.host,
        port: target.port,
        noDelay: true,
        onread: { buffer: READ_BUFFER, callback: this.onRead },
      });
      this.sock.once('connect', this.onConnect);
    }
    // With onread (plain TCP) there are no 'data' events; TLS delivers a fresh buffer per read.
    this.sock.on('data', this.onData);
    this.sock.on('error', this.onError);
    this.sock.on('close', this.onClose);
    this.sock.unref();
  }

  get inflight(): number {
    return this.pending.size;
  }

  private readonly onConnect = (): void => {
    this.connected = true;
    this.sock.setNoDelay(true);
    if (this.sock.localAddress) this.local = joinHostPort(this.sock.localAddress, this.sock.localPort ?? 0);
  };

  /** "127.0.0.1:40000->127.0.0.1:53", as Go prints a connection in errors. */
  private label(): string {
    return `${this.local}->${this.remote}`;
  }

  send(o: Outstanding, timeoutMs: number): void {
    let id: number; // one call site for a redraw too (udp.ts send says why)
    do id = randomId();
    while (this.pending.has(id));
    o.id = id;
    o.query.writeUInt16BE(id, 0);
    o.reused = this.served > 0;
    this.served++;
    this.pending.set(id, o);
    o.timer = setTimeout(this.onTimeout, timeoutMs, o);
    // Written before the connection is up, the frame waits in the socket's buffer.
    this.sock.write(o.frame);
  }

  cancel(o: Outstanding): void {
    if (!takeBack(this.pending, o)) return;
    // The connection stays usable: a late answer to that ID is skipped like a timed-out one's.
    this.settled();
  }

  private readonly onRead = (nread: number, buf: Uint8Array): boolean => {
    this.consume(buf as Buffer, nread, true);
    return true;
  };

  private readonly onData = (chunk: Buffer): void => {
    this.consume(chunk, chunk.length, false);
  };

  /**
   * Takes the messages in buf[0, end). Each byte is copied at most once, into a buffer of its
   * message's length: a 60 KB answer spread over reads is not re-concatenated read after read.
   * A message whole in a buffer of its own (`shared` false) is used where it lies.
   */
  private consume(buf: Buffer, end: number, shared: boolean): void {
    let off = 0;
    while (off < end) {
      let frame = this.frame;
      if (frame === null) {
        let len: number;
        if (this.lenHi >= 0) {
          len = (this.lenHi << 8) | buf[off++]!;
          this.lenHi = -1;
        } else if (end - off >= 2) {
          len = (buf[off]! << 8) | buf[off + 1]!;
          off += 2;
        } else {
          this.lenHi = buf[off]!;
          return;
        }
        if (len < 12) {
          // Not a DNS message: the stream cannot be trusted any further.
          this.lastError = 'dns: short read';
          this.sock.destroy();
          return;
        }
        if (!shared && end - off >= len) {
          const msg = buf.subarray(off, off + len);
          off += len;
          this.deliver(msg);
          continue;
        }
        frame = this.frame = Buffer.allocUnsafe(len);
        this.have = 0;
      }
      const n = Math.min(frame.length - this.have, end - off);
      buf.copy(frame, this.have, off, off + n);
      this.have += n;
      off += n;
      if (this.have < frame.length) return;
      this.frame = null;
      this.deliver(frame);
    }
  }

  private deliver(msg: Buffer): void {
    const o = this.pending.get((msg[0]! << 8) | msg[1]!);
    if (o === undefined) return; // an answer to a query that already timed out
    this.pending.delete(o.id);
    clearTimeout(o.timer!);
    o.timer = null;
    this.settled();
    if (answersQuestion(msg, o.query, o.questionEnd)) o.onAnswer(msg);
    else o.onMismatch();
  }

  private readonly onTimeout = (o: Outstanding): void => {
    if (this.pending.get(o.id) !== o) return;
    this.pending.delete(o.id);
    o.timer = null;
    // A connection that let a query time out takes no more; it goes once it is quiet.
    this.draining = true;
    this.settled();
    o.onFailure(`read tcp ${this.label()}: i/o timeout`, false);
  };

  private readonly onError = (e: NodeJS.ErrnoException): void => {
    if (this.connected) this.lastError = `read tcp ${this.label()}: ${goErrorText(e)}`;
    else if (e.code !== undefined && e.syscall === 'connect')
      this.lastError = `dial tcp ${this.remote}: connect: ${goErrorText(e)}`;
    else if (this.tlsConn) this.lastError = `dial tcp ${this.remote}: tls: ${e.message}`;
    else this.lastError = `dial tcp ${this.remote}: ${goErrorText(e)}`;
  };

  private readonly onClose = (): void => {
    this.closed = true;
    this.draining = true;
    const error = this.lastError || `read tcp ${this.label()}: EOF`;
    const eof = this.lastError === '';
    const waiting = [...this.pending.values()];
    this.pending.clear();
    for (const o of waiting) {
      if (o.timer) clearTimeout(o.timer);
      o.timer = null;
    }
    this.owner?.onClosed(this);
    // The peer closing a connection we had already used is CoreDNS's ErrCachedClosed: retry.
    for (const o of waiting) o.onFailure(error, eof && o.reused);
  };

  private settled(): void {
    this.lastUsed = Date.now();
    if (this.pending.size !== 0) return;
    if (this.draining) this.destroy();
    else this.owner?.onIdle(this);
  }

  /** No new queries; closes when the last one settles. */
  retire(): void {
    this.draining = true;
    if (this.pending.size === 0) this.destroy();
  }

  destroy(): void {
    this.draining = true;
    if (!this.sock.destroyed) this.sock.destroy();
  }
}

export interface StreamPoolOptions {
  expireMs: number;
  /** Idle connections kept; 0 = no limit. */
  maxIdle: number;
}

/** The TCP (or TLS) connections of one upstream. */
export class StreamPool implements ConnOwner {
  private readonly conns: StreamConn[] = [];
  private sweeper: NodeJS.Timeout | null = null;
  private session: Buffer | undefined;
  private stopped = false;
  private readonly proto: 1 | 2;

  constructor(
    private readonly target: StreamTarget,
    private readonly opts: StreamPoolOptions,
    private readonly stats: ConnStats,
  ) {
    this.proto = target.tls ? 2 : 1;
  }

  readonly onSession = (session: Buffer): void => {
    this.session = session;
  };

  /** Sends `o` on a pooled (or new) connection, which it returns. */
  send(o: Outstanding, timeoutMs: number): PendingTry {
    const now = Date.now();
    let conn: StreamConn | null = null;
    // Newest first: busy connections stay busy and old idle ones age out.
    for (let i = this.conns.length - 1; i >= 0; i--) {
      const c = this.conns[i]!;
      if (c.draining) continue;
      if (c.inflight === 0 && now - c.lastUsed >= this.opts.expireMs) {
        c.retire();
        continue;
      }
      if (c.inflight < MAX_PIPELINE) {
        conn = c;
        break;
      }
    }
    if (conn === null) {
      conn = new StreamConn(this.target, this.stopped ? null : this, this.session);
      if (!this.stopped) {
        this.conns.push(conn);
        this.startSweeper();
      }
      this.stats.connMisses[this.proto]!++;
    } else {
      this.stats.connHits[this.proto]!++;
    }
    conn.send(o, timeoutMs);
    if (this.stopped) conn.retire();
    return conn;
  }

  onIdle(c: StreamConn): void {
    if (this.stopped || this.opts.expireMs === 0) {
      c.retire();
      return;
    }
    if (this.opts.maxIdle > 0) {
      let idle = 0;
      for (const x of this.conns) if (!x.draining && x.inflight === 0) idle++;
      if (idle > this.opts.maxIdle) c.retire();
    }
  }

  onClosed(c: StreamConn): void {
    const i = this.conns.indexOf(c);
    if (i >= 0) this.conns.splice(i, 1);
    if (this.conns.length === 0 && this.sweeper) {
      clearInterval(this.sweeper);
      this.sweeper = null;
    }
  }

  private startSweeper(): void {
    if (this.sweeper) return;
    const every = Math.max(50, Math.min(this.opts.expireMs, 10_000));
    this.sweeper = setInterval(() => this.sweep(), every);
    this.sweeper.unref();
  }

  private sweep(): void {
    const now = Date.now();
    for (const c of [...this.conns])
      if (!c.draining && c.inflight === 0 && now - c.lastUsed >= this.opts.expireMs) c.retire();
  }

  /** Open connections (for tests and status). */
  get size(): number {
    return this.conns.length;
  }

  close(): void {
    this.stopped = true;
    if (this.sweeper) clearInterval(this.sweeper);
    this.sweeper = null;
    for (const c of [...this.conns]) c.destroy();
  }
}
