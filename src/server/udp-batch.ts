// The UDP side of a listener on the native batched socket (native/udpbatch.c).

import { copyBytes } from '../dns/bytes.js';
import { Rcode } from '../dns/constants.js';
import { headerOnlyReply, type Dispatcher, type Send } from './dispatcher.js';
import type { DnsListener } from './listeners.js';
import type { ClientInfo } from './request.js';
import { BatchClient } from './udp-batch-client.js';
import {
  FLAG_FAST,
  FLAG_TRUNCATED,
  META_INTS,
  OUT_INTS,
  type UdpBatchAddon,
  type UdpBatchSocket,
} from './udp-native.js';
import { ANSWER_THREAD_ENABLED, FAST_ANSWERS_ENABLED, FastTable, fastFlushes } from './fast-answers.js';
import { atBatchEnd, enterBatch, leaveBatch } from './batch-end.js';
import type { Request, Response } from './request.js';
import type { ZoneStats } from './stats.js';

/** Answers made outside a batch that one sendmmsg carries at most. */
const LATE_MAX = 64;
const LATE_BYTES = 64 * 1024;
/** Schedules the late answers' send as a microtask without queueMicrotask's AsyncResource per call. */
const settled = Promise.resolve();

/**
 * The UDP side of a DnsListener on the native socket: one call per batch of datagrams
 * (recvmmsg); answers made while the batch is handled are packed into the shared `out` slab
 * and leave in one sendmmsg when the callback returns; answers that come later (forward)
 * leave one by one.
 */
export class NativeUdp {
  readonly localAddress: string;
  readonly localPort: number;
  private readonly inBuf: Buffer;
  private readonly meta: Int32Array;
  private readonly out: Buffer;
  private readonly outMeta: Int32Array;
  private readonly slotSize: number;
  private gen = 0;
  private inBatch = false;
  private outCount = 0;
  private outOff = 0;
  private lateCount = 0;
  private lateOff = 0;
  private lateQueued = false;
  private lateBuf: Uint8Array | null = null;
  private lateMeta: Int32Array | null = null;
  /** The socket's native answer table; null when off or the addon predates it. */
  readonly fast: FastTable | null;

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
    // A Buffer like every answer copied into it: copyBytes then sees one kind of array, not two.
    this.out = Buffer.from(sock.out);
    this.outMeta = new Int32Array(sock.outMeta);
    this.slotSize = sock.slotSize;
    this.fast =
      FAST_ANSWERS_ENABLED && addon.fastEnable !== undefined && addon.fastPut !== undefined
        ? new FastTable(addon, sock, dispatcher.stats, dispatcher.names)
        : null;
  }

  start(): void {
    // The answer thread takes the reading over once the table keeps an answer (udpbatch.c).
    this.addon.start(this.sock, this.onBatch, ANSWER_THREAD_ENABLED && this.fast !== null);
  }

  pause(): void {
    this.addon.pause(this.sock);
  }

  close(): void {
    this.fast?.close();
    this.addon.close(this.sock);
  }

  /**
   * Offers an answer to the native table (BatchClient.keep): one made in the query's batch by
   * its slot; one made later (the hit a cache miss's answer became) by the query's own bytes,
   * unless the table was flushed since the query came (new data or configuration: the answer
   * may predate it) or the configuration has views.
   */
  keep(c: BatchClient, req: Request, res: Response, out: Buffer, zone: ZoneStats | undefined): void {
    const fast = this.fast;
    if (fast === null) return;
    if (this.inBatch && c.gen === this.gen) fast.keep(c.slot, req, res, out, zone);
    else if (c.flushes === fastFlushes && this.listener.routerForUdp()?.views === false)
      fast.keep(-1, req, res, out, zone);
  }

  ntop(c: BatchClient): string {
    return this.addon.ntop(c.af, c.scope, c.a0, c.a1, c.a2, c.a3);
  }

  /** Where every answer of this socket goes; the client says to whom. */
  private readonly send: Send = (out: Buffer | null, client: ClientInfo): void =>
    this.reply(client as BatchClient, out);

  private readonly onBatch = (n: number, done: number, doneBytes: number): number => {
    const meta = this.meta;
    const inBuf = this.inBuf;
    const l = this.listener;
    const d = this.dispatcher;
    const router = l.routerForUdp();
    const handoff = l.udpHandoff;
    const send = this.send;
    const gen = ++this.gen;
    // The native table's answers come first in `out`; this batch's go after them.
    this.outCount = done | 0;
    this.outOff = doneBytes | 0;
    this.inBatch = true;
    enterBatch();
    try {
      for (let i = 0; i < n; i++) {
        const m = i * META_INTS;
        const len = meta[m]!;
        const af = meta[m + 2]!;
        if (af !== 4 && af !== 6) continue;
        if ((meta[m + 1]! & FLAG_FAST) !== 0) continue;
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
          this.reply(c, len >= 12 && (inBuf[at + 2]! & 0x80) === 0 ? headerOnlyReply(inBuf, Rcode.FORMERR, at) : null);
          continue;
        }
        // A copy: the slot is reused by the next batch, and an answer worked out later
        // (forward) still reads the query. (A view instead measured within noise.)
        const msg = Buffer.allocUnsafe(len);
        copyBytes(inBuf, at, at + len, msg, 0);
        if (handoff === null || !handoff.forward(msg, c, l.key, send)) d.handle(msg, c, router, send);
      }
    } finally {
      this.inBatch = false;
      leaveBatch();
    }
    return this.outCount;
  };

  /**
   * An answer made outside a batch (forward's, when the upstream's reply came): gathered with the
   * others of this turn of the event loop and sent in one sendmmsg instead of a sendto each.
   */
  private late(c: BatchClient, out: Buffer): void {
    if (this.lateCount === LATE_MAX || this.lateOff + out.length > LATE_BYTES) this.sendLate();
    const at = this.lateOff;
    const buf = (this.lateBuf ??= new Uint8Array(LATE_BYTES));
    const m = (this.lateMeta ??= new Int32Array(LATE_MAX * 9));
    copyBytes(out, 0, out.length, buf, at);
    const k = this.lateCount++ * 9;
    m[k] = at;
    m[k + 1] = out.length;
    m[k + 2] = c.af;
    m[k + 3] = c.remotePort;
    m[k + 4] = c.scope;
    m[k + 5] = c.a0;
    m[k + 6] = c.a1;
    m[k + 7] = c.a2;
    m[k + 8] = c.a3;
    this.lateOff = at + out.length;
    if (!this.lateQueued) {
      this.lateQueued = true;
      if (!atBatchEnd(this.lateTask)) void settled.then(this.lateTask);
    }
  }

  private readonly lateTask = (): void => {
    this.lateQueued = false;
    this.sendLate();
  };

  private sendLate(): void {
    const n = this.lateCount;
    this.lateCount = 0;
    this.lateOff = 0;
    if (n > 0) this.addon.sendMany!(this.sock, this.lateBuf!, this.lateMeta!, n);
  }

  reply(c: BatchClient, out: Buffer | null): void {
    const l = this.listener;
    if (out !== null && l.udpIsOpen) {
      const len = out.length;
      if (this.inBatch && c.gen === this.gen && len <= this.out.length - this.outOff) {
        const at = this.outOff;
        copyBytes(out, 0, len, this.out, at);
        const k = this.outCount++ * OUT_INTS;
        this.outMeta[k] = at;
        this.outMeta[k + 1] = len;
        this.outMeta[k + 2] = c.slot;
        this.outOff = at + len;
      } else if (len <= LATE_BYTES && this.addon.sendMany !== undefined) {
        this.late(c, out);
      } else {
        this.addon.sendTo(this.sock, out, c.af, c.remotePort, c.scope, c.a0, c.a1, c.a2, c.a3);
      }
    }
    l.udpAnswered();
  }
}
