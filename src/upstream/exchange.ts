// What a transport (UDP socket, TCP or TLS connection) keeps for one query sent upstream.
// A forwarded client query, a health check and a searchfan branch all implement it, so the transports need
// no per-query closures: they call these methods back.

import { copyBytes } from '../dns/bytes.js';

export type UpstreamProto = 'udp' | 'tcp' | 'tcp-tls';

/** Connection reuse a pool counts, by transport (0 UDP, 1 TCP, 2 TLS): forward's coredns_proxy_conn_cache_*. */
export interface ConnStats {
  readonly connHits: Float64Array;
  readonly connMisses: Float64Array;
}

export interface Outstanding {
  /** The ID on the wire for the current try, set by the transport. */
  id: number;
  /** The message sent, preceded by 2 bytes for the TCP length prefix: frame = [len][message]. */
  readonly frame: Buffer;
  /** The message itself (a view of frame from offset 2). */
  readonly query: Buffer;
  /** Offset just after the question in `query`. */
  readonly questionEnd: number;
  /** The try's timer, owned by the transport. */
  timer: NodeJS.Timeout | null;
  /** True when the try went out on a connection that had already served queries. */
  reused: boolean;
  /** The largest UDP answer the query asks for (its EDNS size, 512 without EDNS); 65535 when not known. */
  readonly udpSize: number;
  /** A reply with this ID and the same question. Its ID is still the upstream one. */
  onAnswer(reply: Buffer): void;
  /**
   * The try failed (timeout, refused, connection lost). `cachedClosed`: a reused stream
   * connection was closed by the peer before answering, so a retry on a new one is sensible.
   */
  onFailure(error: string, cachedClosed: boolean): void;
  /** A stream reply with this ID but another question (CoreDNS answers FORMERR). */
  onMismatch(): void;
}

/**
 * The state every query sent upstream carries (forward's client queries and health checks,
 * searchfan's branches): its frame and the transport's bookkeeping. Subclasses say what an
 * answer, a failure and a mismatch mean.
 */
export abstract class OutstandingQuery implements Outstanding {
  id = 0;
  timer: NodeJS.Timeout | null = null;
  reused = false;
  udpSize = 65535;
  private framed: Buffer | null;
  query: Buffer;

  /**
   * `shared`: send `message` itself (its owner lets the transports write IDs into it) and make
   * the TCP frame only if a try goes over TCP; otherwise it is copied into a frame at once.
   */
  constructor(
    message: Buffer,
    readonly questionEnd: number,
    shared = false,
  ) {
    if (shared) {
      this.framed = null;
      this.query = message;
    } else {
      const frame = framed(message);
      this.framed = frame;
      this.query = frame.subarray(2);
    }
  }

  /** The query with its TCP length prefix; from then on the ID is written into the frame. */
  get frame(): Buffer {
    if (this.framed === null) {
      this.framed = framed(this.query);
      this.query = this.framed.subarray(2);
    }
    return this.framed;
  }

  abstract onAnswer(reply: Buffer): void;
  abstract onFailure(error: string, cachedClosed: boolean): void;
  abstract onMismatch(): void;
}

/** Where one try of an Outstanding waits: the query can be taken back (its client gave up). */
export interface PendingTry {
  /** Stops waiting for `o`'s answer (a late one is dropped) and stops its timer; nothing is called back. */
  cancel(o: Outstanding): void;
}

/**
 * Takes `o` back from a transport's table of queries waiting for an answer (its client left):
 * its timer stopped, a late answer to its ID dropped. False when it was not waiting there.
 */
export function takeBack(pending: Map<number, Outstanding>, o: Outstanding): boolean {
  if (pending.get(o.id) !== o) return false;
  pending.delete(o.id);
  if (o.timer) clearTimeout(o.timer);
  o.timer = null;
  return true;
}

/** A copy of `message` behind its two-octet TCP length. */
function framed(message: Buffer): Buffer {
  const len = message.length;
  const frame = Buffer.allocUnsafe(len + 2);
  frame.writeUInt16BE(len, 0);
  copyBytes(message, 0, len, frame, 2);
  return frame;
}

/** "127.0.0.1:53", "[::1]:53": how Go (and so CoreDNS's labels and errors) writes an address. */
export function joinHostPort(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

export { goErrorText } from '../server/system-errors.js';
