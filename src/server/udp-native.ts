// Loads the optional native addon for batched UDP I/O (native/udpbatch.c: recvmmsg/sendmmsg,
// SO_REUSEPORT per worker). It is built from source by `npm ci` where a compiler is present;
// where it is missing, fails to load, or CLUSTERDNS_NATIVE_UDP=0, the listeners use node:dgram.

import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

/** A socket opened by the addon; the ArrayBuffers are shared with it (see native/README.md). */
export interface UdpBatchSocket {
  readonly port: number;
  readonly address: string;
  /** Datagram i at i × slotSize. */
  readonly in: ArrayBuffer;
  /**
   * META_INTS int32 per datagram: length, flags (1 = truncated), family (4|6), port, scope id,
   * address (IPv4: one int32 in host order; IPv6: the 16 octets as 4 × int32).
   */
  readonly meta: ArrayBuffer;
  /** Answers of the current batch, packed. */
  readonly out: ArrayBuffer;
  /** OUT_INTS int32 per answer: offset in `out`, length, index of the datagram it answers. */
  readonly outMeta: ArrayBuffer;
  readonly slots: number;
  readonly slotSize: number;
}

export interface UdpBatchOptions {
  address: string;
  port: number;
  ipv6: boolean;
  ipv6Only?: boolean;
  /** SO_REUSEPORT: every cluster worker binds its own socket to the port. */
  reusePort?: boolean;
  /** With reusePort: spread datagrams at random over this many sockets instead of by flow hash. */
  spread?: number;
  /** With reusePort: steer datagrams by question name over this many sockets (see shards.ts). */
  steer?: number;
  recvBuffer?: number;
  sendBuffer?: number;
  slots?: number;
  slotSize?: number;
  outSize?: number;
}

export interface UdpBatchAddon {
  readonly META_INTS: number;
  readonly OUT_INTS: number;
  open(o: UdpBatchOptions): UdpBatchSocket;
  /** As open(), but the bare descriptor, for the primary to hold and hand to a worker. */
  openFd(o: UdpBatchOptions): number;
  closeFd(fd: number): void;
  /** Re-attaches the question-name program to fd's reuseport group; map[shard] = socket index. */
  steer(fd: number, groups: number, map?: number[]): void;
  readonly STEER_PREFIX: number;
  /** A duplicate of a bound UDP socket's fd (the caller keeps and closes its own). */
  adopt(o: { fd: number; slots?: number; slotSize?: number; outSize?: number }): UdpBatchSocket;
  /**
   * onBatch(n, done, doneBytes) handles datagrams 0..n-1 and returns how many answers are in `out`:
   * the table already put `done` answers (doneBytes octets) there, flagged FLAG_FAST in meta.
   */
  start(s: UdpBatchSocket, onBatch: (n: number, done: number, doneBytes: number) => number, thread?: boolean): void;
  pause(s: UdpBatchSocket): void;
  close(s: UdpBatchSocket): void;
  /** One datagram to the given peer; 0 or a negative errno. */
  sendTo(
    s: UdpBatchSocket,
    data: Uint8Array,
    family: number,
    port: number,
    scope: number,
    a0: number,
    a1: number,
    a2: number,
    a3: number,
  ): number;
  ntop(family: number, scope: number, a0: number, a1: number, a2: number, a3: number): string;
  /**
   * Connects an opened socket to one peer (an upstream): its datagrams then reach onBatch with
   * only length and flags in meta, and a socket error as onBatch(-errno). "ADDRESS PORT" of the
   * local end, or -errno.
   */
  connect(s: UdpBatchSocket, host: string, port: number): string | number;
  /** Messages packed in data (meta: offset, length each) to the connected peer; the count sent or -errno. */
  sendPacked(s: UdpBatchSocket, data: Uint8Array, meta: Int32Array, count: number): number;
  /**
   * Datagrams packed in data, each to its own peer (meta: offset, length, family, port, scope,
   * a0..a3 each), in one sendmmsg; the count sent. Absent from an older build of the addon.
   */
  sendMany?(s: UdpBatchSocket, data: Uint8Array, meta: Int32Array, count: number): number;
  /**
   * Gives the socket its native answer table (udpbatch.c "the fast answer table"): hits[stat]
   * counts the answers given from entries kept with that stat. Absent from an older build.
   */
  fastEnable?(s: UdpBatchSocket, hits: Float64Array): void;
  /** Keeps `answer` for the query in datagram `slot` of the batch being handled, validMs at most. */
  /**
   * With `ttlOffsets` (plus `ttlBase`: where they count from in `answer`) and `steps` > 0, the
   * answer goes on `steps` more seconds past `validMs`, those TTLs one lower each second.
   */
  fastPut?(
    s: UdpBatchSocket,
    slot: number,
    answer: Uint8Array,
    validMs: number,
    stat: number,
    ttlOffsets?: Uint16Array | null,
    ttlBase?: number,
    steps?: number,
  ): boolean;
  /**
   * As fastPut, for a query given whole (from its ID on) instead of by its slot: an answer made
   * after the query's batch, for its repeats. Absent from an older build.
   */
  fastPutQuery?(
    s: UdpBatchSocket,
    query: Uint8Array,
    answer: Uint8Array,
    validMs: number,
    stat: number,
    ttlOffsets?: Uint16Array | null,
    ttlBase?: number,
    steps?: number,
  ): boolean;
  /** Retires every entry of every table of the process. */
  fastFlush?(): void;
  /** [entries, bytes] of a socket's table, and 1 when the answer thread reads the socket. */
  fastStats?(s: UdpBatchSocket): number[];
  /** Adds the answer thread's hit counts to fastEnable's array. Absent from an older build. */
  fastCollect?(s: UdpBatchSocket): void;
  /** [received, batches, sent, sendErrors, truncated, recvErrors, wakeups, queueResidentBytes (the answer thread's queue)] */
  stats(s: UdpBatchSocket): number[];
}

export const META_INTS = 10;
export const OUT_INTS = 4;
export const FLAG_TRUNCATED = 1;
/** The native answer table answered this datagram: JS skips it. */
export const FLAG_FAST = 2;

/** Where `npm ci` leaves the addon (relative to dist/src/server/). */
export const DEFAULT_ADDON_PATH = fileURLToPath(
  new URL('../../../native/build/Release/udpbatch.node', import.meta.url),
);

/** The addon's file: CLUSTERDNS_NATIVE_UDP_ADDON names another (tests use a missing one). */
function nativeAddonPath(): string {
  return process.env.CLUSTERDNS_NATIVE_UDP_ADDON || DEFAULT_ADDON_PATH;
}

let required: { module: Record<string, unknown> } | { why: string } | undefined;

/**
 * The addon's file as loaded (or why not), once per process, whatever uses it: the UDP listeners
 * and src/server/heap.ts.
 */
export function requireNativeAddon(): { module: Record<string, unknown> } | { why: string } {
  if (required) return required;
  if (process.platform !== 'linux') return (required = { why: `not built for ${process.platform}` });
  const path = nativeAddonPath();
  try {
    return (required = { module: createRequire(import.meta.url)(path) as Record<string, unknown> });
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    const why = err.code === 'MODULE_NOT_FOUND' ? 'not built' : String(err.message).split('\n')[0];
    return (required = { why: `${path}: ${why}` });
  }
}

let loaded: { addon: UdpBatchAddon | null; why: string } | undefined;

/**
 * The addon, or null with the reason. Decided once per process: CLUSTERDNS_NATIVE_UDP=0 turns it
 * off; CLUSTERDNS_NATIVE_UDP_ADDON names another file (tests use a missing one).
 */
export function udpBatchAddon(): { addon: UdpBatchAddon | null; why: string } {
  if (loaded) return loaded;
  if (process.env.CLUSTERDNS_NATIVE_UDP === '0') return (loaded = { addon: null, why: 'CLUSTERDNS_NATIVE_UDP=0' });
  const r = requireNativeAddon();
  if (!('module' in r)) return (loaded = { addon: null, why: r.why });
  const addon = r.module as unknown as UdpBatchAddon;
  if (addon.META_INTS !== META_INTS || addon.OUT_INTS !== OUT_INTS || typeof addon.open !== 'function') {
    return (loaded = { addon: null, why: `${nativeAddonPath()} is from another version (rebuild with npm ci)` });
  }
  return (loaded = { addon, why: nativeAddonPath() });
}
