// The client of a datagram on the native batched UDP path.

import { fastFlushes } from './fast-answers.js';
import type { ClientInfo, Request, Response } from './request.js';
import type { ZoneStats } from './stats.js';
import type { NativeUdp } from './udp-batch.js';

/**
 * A UDP client on the native path: the peer's address stays four numbers until a plugin asks
 * for it as text. Its answer goes through NativeUdp.reply: into the current batch when it is
 * made while the batch is handled, else straight to the peer.
 */
export class BatchClient implements ClientInfo {
  remotePort: number;
  family: 1 | 2;
  /** The native table's flushes when the datagram came: an answer made later is kept only if none followed. */
  readonly flushes = fastFlushes;
  private text: string | undefined;

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

  /** The answer JS just sent may be kept by the socket's native answer table (fast-answers.ts). */
  keep(req: Request, res: Response, out: Buffer, zone: ZoneStats | undefined): void {
    this.path.keep(this, req, res, out, zone);
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
