// UDP to one upstream: a few connected sockets, each on a port the kernel picks at random,
// each carrying many queries told apart by random IDs, and each replaced after a short
// life so the source port keeps changing. Connected sockets let the kernel drop datagrams
// from any other address or port, and report "connection refused" at once.

import dgram from 'node:dgram';
import { copyBytes } from '../dns/bytes.js';
import { getSystemErrorName } from 'node:util';
import {
  META_INTS,
  FLAG_TRUNCATED,
  udpBatchAddon,
  type UdpBatchAddon,
  type UdpBatchSocket,
} from '../server/udp-native.js';
import { atBatchEnd, enterBatch, leaveBatch } from '../server/batch-end.js';
import { answersQuestion, emptyTruncated, randomBelow, randomId } from './wire.js';
import { goErrorText, joinHostPort, type ConnStats, type Outstanding, type PendingTry } from './exchange.js';

/** Sockets per upstream; each query takes one at random. */
const SLOTS = 4;
/** Queries a socket carries before it is replaced (a new random source port). */
const MAX_USES = 100;
/** Milliseconds a socket is given new queries for before it is replaced. */
const MAX_AGE_MS = 1000;

/** Timers may fire this much before a deadline read from performance.now(). */
const TIMER_SLACK_MS = 1;

/** The slot arrays of one socket's queries (see UdpQueries). */
interface DueSlots {
  query: Array<Outstanding | null>;
  id: number[];
  at: number[];
}
/** Slot arrays of closed sockets, for new ones to fill in place instead of growing three from empty. */
const spareSlots: DueSlots[] = [];
const MAX_SPARE_SLOTS = 16;
/** Longer arrays (a long-lived channel's) are left to the GC. */
const MAX_REUSED_LENGTH = 4 * MAX_USES;

/**
 * The queries of one connected UDP socket, in send order (a socket carries at most MAX_USES):
 * an answer is matched by scanning the few still waiting, not through a Map, and one timer per
 * socket sweeps their deadlines instead of a timer per query. The socket itself (node:dgram or
 * the native addon) is the subclass's. It closes once retired and no query is waiting on it.
 */
abstract class UdpQueries implements PendingTry {
  // Slot i < dueLen: the query sent i-th, its ID and deadline; emptied (null) once answered,
  // failed or taken back, so the channel does not keep it alive until the sweep. The arrays may
  // be a closed socket's, longer than dueLen.
  private dueQuery: Array<Outstanding | null>;
  private dueHead = 0;
  private dueLen = 0;
  private dueId: number[];
  private dueAt: number[];
  private waiting = 0;
  private sweepTimer: NodeJS.Timeout | null = null;
  private sweepAt = Infinity;
  private retired = false;
  closed = false;
  uses = 0;
  readonly born = Date.now();
  /** "127.0.0.1:40693->127.0.0.1:53", as Go prints a connection in errors. */
  protected label: string;

  constructor(
    protected readonly host: string,
    protected readonly port: number,
  ) {
    this.label = `->${joinHostPort(host, port)}`;
    const spare = spareSlots.pop();
    this.dueQuery = spare?.query ?? [];
    this.dueId = spare?.id ?? [];
    this.dueAt = spare?.at ?? [];
  }

  /** Puts `o` (its ID already written) on the wire, or fails the socket. */
  protected abstract transmit(o: Outstanding): void;
  protected abstract closeSocket(): void;

  /** The slot of the waiting query with this ID, or -1. */
  private slotOf(id: number): number {
    const q = this.dueQuery;
    const ids = this.dueId;
    const n = this.dueLen;
    for (let i = this.dueHead; i < n; i++) if (ids[i] === id && q[i] !== null) return i;
    return -1;
  }

  /** Sends `o` with a fresh ID unique on this socket; its answer or failure comes back through `o`. */
  send(o: Outstanding, timeoutMs: number): void {
    // One call site for the first draw and a redraw: a redraw (an ID in use, more likely the more
    // are in flight) then meets no call V8 has not seen, which would throw away send's code.
    let id: number;
    do id = randomId();
    while (this.slotOf(id) >= 0);
    o.id = id;
    o.query.writeUInt16BE(id, 0);
    o.reused = this.uses > 0;
    this.uses++;
    this.waiting++;
    const due = performance.now() + timeoutMs;
    const k = this.dueLen++;
    if (k < this.dueQuery.length) {
      this.dueQuery[k] = o;
      this.dueId[k] = id;
      this.dueAt[k] = due;
    } else {
      this.dueQuery.push(o);
      this.dueId.push(id);
      this.dueAt.push(due);
    }
    if (due < this.sweepAt) this.armSweep(due, timeoutMs);
    this.transmit(o);
  }

  cancel(o: Outstanding): void {
    const q = this.dueQuery;
    for (let i = this.dueHead; i < this.dueLen; i++)
      if (q[i] === o) {
        this.empty(i);
        this.settled();
        return;
      }
  }

  /** True while `o` waits here for an answer (a connect that completes sends only those). */
  protected isWaiting(o: Outstanding): boolean {
    const i = this.slotOf(o.id);
    return i >= 0 && this.dueQuery[i] === o;
  }

  private empty(i: number): void {
    const q = this.dueQuery;
    q[i] = null;
    this.waiting--;
    while (this.dueHead < this.dueLen && q[this.dueHead] === null) this.dueHead++;
  }

  /**
   * An upstream datagram: the answer of the waiting query with its ID and question. `cut`: it
   * was longer than the receive slot, so the query gets an empty TC answer as in CoreDNS.
   */
  protected deliver(msg: Buffer, cut = false): void {
    if (msg.length < 12) return;
    const i = this.slotOf((msg[0]! << 8) | msg[1]!);
    if (i < 0) return;
    const o = this.dueQuery[i]!;
    // A stray or spoofed datagram (wrong ID, not a response, another question) is dropped
    // and the real answer still awaited.
    if (!answersQuestion(msg, o.query, o.questionEnd)) return;
    this.empty(i);
    this.settled();
    o.onAnswer(cut ? emptyTruncated(msg, o.questionEnd) : msg);
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
    for (let i = this.dueHead; i < this.dueLen; i++) {
      const o = q[i];
      if (o === null || o === undefined) continue;
      const at = this.dueAt[i]!;
      if (at <= now + TIMER_SLACK_MS) {
        q[i] = null;
        this.waiting--;
        expired.push(o);
      } else if (at < next) next = at;
    }
    while (this.dueHead < this.dueLen && q[this.dueHead] === null) this.dueHead++;
    if (next !== Infinity) this.armSweep(next, next - now);
    if (expired.length > 0) this.settled();
    for (const o of expired) o.onFailure(`read udp ${this.label}: i/o timeout`, false);
  };

  protected readonly onError = (e: NodeJS.ErrnoException): void => {
    // On a connected socket an ICMP error (port unreachable) is reported for the socket,
    // not for one datagram: every query on it has gone to a closed port.
    this.failAll(`read udp ${this.label}: ${goErrorText(e)}`);
    this.close();
  };

  private failAll(error: string): void {
    if (this.sweepTimer !== null) clearTimeout(this.sweepTimer);
    this.sweepTimer = null;
    this.sweepAt = Infinity;
    const waiting: Outstanding[] = [];
    const q = this.dueQuery;
    for (let i = this.dueHead; i < this.dueLen; i++) {
      const o = q[i];
      if (o !== null && o !== undefined) waiting.push(o);
      q[i] = null;
    }
    // A closed socket's arrays go to the next socket; this one keeps empty ones for a late cancel.
    if (this.closed && q.length <= MAX_REUSED_LENGTH && spareSlots.length < MAX_SPARE_SLOTS)
      spareSlots.push({ query: q, id: this.dueId, at: this.dueAt });
    this.dueQuery = [];
    this.dueId = [];
    this.dueAt = [];
    this.dueHead = 0;
    this.dueLen = 0;
    this.waiting = 0;
    for (const o of waiting) o.onFailure(error, false);
  }

  /** No new queries; the socket closes when the last one is answered or times out. */
  retire(): void {
    this.retired = true;
    if (this.waiting === 0) this.close();
  }

  private settled(): void {
    if (this.retired && this.waiting === 0) this.close();
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.retired = true;
    this.closeSocket();
    this.failAll(this.waiting > 0 ? `read udp ${this.label}: use of closed network connection` : '');
  }
}

/** One connected node:dgram socket (health checks, searchfan, and forward without the addon). */
export class UdpChannel extends UdpQueries {
  private readonly sock: dgram.Socket;
  private queued: Outstanding[] = [];
  private connected = false;

  constructor(host: string, port: number) {
    super(host, port);
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
    for (const o of q) if (this.isWaiting(o)) this.send1(o);
  };

  protected transmit(o: Outstanding): void {
    if (this.connected) this.send1(o);
    else this.queued.push(o);
  }

  /** A send that fails at once (the socket went away) fails the query instead of throwing. */
  private send1(o: Outstanding): void {
    try {
      this.sock.send(o.query);
    } catch (e) {
      this.onError(e as NodeJS.ErrnoException);
    }
  }

  private readonly onMessage = (msg: Buffer): void => this.deliver(msg);

  protected closeSocket(): void {
    try {
      this.sock.close();
    } catch {
      // Already closed.
    }
  }
}

/** Receive slots of a native upstream socket: answers read per wakeup. */
const NATIVE_SLOTS = 16;
/**
 * Bytes per receive slot of the native sockets that carry queries asking for answers up to
 * this size (nearly all: EDNS sizes are 512-4096). Sockets are replaced every few queries, and a
 * 64 KiB slot each made every socket's receive slab 1 MiB of external memory that drove V8 into
 * frequent full collections; queries asking for more get sockets with 64 KiB slots.
 */
export const SMALL_SLOT_BYTES = 4096;
const BIG_SLOT_BYTES = 65536;
/** Native upstream sockets opened, by receive slot size (tests read it). */
export const nativeOpenStats = { small: 0, big: 0 };
/** Room for the queries all native upstream sockets send in one turn of the event loop. */
const PACK_BYTES = 64 * 1024;
const packBuf = Buffer.allocUnsafe(PACK_BYTES);
const packMeta = new Int32Array(256);
/** Queries sent on native sockets, and the sendmmsg calls that carried them. */
export const nativeSendStats = { datagrams: 0, calls: 0 };
/** Native sockets with queries to send at the end of this turn (the first dirtyLen; not shrunk, so not regrown). */
const dirty: Array<NativeUdpChannel | null> = [];
let dirtyLen = 0;
let flushQueued = false;
/** Schedules the flush outside a batch callback as a microtask without queueMicrotask's AsyncResource and bound function per call. */
const settled = Promise.resolve();

/** Sends what every native socket gathered this turn, one sendmmsg per socket. */
function flushAll(): void {
  flushQueued = false;
  // A failed socket fails its queries, whose retries may add sockets to the list meanwhile.
  for (let i = 0; i < dirtyLen; i++) dirty[i]!.flush();
  for (let i = 0; i < dirtyLen; i++) dirty[i] = null;
  dirtyLen = 0;
}

function errnoError(n: number): NodeJS.ErrnoException {
  const code = getSystemErrorName(n);
  const e: NodeJS.ErrnoException = new Error(code);
  e.code = code;
  e.errno = n;
  return e;
}

/**
 * One connected socket of the native addon: the queries a turn of the event loop sends to it
 * leave in one sendmmsg, and its answers arrive in batches (recvmmsg), one JS call per batch
 * instead of node:dgram's send request and callback per datagram.
 */
export class NativeUdpChannel extends UdpQueries {
  private readonly sock: UdpBatchSocket | null = null;
  private readonly inBuf: Buffer | null = null;
  private readonly meta: Int32Array | null = null;
  private readonly slotSize: number = 0;
  /** Queries to send at the end of this turn: the first sendLen (not shrunk, so not regrown per turn). */
  private readonly toSend: Array<Outstanding | null> = [];
  private sendLen = 0;
  private isDirty = false;
  private failure: NodeJS.ErrnoException | null = null;

  constructor(
    private readonly addon: UdpBatchAddon,
    host: string,
    port: number,
    slotSize: number,
  ) {
    super(host, port);
    const v6 = host.includes(':');
    let sock: UdpBatchSocket;
    try {
      sock = addon.open({
        address: v6 ? '::' : '0.0.0.0',
        port: 0,
        ipv6: v6,
        slots: NATIVE_SLOTS,
        slotSize,
        outSize: 512,
      });
      if (slotSize === BIG_SLOT_BYTES) nativeOpenStats.big++;
      else nativeOpenStats.small++;
    } catch (e) {
      this.failure = e as NodeJS.ErrnoException;
      return;
    }
    const r = addon.connect(sock, host, port);
    if (typeof r === 'number') {
      addon.close(sock);
      this.failure = errnoError(r);
      return;
    }
    const sp = r.lastIndexOf(' ');
    this.label = `${joinHostPort(r.slice(0, sp), Number(r.slice(sp + 1)))}->${joinHostPort(host, port)}`;
    this.sock = sock;
    this.inBuf = Buffer.from(sock.in);
    this.meta = new Int32Array(sock.meta);
    this.slotSize = sock.slotSize;
    addon.start(sock, this.onBatch);
  }

  protected transmit(o: Outstanding): void {
    this.toSend[this.sendLen++] = o;
    if (!this.isDirty) {
      this.isDirty = true;
      dirty[dirtyLen++] = this;
      if (!flushQueued) {
        flushQueued = true;
        if (!atBatchEnd(flushAll)) void settled.then(flushAll);
      }
    }
  }

  /** Sends the queries gathered this turn that still wait for an answer. */
  flush(): void {
    this.isDirty = false;
    const list = this.toSend;
    if (this.closed || this.sock === null) {
      this.clearSend();
      // A socket that could not be opened or connected fails its queries as node:dgram's connect would.
      if (!this.closed && this.failure !== null) this.onError(this.failure);
      return;
    }
    let count = 0;
    let off = 0;
    for (let i = 0; i < this.sendLen; i++) {
      const o = list[i]!;
      if (!this.isWaiting(o)) continue;
      const q = o.query;
      if (count === packMeta.length / 2 || off + q.length > PACK_BYTES) {
        if (!this.sendPacked(count)) return;
        count = 0;
        off = 0;
      }
      if (q.length > PACK_BYTES) continue; // Cannot be a UDP datagram: its try times out.
      copyBytes(q, 0, q.length, packBuf, off);
      packMeta[2 * count] = off;
      packMeta[2 * count + 1] = q.length;
      count++;
      off += q.length;
    }
    this.clearSend();
    if (count > 0) this.sendPacked(count);
  }

  private clearSend(): void {
    const list = this.toSend;
    for (let i = 0; i < this.sendLen; i++) list[i] = null;
    this.sendLen = 0;
  }

  private sendPacked(count: number): boolean {
    const r = this.addon.sendPacked(this.sock!, packBuf, packMeta, count);
    nativeSendStats.calls++;
    if (r >= 0) {
      nativeSendStats.datagrams += r;
      return true;
    }
    this.clearSend();
    this.onError(errnoError(r));
    return false;
  }

  private readonly onBatch = (n: number): number => {
    if (n < 0) {
      this.onError(errnoError(n));
      return 0;
    }
    const meta = this.meta!;
    const inBuf = this.inBuf!;
    // The client answers (and retries) these complete leave when the batch ends, in one sendmmsg per socket.
    enterBatch();
    try {
      for (let i = 0; i < n && !this.closed; i++) {
        const m = i * META_INTS;
        const len = meta[m]!;
        const at = i * this.slotSize;
        // A copy: the slot is read into again while the answer may still be on its way out.
        const msg = Buffer.allocUnsafe(len);
        copyBytes(inBuf, at, at + len, msg, 0);
        this.deliver(msg, (meta[m + 1]! & FLAG_TRUNCATED) !== 0);
      }
    } finally {
      leaveBatch();
    }
    return 0;
  };

  protected closeSocket(): void {
    if (this.sock !== null) this.addon.close(this.sock);
  }
}

/** The addon when it can carry upstream sockets (built, enabled, and new enough). */
function upstreamAddon(): UdpBatchAddon | null {
  const a = udpBatchAddon().addon;
  return a !== null && typeof a.connect === 'function' && typeof a.sendPacked === 'function' ? a : null;
}

/** The UDP sockets of one upstream. */
export class UdpPool {
  private readonly slots: Array<UdpQueries | null> = new Array<UdpQueries | null>(SLOTS).fill(null);
  /** Native sockets with 64 KiB receive slots, for queries asking for answers over SMALL_SLOT_BYTES. */
  private big: Array<UdpQueries | null> | null = null;
  private stopped = false;
  private readonly addon = upstreamAddon();

  constructor(
    private readonly host: string,
    private readonly port: number,
    private readonly stats: ConnStats,
  ) {}

  private channel(big: boolean): UdpQueries {
    return this.addon !== null
      ? new NativeUdpChannel(this.addon, this.host, this.port, big ? BIG_SLOT_BYTES : SMALL_SLOT_BYTES)
      : new UdpChannel(this.host, this.port);
  }

  /** Sends `o` on one of the sockets, which it returns. */
  send(o: Outstanding, timeoutMs: number): PendingTry {
    const i = randomBelow(SLOTS);
    const big = this.addon !== null && o.udpSize > SMALL_SLOT_BYTES;
    const slots = big ? (this.big ??= new Array<UdpQueries | null>(SLOTS).fill(null)) : this.slots;
    let ch = slots[i]!;
    if (this.stopped) {
      // After shutdown a straggler still gets its own socket, closed once it settles.
      const once = this.channel(big);
      once.send(o, timeoutMs);
      once.retire();
      return once;
    }
    if (ch === null || ch.closed || ch.uses >= MAX_USES || Date.now() - ch.born >= MAX_AGE_MS) {
      if (ch !== null) ch.retire();
      ch = this.channel(big);
      slots[i] = ch;
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
      this.big?.[i]?.close();
    }
    this.big = null;
  }
}
