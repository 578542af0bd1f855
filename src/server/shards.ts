// One cache across cluster workers: every question name belongs to one worker (its shard).
// UDP reaches the owner directly: the primary binds one SO_REUSEPORT socket per worker and
// attaches a classic-BPF program (native/udpbatch.c) that hashes the question name; the same
// hash in JS (shardOf) sends TCP queries, and UDP where steering is unavailable, to the owner
// over a local link (handoff.ts).

import { logger } from '../log.js';
import { PeerLink } from './handoff.js';
import { listenerKey } from './listeners.js';
import type { ClientInfo } from './request.js';
import { FLAG_TRUNCATED, META_INTS, udpBatchAddon, type UdpBatchSocket } from './udp-native.js';

const log = logger('');

/** Octets of the wire-format question name hashed; native/udpbatch.c's STEER_PREFIX. */
export const STEER_PREFIX = 48;

/**
 * The shard (0..count-1) of a DNS message: FNV-1a over the lower-cased wire name from offset 12
 * up to its root label, at most STEER_PREFIX octets, folded. The kernel program computes the
 * same, including its quirk: a message that ends inside that prefix belongs to shard 0.
 */
export function shardOf(msg: Uint8Array, count: number): number {
  let h = 2166136261;
  const n = msg.length;
  for (let p = 12; p < 12 + STEER_PREFIX; p++) {
    if (p >= n) return 0;
    let c = msg[p]!;
    if (c === 0) break;
    if (c >= 0x41 && c <= 0x5a) c |= 0x20;
    h = Math.imul(h ^ c, 16777619) >>> 0;
  }
  return (((h >>> 16) ^ h) >>> 0) % count;
}

/** This worker's shard and the number of shards, or null outside a cluster of several workers. */
export function workerShard(): { index: number; count: number } | null {
  const index = Number(process.env.CLUSTERDNS_WORKER_INDEX);
  const count = Number(process.env.CLUSTERDNS_WORKERS);
  if (!Number.isInteger(index) || !Number.isInteger(count) || count < 2 || index < 0 || index >= count) return null;
  return { index, count };
}

interface InheritedSocket {
  host: string;
  port: number;
  fd: number;
}

let inherited: InheritedSocket[] | undefined;

/** In a worker: the descriptor of the steered UDP socket the primary bound for it on host:port. */
export function inheritedUdpFd(host: string, port: number): number | undefined {
  inherited ??= parseInherited(process.env.CLUSTERDNS_STEERED_UDP);
  return inherited.find((s) => s.host === host && s.port === port)?.fd;
}

function parseInherited(text: string | undefined): InheritedSocket[] {
  if (!text) return [];
  try {
    const v = JSON.parse(text) as unknown;
    return Array.isArray(v)
      ? (v as InheritedSocket[]).filter(
          (s) => typeof s?.host === 'string' && Number.isInteger(s.port) && Number.isInteger(s.fd),
        )
      : [];
  } catch {
    return [];
  }
}

/** The address a listener binds for a configured host ('' = every address: IPv4 and IPv6). */
function bindHosts(host: string): Array<{ host: string; ipv6: boolean; ipv6Only: boolean }> {
  if (host === '')
    return [
      { host: '0.0.0.0', ipv6: false, ipv6Only: false },
      { host: '::', ipv6: true, ipv6Only: true },
    ];
  return [{ host, ipv6: host.includes(':'), ipv6Only: false }];
}

/**
 * In the primary: one reuseport group per UDP listener, one socket per worker, bound in worker
 * order so that socket i of every group is worker i's. The primary holds them all, so a worker
 * that dies leaves its socket (and the order of the group) in place for its replacement.
 */
export class SteeredSockets {
  private readonly groups: Array<{ host: string; port: number; key: string; fds: number[] }> = [];
  /** The sockets of a worker that is gone, read here meanwhile (see orphaned()). */
  private readonly orphans = new Map<number, { socks: UdpBatchSocket[]; link: PeerLink }>();
  /** shard → socket index; a shard whose worker is gone is served by another until it is back. */
  private readonly map: number[];
  private readonly live: boolean[];

  private constructor(private readonly count: number) {
    this.map = Array.from({ length: count }, (_, i) => i);
    // Until a worker first starts, its socket keeps its queries for it (no stand-in that would cache its names).
    this.live = Array.from({ length: count }, () => true);
  }

  /**
   * Opens the groups for the listen addresses of the configuration, or returns null (and the
   * workers share sockets, with queries handed to their owner) where that is not possible.
   */
  static open(addresses: Array<{ host: string; port: number }>, count: number): SteeredSockets | null {
    const mode = process.env.CLUSTERDNS_NATIVE_UDP;
    if (count < 2 || mode === '0' || mode === 'shared') return null;
    const { addon } = udpBatchAddon();
    if (!addon || typeof addon.steer !== 'function' || addon.STEER_PREFIX !== STEER_PREFIX) return null;
    const s = new SteeredSockets(count);
    for (const a of addresses) {
      if (a.port === 0) continue;
      for (const b of bindHosts(a.host)) {
        const fds: number[] = [];
        try {
          for (let i = 0; i < count; i++) {
            fds.push(
              addon.openFd({
                address: b.host,
                port: a.port,
                ipv6: b.ipv6,
                ipv6Only: b.ipv6Only,
                reusePort: true,
                steer: count,
                recvBuffer: 4 * 1024 * 1024,
                sendBuffer: 1024 * 1024,
              }),
            );
          }
        } catch (e) {
          for (const fd of fds) addon.closeFd(fd);
          // No IPv6 on this host, or the port is taken: the workers' own listener finds out the same way and says so.
          const code = (e as NodeJS.ErrnoException).code;
          if ((b.ipv6 && a.host === '') || code === 'EADDRINUSE' || code === 'EACCES') continue;
          log.warn(
            `UDP ${b.host}:${a.port}: cannot steer queries by name (${(e as Error).message}); workers hand queries to each other instead`,
          );
          continue;
        }
        s.groups.push({ host: b.host, port: a.port, key: listenerKey(a.host, a.port), fds });
      }
    }
    return s.groups.length ? s : null;
  }

  /** The stdio entries and environment that give worker `index` its sockets. */
  forWorker(index: number): { stdio: Array<number | 'inherit' | 'ipc'>; env: Record<string, string> } {
    const stdio: Array<number | 'inherit' | 'ipc'> = ['inherit', 'inherit', 'inherit', 'ipc'];
    const list: InheritedSocket[] = [];
    for (const g of this.groups) {
      list.push({ host: g.host, port: g.port, fd: stdio.length });
      stdio.push(g.fds[index]!);
    }
    return { stdio, env: { CLUSTERDNS_STEERED_UDP: JSON.stringify(list) } };
  }

  /** A worker died: its shard goes to a live worker until the replacement is ready. */
  workerGone(index: number): void {
    this.live[index] = false;
    this.remap();
    this.orphaned(index);
  }

  /** A replacement worker is serving: it gets its shard back. */
  workerReady(index: number): void {
    if (this.live[index]) return;
    this.live[index] = true;
    this.remap();
    this.adopted(index);
    log.info(`UDP: shard ${index} is steered to its worker again`);
  }

  /**
   * Datagrams that reached a worker's socket just before it died (or while the kernel had not yet
   * been told) would wait there for its replacement, past any client's timeout: the primary reads
   * that socket meanwhile and hands each to the stand-in over the handoff link, with the client's
   * address, and sends the answer from the same socket.
   */
  private orphaned(index: number): void {
    const standIn = this.map[index]!;
    const { addon } = udpBatchAddon();
    if (!addon || standIn === index || this.orphans.has(index)) return;
    const link = PeerLink.fromPrimary(standIn, (_msg, client, _key, send) => send(null, client));
    const socks: UdpBatchSocket[] = [];
    for (const g of this.groups) {
      let sock: UdpBatchSocket;
      try {
        sock = addon.adopt({ fd: g.fds[index]!, slots: 16 });
      } catch {
        continue;
      }
      const meta = new Int32Array(sock.meta);
      const inBuf = Buffer.from(sock.in);
      addon.start(sock, (n) => {
        for (let i = 0; i < n; i++) {
          const m = i * META_INTS;
          const af = meta[m + 2]!;
          if ((af !== 4 && af !== 6) || (meta[m + 1]! & FLAG_TRUNCATED) !== 0) continue;
          const at = i * sock.slotSize;
          const msg = Buffer.from(inBuf.subarray(at, at + meta[m]!));
          const [port, scope, a0, a1, a2, a3] = [
            meta[m + 3]!,
            meta[m + 4]!,
            meta[m + 5]!,
            meta[m + 6]!,
            meta[m + 7]!,
            meta[m + 8]!,
          ];
          const client: ClientInfo = {
            proto: 'udp',
            family: af === 6 ? 2 : 1,
            remotePort: port,
            remoteAddress: addon.ntop(af, scope, a0, a1, a2, a3),
            localAddress: g.host,
            localPort: g.port,
          };
          link.forward(msg, client, g.key, (out) => {
            if (out !== null) addon.sendTo(sock, out, af, port, scope, a0, a1, a2, a3);
          });
        }
        return 0;
      });
      socks.push(sock);
    }
    this.orphans.set(index, { socks, link });
  }

  /** The replacement reads its sockets now; answers still on their way get a moment to go out. */
  private adopted(index: number): void {
    const orphan = this.orphans.get(index);
    if (!orphan) return;
    this.orphans.delete(index);
    const { addon } = udpBatchAddon();
    for (const sock of orphan.socks) addon!.pause(sock);
    setTimeout(() => {
      for (const sock of orphan.socks) addon!.close(sock);
      orphan.link.close();
    }, 2000).unref();
  }

  private remap(): void {
    const standIn = this.live.findIndex((l) => l);
    for (let s = 0; s < this.count; s++) this.map[s] = this.live[s] || standIn < 0 ? s : standIn;
    const { addon } = udpBatchAddon();
    for (const g of this.groups) {
      try {
        addon!.steer(g.fds[0]!, this.count, this.map);
      } catch (e) {
        log.error(`UDP ${g.host}:${g.port}: cannot re-steer queries: ${(e as Error).message}`);
      }
    }
  }
}
