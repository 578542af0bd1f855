// The JS half of the native answer table (native/udpbatch.c, "the fast answer table"): which
// answers the addon may repeat for a byte-identical query without entering JS, what one such
// repeat counts, and the flush that keeps it coherent with the data answers are built from.
// See ARCHITECTURE.md "Native answer table".

import type { QueryNames } from '../status/names.js';
import { MALFORMED, readAsked } from './edns-options.js';
import type { Request, Response } from './request.js';
import type { ServerStats, ZoneStats } from './stats.js';
import type { UdpBatchAddon, UdpBatchSocket } from './udp-native.js';

/** CLUSTERDNS_FAST_ANSWERS=0 turns the table off: every query goes through JS as before. */
export const FAST_ANSWERS_ENABLED = process.env.CLUSTERDNS_FAST_ANSWERS !== '0';

/**
 * A thread of the addon reads each UDP socket that has a table, answers its hits and hands the
 * rest to the loop (udpbatch.c "the answer thread"); CLUSTERDNS_ANSWER_THREAD=0 leaves the reading
 * to the event loop.
 */
export const ANSWER_THREAD_ENABLED = process.env.CLUSTERDNS_ANSWER_THREAD !== '0';

/**
 * Plugins whose part in a chain is pure: what they do to a query depends only on its bytes and
 * the configuration or watched data (whose changes flush the table), and they count nothing per
 * query that a fold does not count. Any other plugin in a block (log, dnstap, acl, whoami,
 * autopath, metadata, an external one...) keeps all of the block's answers in JS.
 */
export const FAST_SAFE_PLUGINS: ReadonlySet<string> = new Set([
  'hosts',
  'kubernetes',
  'cache',
  'template',
  'rewrite',
  'file',
  'errors',
  'prometheus',
  'loop',
  'health',
  'ready',
  'reload',
  'bind',
  'loadbalance',
  // Its answers are never kept (it marks none); a query it passes on is untouched.
  'forward',
]);

/**
 * The longest a plugin's answer is repeated without JS (the addon caps it too). Answers made from
 * data (hosts, kubernetes, template, rewrite's kept ones) stand until that data changes, which
 * flushes the table: this is only the bound on what a change that failed to flush could leave
 * standing. It was 1 s: then each kept name came back to JS once a second, ~2,000 JS answers a
 * second for 2,000 names at any rate, whose ~800 bytes each filled the 2 MB young generation
 * once a second, and that scavenge (0.5–2.3 ms on the server's core) set the p99.9 of the
 * `hosts` and `kubernetes` rows (BENCHMARKS.md, "kdamond off the server's core").
 */
export const FAST_MAX_MS = 30_000;
/** Distinct kinds of hit (what one counts) per socket; past it the kinds start over (with a flush). */
const MAX_KINDS = 16384;
/** Hits are folded into the counters at least this often (and before every read of them). */
const FOLD_MS = 250;
/** The answer sizes the addon keeps (FAST_ANSWER_MAX in udpbatch.c). */
const MAX_ANSWER = 4096;

let flushAddon: UdpBatchAddon | null = null;

/**
 * How many flushes the process has made: an answer worked out after its query's batch is kept
 * only if none came in between (it may have been made from what the flush retired).
 */
export let fastFlushes = 0;

/**
 * Retires every native answer of the process at once (O(1)): called whenever an answer JS gave
 * may no longer be the one it would give (watched data changed, a hosts file reloaded, a new
 * configuration, invalidation of kept or cached answers).
 */
export function fastFlush(): void {
  fastFlushes++;
  flushAddon?.fastFlush?.();
}

/** True when the query's OPT carries a COOKIE option: its answer's server cookie is per client and time. */
export function hasCookie(req: Request): boolean {
  const asked = readAsked(req);
  return asked !== null && (asked === MALFORMED || asked.clientCookie !== null);
}

/** What one kind of hit counts: the server's request metrics, status names, a plugin's own counters. */
class HitKind {
  constructor(
    readonly server: string,
    /** Null when the server counted nothing when the entry was kept. */
    readonly zone: ZoneStats | null,
    readonly family: 1 | 2,
    readonly qtype: number,
    readonly dnssecOk: boolean,
    readonly reqSize: number,
    readonly respSize: number,
    readonly rcode: number,
    readonly plugin: string,
    readonly name: string | null,
    readonly extra: ((n: number) => void) | null,
  ) {}
}

/** One native socket's table: installs answers and folds the hits the addon counted. */
export class FastTable {
  /** hits[kind] += 1 per answer the addon gave (shared with it). */
  private readonly hits = new Float64Array(MAX_KINDS);
  private readonly kinds: HitKind[] = [];
  /** Kind ids by zone stats (or server), plugin, plugin fold, then the numbers of the hit (and the name). */
  private readonly byContext = new Map<
    ZoneStats | string,
    Map<string, Map<((n: number) => void) | null, Map<number, number | Map<string, number>>>>
  >();
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly addon: UdpBatchAddon,
    private readonly sock: UdpBatchSocket,
    private readonly stats: ServerStats,
    private readonly names: QueryNames,
  ) {
    addon.fastEnable!(sock, this.hits);
    flushAddon = addon;
    stats.folders.add(this.fold);
    this.timer = setInterval(this.fold, FOLD_MS);
    this.timer.unref();
  }

  close(): void {
    this.fold();
    this.stats.folders.delete(this.fold);
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }

  /**
   * Offers the answer JS just sent for the query in `slot` of the batch being handled; with `slot`
   * -1, one made after that batch (the hit a cache miss's stored answer makes, Response.fastRepeat),
   * keyed by the query's own bytes (fastPutQuery). The caller checked the chain (every plugin pure,
   * no view), that the answer has its fast fields set, and for -1 that nothing was flushed since
   * the query came.
   */
  keep(slot: number, req: Request, res: Response, out: Buffer, zone: ZoneStats | undefined): void {
    if (req.fastVeto || res.error !== undefined || res.dropped || res.more !== null) return;
    const len = out.length;
    if (len < 12 || len > MAX_ANSWER) return;
    const rcode = out[3]! & 0xf;
    // NOERROR or NXDOMAIN, not truncated (TC), and no per-client server cookie in it.
    if ((rcode !== 0 && rcode !== 3) || (out[2]! & 0x02) !== 0 || hasCookie(req)) return;
    const id = this.kindOf(req, res, out, this.stats.enabled && zone !== undefined ? zone : null, rcode);
    if (id < 0) return;
    const ms = Math.min(res.fastMs, FAST_MAX_MS);
    if (slot >= 0) this.addon.fastPut!(this.sock, slot, out, ms, id, res.fastTtls, res.fastTtlBase, res.fastSteps);
    else this.addon.fastPutQuery?.(this.sock, req.raw, out, ms, id, res.fastTtls, res.fastTtlBase, res.fastSteps);
  }

  private kindOf(req: Request, res: Response, out: Buffer, zone: ZoneStats | null, rcode: number): number {
    const reqSize = req.raw.length;
    const respSize = out.length;
    // Sizes past what the addon keeps (FAST_KEY_MAX + 2, FAST_ANSWER_MAX) would not fit the number below.
    if (reqSize > 514 || respSize > MAX_ANSWER) return -1;
    const extra = res.fastCount;
    const family = req.client.family;
    const name = this.names.enabled && zone !== null ? req.name : null;
    // Looked up by what the miss path already holds (objects and constant strings), then one
    // number: building a string key per install cost more than the rest of keeping the answer.
    const top = zone ?? req.server;
    let byPlugin = this.byContext.get(top);
    if (byPlugin === undefined) this.byContext.set(top, (byPlugin = new Map()));
    let byExtra = byPlugin.get(res.plugin);
    if (byExtra === undefined) byPlugin.set(res.plugin, (byExtra = new Map()));
    let byShape = byExtra.get(extra);
    if (byShape === undefined) byExtra.set(extra, (byShape = new Map()));
    const shape =
      ((((req.qtype * 2 + (rcode === 3 ? 1 : 0)) * 2 + (req.do ? 1 : 0)) * 2 + (family - 1)) * 1024 + reqSize) * 8192 +
      respSize;
    let id: number | undefined;
    let named: Map<string, number> | undefined;
    if (name === null) {
      const v = byShape.get(shape);
      id = typeof v === 'number' ? v : undefined;
    } else {
      // With the status page counting names, the name is part of the kind too.
      const v = byShape.get(shape);
      named = v instanceof Map ? v : undefined;
      if (named === undefined) byShape.set(shape, (named = new Map()));
      id = named.get(name);
    }
    if (id !== undefined) return id;
    if (this.kinds.length === MAX_KINDS) {
      // Start over: count what is pending, retire every entry that names an old kind.
      this.fold();
      fastFlush();
      this.kinds.length = 0;
      this.byContext.clear();
      return -1;
    }
    id = this.kinds.length;
    this.kinds.push(
      new HitKind(req.server, zone, family, req.qtype, req.do, reqSize, respSize, rcode, res.plugin, name, extra),
    );
    if (named !== undefined) named.set(name!, id);
    else byShape.set(shape, id);
    return id;
  }

  /** Counts the hits since the last fold as JS would have counted those queries. */
  readonly fold = (): void => {
    this.addon.fastCollect?.(this.sock);
    const h = this.hits;
    const kinds = this.kinds;
    const fast = this.stats.fastAnswers;
    const counting = this.stats.enabled;
    const naming = this.names.enabled;
    // Kinds of one server follow each other: its total is added to the Map once per run, not per kind.
    let server: string | null = null;
    let sum = 0;
    for (let i = 0; i < kinds.length; i++) {
      const n = h[i]!;
      if (n === 0) continue;
      h[i] = 0;
      const k = kinds[i]!;
      if (k.server !== server) {
        if (server !== null) fast.set(server, (fast.get(server) ?? 0) + sum);
        server = k.server;
        sum = 0;
      }
      sum += n;
      if (k.extra !== null) k.extra(n);
      if (k.zone === null || !counting) continue;
      // A repeat is answered in microseconds: the first duration bucket, adding nothing to the sum.
      k.zone.record(0, k.family, k.qtype, k.dnssecOk, k.reqSize, k.respSize, k.rcode, k.plugin, 0, n);
      if (k.name !== null && naming) this.names.record(k.name, k.rcode, n);
    }
    if (server !== null) fast.set(server, (fast.get(server) ?? 0) + sum);
  };
}
