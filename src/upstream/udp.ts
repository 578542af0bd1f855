// UDP to one upstream: a few connected sockets, each on a port the kernel picks at random,
// each carrying many queries told apart by random IDs, and each replaced after a short
// life so the source port keeps changing. Connected sockets let the kernel drop datagrams
// from any other address or port, and report "connection refused" at once.

import dgram from 'node:dgram';
import { answersQuestion, randomBelow, randomId } from './wire.js';
import { goErrorText, joinHostPort, takeBack, type ConnStats, type Outstanding, type PendingTry } from './exchange.js';

/** Sockets per upstream; each query takes one at random. */
const SLOTS = 4;
/** Queries a socket carries before it is replaced (a new random source port). */
const MAX_USES = 100;
/** Milliseconds a socket is given new queries for before it is replaced. */
const MAX_AGE_MS = 1000;

/** Timers may fire this much before a deadline read from performance.now(). */
const TIMER_SLACK_MS = 1;

/** One connected UDP socket. It closes once retired and no query is waiting on it. */
export class UdpChannel implements PendingTry {
  private readonly sock: dgram.Socket;
  private readonly pending = new Map<number, Outstanding>();
  // Deadlines of the queries sent, in send order (a channel carries at most MAX_USES): one
  // timer per channel sweeps them instead of a timer per query. An answered query's slot is
  // emptied at once so the channel does not keep it alive until the sweep.
  private dueQuery: Array<Outstanding | null> = [];
  private dueHead = 0;
  private dueId: number[] = [];
  private dueAt: number[] = [];
  private sweepTimer: NodeJS.Timeout | null = null;
  private sweepAt = Infinity;
  private queued: Outstanding[] = [];
  private connected = false;
  private retired = false;
  closed = false;
  uses = 0;
  readonly born = Date.now();
  /** "127.0.0.1:40693->127.0.0.1:53", as Go prints a connection in errors. */
  private label: string;

  constructor(
    private readonly host: string,
    private readonly port: number,
  ) {
    this.label = `->${joinHostPort(host, port)}`;
    this.sock = dgram.createSocket(host.includes(':') ? 'udp6' : 'udp4');
    this.sock.on('message', this.onMessage);
    this.sock.on('error', this.onError);
    this.sock.connect(port, host, this.onConnect);
    this.sock.unref();
  }

  // Node passes a failed connect (no route, bad address) to this callback, not to 'error'.
  private readonly onConnect = (err?: Error | null): void => {
    if (this.closed) return;
    if (err) {
      this.onError(err);
      return;
    }
    this.connected = true;
    try {
      const a = this.sock.address();
      this.label = `${joinHostPort(a.address, a.port)}->${joinHostPort(this.host, this.port)}`;
    } catch {
      // The label keeps its remote-only form.
    }
    const q = this.queued;
    this.queued = [];
    for (const o of q) if (this.pending.get(o.id) === o) this.transmit(o);
  };

  /** A send that fails at once (the socket went away) fails the query instead of throwing. */
  private transmit(o: Outstanding): void {
    try {
      this.sock.send(o.query);
    } catch (e) {
      this.onError(e as NodeJS.ErrnoException);
    }
  }

  /** Sends `o` with a fresh ID unique on this socket; its answer or failure comes back through `o`. */
  send(o: Outstanding, timeoutMs: number): void {
    let id = randomId();
    while (this.pending.has(id)) id = randomId();
    o.id = id;
    o.query.writeUInt16BE(id, 0);
    o.reused = this.uses > 0;
    this.uses++;
    this.pending.set(id, o);
    const due = performance.now() + timeoutMs;
    this.dueQuery.push(o);
    this.dueId.push(id);
    this.dueAt.push(due);
    if (due < this.sweepAt) this.armSweep(due, timeoutMs);
    if (this.connected) this.transmit(o);
    else this.queued.push(o);
  }

  cancel(o: Outstanding): void {
    if (!takeBack(this.pending, o)) return;
    // A cancelled query still in `queued` is skipped on connect: it is no longer pending.
    this.settled();
  }

  private readonly onMessage = (msg: Buffer): void => {
    if (msg.length < 12) return;
    const o = this.pending.get((msg[0]! << 8) | msg[1]!);
    // A stray or spoofed datagram (wrong ID, not a response, another question) is dropped
    // and the real answer still awaited.
    if (o === undefined || !answersQuestion(msg, o.query, o.questionEnd)) return;
    this.pending.delete(o.id);
    this.forget(o);
    this.settled();
    o.onAnswer(msg);
  };

  /** Empties the slot of an answered query; answers mostly come in send order, so this is short. */
  private forget(o: Outstanding): void {
    const q = this.dueQuery;
    for (let i = this.dueHead; i < q.length; i++)
      if (q[i] === o) {
        q[i] = null;
        break;
      }
    while (this.dueHead < q.length && q[this.dueHead] === null) this.dueHead++;
  }

  private armSweep(at: number, inMs: number): void {
    if (this.sweepTimer !== null) clearTimeout(this.sweepTimer);
    this.sweepAt = at;
    this.sweepTimer = setTimeout(this.sweep, Math.max(1, Math.ceil(inMs)));
  }

  /** Fails the queries whose deadline has passed and re-arms for the earliest one left. */
  private readonly sweep = (): void => {
    this.sweepTimer = null;
    this.sweepAt = Infinity;
    const now = performance.now();
    const q = this.dueQuery;
    const expired: Outstanding[] = [];
    let next = Infinity;
    for (let i = this.dueHead; i < q.length; i++) {
      const o = q[i];
      if (o === null || o === undefined) continue;
      const id = this.dueId[i]!;
      const at = this.dueAt[i]!;
      if (this.pending.get(id) !== o) {
        // Failed by other means, or its ID since reused by another query.
        q[i] = null;
      } else if (at <= now + TIMER_SLACK_MS) {
        q[i] = null;
        this.pending.delete(id);
        expired.push(o);
      } else if (at < next) next = at;
    }
    while (this.dueHead < q.length && q[this.dueHead] === null) this.dueHead++;
    if (next !== Infinity) this.armSweep(next, next - now);
    if (expired.length > 0) this.settled();
    for (const o of expired) o.onFailure(`read udp ${this.label}: i/o timeout`, false);
  };

  private readonly onError = (e: NodeJS.ErrnoException): void => {
    // On a connected socket an ICMP error (port unreachable) is reported for the socket,
    // not for one datagram: every query on it has gone to a closed port.
    this.failAll(`read udp ${this.label}: ${goErrorText(e)}`);
    this.close();
  };

  private failAll(error: string): void {
    if (this.sweepTimer !== null) clearTimeout(this.sweepTimer);
    this.sweepTimer = null;
    this.sweepAt = Infinity;
    this.dueQuery = [];
    this.dueId = [];
    this.dueAt = [];
    this.dueHead = 0;
    if (this.pending.size === 0) return;
    const waiting = [...this.pending.values()];
    this.pending.clear();
    for (const o of waiting) o.onFailure(error, false);
  }

  /** No new queries; the socket closes when the last one is answered or times out. */
  retire(): void {
    this.retired = true;
    if (this.pending.size === 0) this.close();
  }

  private settled(): void {
    if (this.retired && this.pending.size === 0) this.close();
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.retired = true;
    try {
      this.sock.close();
    } catch {
      // Already closed.
    }
    this.failAll(`read udp ${this.label}: use of closed network connection`);
  }
}

/** The UDP sockets of one upstream. */
export class UdpPool {
  private readonly slots: Array<UdpChannel | null> = new Array<UdpChannel | null>(SLOTS).fill(null);
  private stopped = false;

  constructor(
    private readonly host: string,
    private readonly port: number,
    private readonly stats: ConnStats,
  ) {}

  /** Sends `o` on one of the sockets, which it returns. */
  send(o: Outstanding, timeoutMs: number): PendingTry {
    const i = randomBelow(SLOTS);
    let ch = this.slots[i]!;
    if (this.stopped) {
      // After shutdown a straggler still gets its own socket, closed once it settles.
      const once = new UdpChannel(this.host, this.port);
      once.send(o, timeoutMs);
      once.retire();
      return once;
    }
    if (ch === null || ch.closed || ch.uses >= MAX_USES || Date.now() - ch.born >= MAX_AGE_MS) {
      if (ch !== null) ch.retire();
      ch = new UdpChannel(this.host, this.port);
      this.slots[i] = ch;
      this.stats.connMisses[0]!++;
    } else {
      this.stats.connHits[0]!++;
    }
    ch.send(o, timeoutMs);
    return ch;
  }

  close(): void {
    this.stopped = true;
    for (let i = 0; i < SLOTS; i++) {
      this.slots[i]?.close();
      this.slots[i] = null;
    }
  }
}
