// One DNS-over-TCP connection (RFC 1035 4.2.2, RFC 7766): each frame is read into one buffer
// of its announced length, every message has a read deadline (CoreDNS's: 3 s for the first,
// the idle timeout after), and nothing a client sends or fails to read grows without bound:
// at most `maxInflight` queries are worked on, at most `maxUnsent` octets of answers wait to
// be sent, and reading stops while either is reached.

import type net from 'node:net';
import { logger } from '../log.js';
import type { ClientInfo, LeaveListener } from './request.js';

const log = logger('');

export interface TcpLimits {
  /** The first message must be complete this long after the connection opens or its first octet arrives. */
  firstReadMs: number;
  /** Later messages: the same from their first octet; also the longest wait between messages. */
  idleMs: number;
  /** A client that leaves more than `maxUnsent` octets of answers unread this long is closed. */
  writeMs: number;
  /** Queries of one connection being answered at once; reading stops at this many. */
  maxInflight: number;
  /** Octets of answers waiting to be sent past which reading stops. */
  maxUnsent: number;
}

/** Answers waiting past this many times `maxUnsent` (answers already being worked out when reading stopped): the client is cut off. */
const UNSENT_CUT_FACTOR = 4;
/** Answers longer than this are written after their length prefix, not copied behind it. */
const BIG_ANSWER = 4096;
/** Messages one connection handles before the others waiting get their turn. */
const BATCH = 8;
/** TCP messages are handled for at most this long per turn of the event loop; UDP and the rest wait no longer. */
const TURN_BUDGET_MS = 1;

/** When TCP work started in this turn of the event loop, or -1. */
let turnStart = -1;
let turnScheduled = false;
/** Connections with messages read and not yet handled, in turn order. */
const waiting: TcpConnection[] = [];

/** True while this turn's TCP budget lasts (the first call of a turn starts it). */
function budgetLeft(): boolean {
  const now = performance.now();
  if (turnStart < 0) {
    turnStart = now;
    scheduleTurnEnd();
    return true;
  }
  return now - turnStart < TURN_BUDGET_MS;
}

function scheduleTurnEnd(): void {
  if (turnScheduled) return;
  turnScheduled = true;
  setImmediate(endTurn);
}

/**
 * After the poll phase: what is left of this turn's budget goes to the connections that wait,
 * in order; the next turn (its poll phase: UDP, new reads) starts with a fresh budget.
 */
function endTurn(): void {
  turnScheduled = false;
  if (turnStart < 0) turnStart = performance.now();
  while (waiting.length > 0 && performance.now() - turnStart < TURN_BUDGET_MS) waiting.shift()!.resumeWaiting();
  turnStart = -1;
  if (waiting.length > 0) scheduleTurnEnd();
}

/** Hands one query to the dispatcher; `send` is called exactly once (null: no answer). */
export type Dispatch = (msg: Buffer, client: ClientInfo, send: (out: Buffer | null) => void) => void;

export class TcpConnection implements ClientInfo {
  readonly proto = 'tcp' as const;
  readonly remoteAddress: string;
  readonly remotePort: number;
  readonly family: 1 | 2;
  readonly localAddress: string;
  readonly localPort: number;
  /** True once the socket closed: answers still being worked out are not built or sent. */
  gone = false;
  /** One more message after the reply `send` wrote (a zone transfer's envelopes). */
  readonly sendMore = (msg: Buffer): void => {
    if (this.gone || this.sock.destroyed) return;
    const len = Buffer.allocUnsafe(2);
    len.writeUInt16BE(msg.length, 0);
    this.sock.cork();
    this.sock.write(len);
    this.sock.write(msg);
    this.sock.uncork();
  };
  /** First octet of a length prefix whose second has not arrived, or -1. */
  private lenHi = -1;
  private frame: Buffer | null = null;
  private have = 0;
  /** True from the first octet of a message to its last. */
  private inMessage = false;
  private messages = 0;
  /** The part of the last chunk not yet parsed (dispatching held by a limit). */
  private rest: Buffer | null = null;
  private restOff = 0;
  private inflight = 0;
  private readPaused = false;
  private pumping = false;
  private pumpQueued = false;
  private deadline = 0;
  private timerAt = Infinity;
  private timer: NodeJS.Timeout | null = null;
  /** Queries in flight whose work is to stop when the connection closes (made on first use). */
  private leaveListeners: Set<LeaveListener> | null = null;

  constructor(
    private readonly sock: net.Socket,
    private readonly dispatch: Dispatch,
    private readonly limits: TcpLimits,
  ) {
    this.remoteAddress = sock.remoteAddress ?? '';
    this.remotePort = sock.remotePort ?? 0;
    this.family = sock.remoteFamily === 'IPv6' ? 2 : 1;
    this.localAddress = sock.localAddress ?? '';
    this.localPort = sock.localPort ?? 0;
    sock.on('data', (chunk: Buffer) => {
      this.rest = chunk;
      this.restOff = 0;
      this.pump();
    });
    sock.on('drain', () => {
      if (!this.inMessage) this.setDeadline(limits.idleMs);
      this.kick();
    });
    sock.on('error', () => sock.destroy());
    sock.on('close', () => {
      this.gone = true;
      this.rest = null;
      this.frame = null;
      if (this.timer !== null) clearTimeout(this.timer);
      this.timer = null;
      const listeners = this.leaveListeners;
      this.leaveListeners = null;
      if (listeners !== null) for (const l of listeners) l.clientLeft();
    });
    this.setDeadline(limits.firstReadMs);
  }

  follow(l: LeaveListener): void {
    if (this.gone) {
      l.clientLeft();
      return;
    }
    (this.leaveListeners ??= new Set()).add(l);
  }

  unfollow(l: LeaveListener): void {
    this.leaveListeners?.delete(l);
  }

  /** Parses and dispatches what was read until the chunk is used up or a limit holds it. */
  private pump(): void {
    if (this.pumping) return;
    this.pumping = true;
    try {
      let n = 0;
      while (this.rest !== null && !this.gone && !this.sock.destroyed) {
        if (this.held()) {
          this.pauseReading();
          return;
        }
        if (n === BATCH || !budgetLeft()) {
          // Others (TCP and UDP) get their turn first; reading stops until this one's comes.
          this.pauseReading();
          if (!this.pumpQueued) {
            this.pumpQueued = true;
            waiting.push(this);
          }
          return;
        }
        const msg = this.take();
        if (msg === null) break;
        n++;
        this.inflight++;
        this.dispatch(msg, this, this.send);
      }
      if (this.gone) return;
      if (this.held()) this.pauseReading();
      else if (this.rest === null && this.readPaused) {
        this.readPaused = false;
        this.sock.resume();
      }
    } finally {
      this.pumping = false;
    }
  }

  /** @internal Its turn has come (endTurn). */
  resumeWaiting(): void {
    this.pumpQueued = false;
    this.pump();
  }

  /** True while a limit stops dispatching: too many queries in flight or too many answers unsent. */
  private held(): boolean {
    return this.inflight >= this.limits.maxInflight || this.sock.writableLength > this.limits.maxUnsent;
  }

  private pauseReading(): void {
    if (this.readPaused) return;
    this.readPaused = true;
    this.sock.pause();
  }

  /** Something that held dispatching may have cleared: carry on (never from inside pump). */
  private readonly kick = (): void => {
    if (this.gone || this.pumping || this.pumpQueued || !this.readPaused || this.held()) return;
    this.pumpQueued = true;
    waiting.push(this);
    scheduleTurnEnd();
  };

  /** The next complete message of `rest`, or null when the chunk ends first (or the stream is broken). */
  private take(): Buffer | null {
    const buf = this.rest!;
    while (this.restOff < buf.length) {
      if (this.frame === null) {
        if (!this.inMessage) {
          this.inMessage = true;
          // The whole message must arrive within one deadline from its first octet: a
          // client that trickles is closed however often it sends.
          this.setDeadline(this.messages === 0 ? this.limits.firstReadMs : this.limits.idleMs);
        }
        let len: number;
        if (this.lenHi >= 0) {
          len = (this.lenHi << 8) | buf[this.restOff++]!;
          this.lenHi = -1;
        } else if (buf.length - this.restOff >= 2) {
          len = buf.readUInt16BE(this.restOff);
          this.restOff += 2;
        } else {
          this.lenHi = buf[this.restOff++]!;
          break;
        }
        if (len < 12) {
          // Not even a DNS header: the stream cannot be resynchronised.
          this.rest = null;
          this.sock.destroy();
          return null;
        }
        this.frame = Buffer.allocUnsafe(len);
        this.have = 0;
      }
      const frame = this.frame;
      const n = Math.min(frame.length - this.have, buf.length - this.restOff);
      buf.copy(frame, this.have, this.restOff, this.restOff + n);
      this.have += n;
      this.restOff += n;
      if (this.have === frame.length) {
        this.frame = null;
        this.inMessage = false;
        this.messages++;
        this.setDeadline(this.limits.idleMs);
        if (this.restOff === buf.length) this.rest = null;
        return frame;
      }
    }
    this.rest = null;
    return null;
  }

  private readonly send = (out: Buffer | null): void => {
    this.inflight--;
    if (this.gone || out === null) {
      this.kick();
      return;
    }
    const sock = this.sock;
    if (out.length > BIG_ANSWER) {
      // Length and answer in one writev rather than a copy of the whole answer.
      const len = Buffer.allocUnsafe(2);
      len.writeUInt16BE(out.length, 0);
      sock.cork();
      sock.write(len);
      sock.write(out);
      sock.uncork();
    } else {
      const frame = Buffer.allocUnsafe(2 + out.length);
      frame.writeUInt16BE(out.length, 0);
      out.copy(frame, 2);
      sock.write(frame);
    }
    const unsent = sock.writableLength;
    if (unsent > this.limits.maxUnsent) {
      // Answers already being worked out when reading stopped can still pile up; past a few
      // times the bound the client is not reading at all.
      if (unsent > UNSENT_CUT_FACTOR * this.limits.maxUnsent) {
        sock.destroy();
        return;
      }
      this.pauseReading();
      this.setDeadline(this.limits.writeMs);
      return;
    }
    this.kick();
  };

  /** Sets the deadline (it only ever moves later, except for the write deadline, which may come sooner). */
  private setDeadline(ms: number): void {
    const now = Date.now();
    this.deadline = now + ms;
    if (this.timerAt <= this.deadline) return;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timerAt = this.deadline;
    this.timer = setTimeout(this.onTimer, ms);
    this.timer.unref();
  }

  private readonly onTimer = (): void => {
    this.timer = null;
    this.timerAt = Infinity;
    if (this.gone) return;
    const now = Date.now();
    if (now < this.deadline) {
      this.setDeadline(this.deadline - now);
      return;
    }
    const sock = this.sock;
    if (sock.writableLength > this.limits.maxUnsent) {
      log.debug(`tcp ${this.remoteAddress}:${this.remotePort}: closed, answers not read for ${this.limits.writeMs} ms`);
      sock.destroy();
      return;
    }
    if (!this.inMessage && this.inflight > 0) {
      // Waiting for our own answers is not the client's idle time.
      this.setDeadline(this.limits.idleMs);
      return;
    }
    if (this.inflight >= this.limits.maxInflight) {
      // Reading is held by our limit, not by the client: its message may sit unread in the kernel.
      this.setDeadline(this.limits.idleMs);
      return;
    }
    sock.destroy();
  };
}
