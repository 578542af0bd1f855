// Serves from the cache, or asks the next plugin once for all identical queries in flight
// and keeps the answer. The hit path is synchronous and allocates only the reply.

import { QType, Rcode } from '../../dns/constants.js';
import { encodeMessage } from '../../dns/message.js';
import { isSubdomain } from '../../dns/name.js';
import {
  isZoneTransfer,
  Request,
  Response,
  type Handler,
  type HandlerResult,
  type Next,
} from '../../server/request.js';
import { matchZone } from '../fallthrough.js';
import { clock, releaseClock, retainClock } from '../../server/clock.js';
import { Invalidation, type InvalidationTarget } from '../../server/invalidation.js';
import { CacheCounters, CacheMetrics, metricLabels, type CacheMetricSource } from './metrics.js';
import {
  FLAG_AA,
  FLAG_CD,
  FLAG_TC,
  describedResponse,
  PrepareProblem,
  prepareResponse,
  replyFlags,
  writeReply,
  type PreparedAnswer,
} from '../../server/prepared-reply.js';
import { CacheEntry, CacheStore, EntryKind } from './store.js';

export const NAME = 'cache';

export interface TtlLimits {
  /** Entries kept; CoreDNS's effective capacity (256 shards of at least 4). */
  capacity: number;
  /** Seconds. */
  maxTtl: number;
  minTtl: number;
}

export interface PrefetchOptions {
  /** Hits needed (with no gap of `durationMs` or more) before an entry is refreshed early. */
  amount: number;
  durationMs: number;
  /** Refresh once the remaining TTL is at most this share (10-90) of the original. */
  percentage: number;
}

export interface CacheOptions {
  /** Lowercase FQDNs the cache serves ('.' = everything). */
  zones: string[];
  success: TtlLimits;
  denial: TtlLimits;
  /** How long a SERVFAIL is kept; 0 = never. */
  servfailMs: number;
  prefetch: PrefetchOptions | null;
  /** How long past expiry an entry may still be served; 0 = serve_stale off. */
  staleMs: number;
  /** serve_stale verify: ask the next plugin first and serve the stale entry only if that fails. */
  verifyStale: boolean;
  disableSuccess: string[];
  disableDenial: string[];
  keepTtl: boolean;
  /** The entries of both kinds hold at most this many bytes (`max_bytes`). */
  maxBytes: number;
  /** Server label for metrics ("dns://:53"). */
  server: string;
}

/** The result of one trip to the next plugin, shared by all queries that waited for it. */
interface Outcome {
  readonly res: Response;
  /** The response prepared for replies; null when it could not be (bare, malformed, odd OPT). */
  readonly prepared: PreparedAnswer | null;
  /** The TTL every record gets in replies built from `prepared`; -1 keeps them as they are. */
  readonly ttl: number;
  /** The SOA serial replies built from `prepared` carry; -1 when it has none to write. */
  readonly serial: number;
  /** The entry stored, if any (prefetch hands its popularity on). */
  readonly entry: CacheEntry | null;
  readonly stored: boolean;
  /** True for queries that waited on another's trip: they must not return its Response object. */
  readonly shared: boolean;
}

/** A trip to the next plugin in progress; queries with the same key wait on it. */
class Flight {
  promise: Promise<Outcome> | null = null;
  /** Set by invalidation: the answer may predate the change, so it is not stored. */
  noStore = false;
  constructor(
    readonly name: string,
    /** The query whose trip it is: once others wait on it, its client leaving must not abort it. */
    readonly leader: Request,
    /** The answer store's epoch when the trip began (AnswerStore.changedSince). */
    readonly epoch: number,
  ) {
    latestFlight.flight = this;
  }
}

/** The latest Flight, held for its hidden class (server/request.ts `latest` says why). */
const latestFlight: { flight: Flight | null } = { flight: null };

const SWEEP_INTERVAL_MS = 1000;
/**
 * How long the sweep leaves an entry past its TTL (and any stale window): a name still asked
 * for is fetched again within it, and the answer refills the entry in place (keep) instead of
 * building a new one. Such entries still count against the capacity and max_bytes, and a full
 * queue evicts them first.
 */
export const SWEEP_GRACE_MS = 2000;
/** A sweep's work per turn of the loop (store.sweepStep's units): a fraction of a millisecond, so queries wait little. */
export const SWEEP_SLICE = 256;
/** Time allowed between a hit's reply and the addon keeping it (a GC pause at worst). */
const FAST_MARGIN_MS = 5;
/**
 * With `keepttl` a hit's reply does not change until the entry expires, yet the native table
 * repeats it for a second at most: the entry's second-chance bit (`visited`) is set only by hits
 * JS sees, so a hot entry must come back to JS now and then or the clock would take it for cold.
 */
const KEEP_TTL_FAST_MS = 1000;
/**
 * Seconds a hit's reply may go on in the native table past the current one, its TTLs written one
 * lower each second by the addon, once the cache is half full: JS then sees a hot entry every 5 s,
 * not every second, and sets its second-chance bit for the hand that evicts (~2,000 JS answers a
 * second for 2,000 hot names cost a scavenge a second).
 */
const FAST_STEPS = 4;
/**
 * The same while the entry's queue and the store are under half full (Store.hasRoom): nothing
 * reads the second-chance bit soon, so a hot entry stays in the table to the end of its TTL (the
 * addon's most, 30 steps). At 5 s every hot name came back to JS every 5 s, ~400 JS answers a
 * second for the bench's 2,000 names, each a wakeup of the loop of its own, and all in step after
 * a fresh start (BENCHMARKS.md, "Hot entries stay in the table while the cache has room").
 */
const FAST_STEPS_ROOMY = 30;

/**
 * Names stored in a burst (a start, a flush, a flood of new names) expire together and, while
 * they are asked, come back together every TTL: with 2,000 names at 16.6k QPS the misses of such
 * a wave crowd the one core for a few hundred ms and the hits wait behind them (BENCHMARKS.md,
 * "Expiries spread"). So past the first EXPIRY_SPREAD_BURST entries stored within a second, an
 * entry kept for at least EXPIRY_SPREAD_FROM_MS ends up to a tenth of its lifetime early (at most
 * EXPIRY_SPREAD_MOST_MS), by a random amount; not with prefetch or serve_stale, which keep a hot
 * name's hits going past its expiry their own way. A hit still carries the TTL CoreDNS's would
 * (counted from when the entry was stored): the entry only ends sooner, as an evicted one does.
 * Below the burst size every entry lives exactly as in CoreDNS.
 */
export const EXPIRY_SPREAD_BURST = 64;
/** `CLUSTERDNS_CACHE_SPREAD=0`: every entry lives exactly its TTL, as in CoreDNS. */
const EXPIRY_SPREAD_ON = process.env.CLUSTERDNS_CACHE_SPREAD !== '0';
const EXPIRY_SPREAD_FROM_MS = 5000;
export const EXPIRY_SPREAD_MOST_MS = 3000;

function bitsOf(req: Request): number {
  return (req.edns !== null && req.edns.do ? 1 : 0) | ((req.flags & FLAG_CD) !== 0 ? 2 : 0);
}

function flightKey(req: Request): string {
  return `${req.name}\u0000${req.qtype}\u0000${req.qclass}\u0000${bitsOf(req)}`;
}

function clampTtl(ttl: number, l: TtlLimits): number {
  if (ttl < l.minTtl) return l.minTtl;
  if (ttl > l.maxTtl) return l.maxTtl;
  return ttl;
}

/** The same question from the same client, over TCP, for background refreshes (no truncation upstream). */
function refreshRequest(req: Request): Request {
  const r = new Request(
    req.raw,
    {
      id: req.id,
      flags: req.flags,
      opcode: req.opcode,
      qname: req.qname,
      qnameLower: req.name,
      qtype: req.qtype,
      qclass: req.qclass,
      questionEnd: req.questionEnd,
      edns: req.edns,
    },
    { ...req.client, proto: 'tcp' },
  );
  r.zone = req.zone;
  r.server = req.server;
  r.depth = req.depth;
  return r;
}

export class CacheHandler implements Handler, InvalidationTarget, CacheMetricSource {
  readonly name = NAME;
  readonly counters = new CacheCounters();
  readonly metricLabels: string;
  readonly store: CacheStore;
  private readonly allZones: boolean;
  private readonly flights = new Map<string, Flight>();
  private readonly bypassBoth: boolean;
  private sweepTimer: NodeJS.Timeout | null = null;
  private sweepSlice: NodeJS.Immediate | null = null;
  private detach: (() => void) | null = null;
  /** Entries stored in a burst end spread out (spreadMs): not with prefetch or serve_stale, nor CLUSTERDNS_CACHE_SPREAD=0. */
  private readonly spreads: boolean;
  /** Entries stored in the second from burstFromMs (spreadMs). */
  private burstFromMs = Number.NEGATIVE_INFINITY;
  private burstStores = 0;
  /** Drops entries when what they were built from changes: the configuration's (start), else the handler's own. */
  invalidation = new Invalidation();
  /** The native table may repeat hits: not with prefetch or serve_stale, whose decisions need each hit. */
  private readonly tableHits: boolean;
  private readonly countEviction = (kind: EntryKind): void => {
    if (kind === EntryKind.Success) this.counters.evictionsSuccess++;
    else this.counters.evictionsDenial++;
  };

  constructor(
    readonly opts: CacheOptions,
    /** The server's own probe names (services.ts): always passed through, never stored. */
    private readonly selfProbes: ReadonlySet<string> = new Set(),
    /** The server's cache metrics (CACHE_METRICS): they read this cache while it runs. */
    private readonly metrics: CacheMetrics = new CacheMetrics(),
  ) {
    this.store = new CacheStore(
      {
        successCapacity: opts.success.capacity,
        denialCapacity: opts.denial.capacity,
        maxBytes: opts.maxBytes,
      },
      this.invalidation.answers,
    );
    this.allZones = opts.zones.includes('.');
    this.bypassBoth = opts.disableSuccess.length > 0 && opts.disableDenial.length > 0;
    this.tableHits = opts.prefetch === null && opts.staleMs === 0;
    this.spreads = EXPIRY_SPREAD_ON && opts.prefetch === null && opts.staleMs === 0;
    this.metricLabels = metricLabels(opts.server, opts.zones);
  }

  start(invalidation: Invalidation = this.invalidation): void {
    if (this.detach !== null) return;
    this.invalidation = invalidation;
    this.store.answers = invalidation.answers;
    retainClock();
    this.metrics.track(this);
    this.detach = this.invalidation.attach(this);
    this.sweepTimer = setInterval(this.beginSweep, SWEEP_INTERVAL_MS);
    this.sweepTimer.unref();
  }

  stop(): void {
    if (this.detach === null) return;
    this.detach();
    this.detach = null;
    this.metrics.untrack(this);
    releaseClock();
    if (this.sweepTimer !== null) clearInterval(this.sweepTimer);
    this.sweepTimer = null;
    if (this.sweepSlice !== null) clearImmediate(this.sweepSlice);
    this.sweepSlice = null;
  }

  entries(type: 'success' | 'denial'): number {
    return this.store.size(type === 'success' ? EntryKind.Success : EntryKind.Denial);
  }

  serveDNS(req: Request, next: Next): HandlerResult {
    const name = req.name;
    if (!this.allZones && matchZone(this.opts.zones, name) === undefined) return next(req);
    if (req.opcode !== 0 || isZoneTransfer(req.qtype)) return next(req);
    const c = this.counters;
    c.requests++;
    if (this.bypassBoth && this.disabledBoth(name)) {
      // Nothing under these zones is ever stored (kubeadm's `disable success/denial cluster.local`).
      c.misses++;
      req.noFast();
      return next(req);
    }
    const e = this.store.find(name, req.qtype, req.qclass, bitsOf(req));
    const now = clock.ms;
    // A dead entry (past its TTL and any stale window) takes the miss's way below, decided by the
    // one test every hit makes: the first refresh then meets no code that has not run, where V8
    // would throw away serveDNS's optimized code (BENCHMARKS.md, "The first refresh wave").
    // It is left in place for the answer fetched now to replace (store.insert keeps its name's
    // node), or for the sweep and the SIEVE hand, which take dead entries first.
    if (e !== null && now < e.expiresMs + this.opts.staleMs) {
      const a = e.answer;
      // A question spelled with a compression pointer: stored names may point into the
      // question, so this asker is served by the next plugin.
      if (a.questionEnd !== req.questionEnd) {
        req.noFast();
        return next(req);
      }
      if (now < e.expiresMs) {
        e.visited = true;
        if (e.kind === EntryKind.Success) c.hitsSuccess++;
        else c.hitsDenial++;
        const ttl = this.ttlAt(e, now);
        if (this.opts.prefetch !== null && this.shouldPrefetch(e, now, ttl)) this.refreshInBackground(req, next, e);
        const res = this.hitReply(req, e, ttl);
        if (this.tableHits) this.fastHit(res, e, now);
        return res;
      }
      e.visited = true;
      if (e.kind === EntryKind.Success) c.hitsSuccess++;
      else c.hitsDenial++;
      return this.serveStale(req, next, e);
    }
    c.misses++;
    const o = this.fetch(req, next, e);
    if (o instanceof Promise) return o.then((x) => this.answer(req, x));
    return this.answer(req, o);
  }

  /** One native repeat of a success or denial hit: what serveDNS counts for it. */
  private readonly foldSuccess = (n: number): void => {
    this.counters.requests += n;
    this.counters.hitsSuccess += n;
  };
  private readonly foldDenial = (n: number): void => {
    this.counters.requests += n;
    this.counters.hitsDenial += n;
  };

  /**
   * A hit's reply stays the same until its TTL drops by the next second (or the entry expires):
   * the native table may repeat it until then. `now` is the coarse clock, which only ever lags
   * the real one, so JS's reply changes at the boundary in real time or later: measured from the
   * real time (less a margin for the time until the addon keeps it), the repeat ends before.
   */
  private fastHit(res: Response, e: CacheEntry, now: number): void {
    const next = this.opts.keepTtl
      ? now + KEEP_TTL_FAST_MS
      : e.storedMs + 1000 * ((((now - e.storedMs) / 1000) | 0) + 1);
    const ms = Math.min(next, e.expiresMs) - performance.now() - FAST_MARGIN_MS;
    if (ms <= 0) return;
    res.fastMs = ms;
    res.fastCount = e.kind === EntryKind.Success ? this.foldSuccess : this.foldDenial;
    if (this.opts.keepTtl) return;
    // Whole seconds left after this one, each ending no later than the entry does.
    const steps = Math.floor((e.expiresMs - next) / 1000);
    if (steps <= 0) return;
    res.fastTtls = e.answer.ttlOffsets;
    res.fastTtlBase = e.answer.questionEnd;
    const most = this.store.hasRoom(e.kind) ? FAST_STEPS_ROOMY : FAST_STEPS;
    res.fastSteps = steps < most ? steps : most;
  }

  // ------------------------------------------------------------------ invalidation

  dropNames(names: readonly string[]): number {
    if (this.flights.size > 0) {
      for (const f of this.flights.values()) if (names.includes(f.name)) f.noStore = true;
    }
    return this.store.dropNames(names);
  }

  dropSuffix(suffix: string): number {
    if (this.flights.size > 0) {
      for (const f of this.flights.values()) if (isSubdomain(f.name, suffix)) f.noStore = true;
    }
    return this.store.dropSuffix(suffix);
  }

  // ------------------------------------------------------------------ misses

  /**
   * One trip to the next plugin per key at a time; later identical queries wait for it. `dead`:
   * the key's entry, past its TTL and any stale window, that the answer may start again in place.
   */
  private fetch(req: Request, next: Next, dead: CacheEntry | null = null): Outcome | Promise<Outcome> {
    if (this.selfProbes.size > 0 && this.selfProbes.has(req.name)) {
      const r = next(req);
      return r instanceof Promise ? r.then((res) => this.bareOutcome(res)) : this.bareOutcome(r);
    }
    const key = flightKey(req);
    const f = this.flights.get(key);
    if (f !== undefined && f.promise !== null) {
      f.leader.shareWork();
      return f.promise.then(
        (o) => this.share(req, next, o),
        () => this.bareOutcome(Response.rcode(Rcode.SERVFAIL, NAME, 'the shared query failed')),
      );
    }
    const epoch = this.store.answers.epoch;
    const r = next(req);
    if (!(r instanceof Promise)) return this.settle(req, r, null, dead);
    const flight = new Flight(req.name, req, epoch);
    this.flights.set(key, flight);
    const p = r.then(
      (res) => {
        this.flights.delete(key);
        return this.settle(req, res, flight, dead);
      },
      (err: unknown) => {
        this.flights.delete(key);
        throw err;
      },
    );
    flight.promise = p;
    return p;
  }

  /** What a query that waited on another's trip gets. */
  private share(req: Request, next: Next, o: Outcome): Outcome | Promise<Outcome> {
    if (o.prepared !== null && (o.prepared.flags & FLAG_TC) === 0 && o.prepared.questionEnd === req.questionEnd) {
      return {
        res: o.res,
        prepared: o.prepared,
        ttl: o.ttl,
        serial: o.serial,
        entry: null,
        stored: o.stored,
        shared: true,
      };
    }
    if (o.res.isBare) return this.bareOutcome(Response.rcode(o.res.rcode, o.res.plugin, o.res.error));
    // Truncated or unpreparable: that answer depended on the first asker (its transport,
    // its buffer); this one asks for itself.
    const r = next(req);
    if (r instanceof Promise) return r.then((res) => this.settle(req, res, null));
    return this.settle(req, r, null);
  }

  private bareOutcome(res: Response): Outcome {
    return { res, prepared: null, ttl: -1, serial: -1, entry: null, stored: false, shared: false };
  }

  /** A miss's reply. Never repeated by the native table as it is: a repeat must count as a hit. */
  private answer(req: Request, o: Outcome): Response {
    if (o.prepared !== null && (o.stored || o.shared)) {
      const res = Response.wire(
        writeReply(req, o.prepared, o.ttl, replyFlags(req, o.prepared, o.prepared.flags & FLAG_AA), o.serial),
        o.res.plugin,
      );
      if (o.entry !== null && !o.shared) this.repeatable(req, res, o.entry);
      return res;
    }
    // The next plugin's own response (it may have set fastMs): vetoed.
    req.noFast();
    return o.res;
  }

  /**
   * The miss that stored `e` offers the native table the reply a hit on `e` gives this very
   * query now (as serveDNS writes it, fastHit's lifetime): the name's next query is then answered
   * there, where it would otherwise come back to JS only to be that hit. After a TTL expiry that
   * halves the queries a hot name brings to JS (BENCHMARKS.md, "A miss's answer kept for its
   * repeats"). Not with prefetch or serve_stale (their hits stay in JS), nor for a question
   * spelled with a compression pointer.
   */
  private repeatable(req: Request, res: Response, e: CacheEntry): void {
    const now = clock.ms;
    if (!this.tableHits || e.answer.questionEnd !== req.questionEnd || now >= e.expiresMs) return;
    const hit = this.hitReply(req, e, this.ttlAt(e, now));
    this.fastHit(hit, e, now);
    if (hit.fastMs > 0) res.fastRepeat = hit;
  }

  /** The TTL a hit on `e` carries at `now`. */
  private ttlAt(e: CacheEntry, now: number): number {
    return this.opts.keepTtl ? e.ttl : e.ttl - (((now - e.storedMs) / 1000) | 0);
  }

  /** A reply from `e` to `req` with every TTL `ttl`, AA set: a hit's (and a stale entry's, at 0). */
  private hitReply(req: Request, e: CacheEntry, ttl: number): Response {
    const a = e.answer;
    return Response.wire(writeReply(req, a, ttl, replyFlags(req, a, FLAG_AA), e.serial), NAME);
  }

  /** Prepares the next plugin's response and stores it when the rules allow. */
  private settle(req: Request, res: Response, flight: Flight | null, dead: CacheEntry | null = null): Outcome {
    if (res.isBare) return this.bareOutcome(res);
    let wire = res.peekWire();
    if (wire === null) {
      const m = res.peekMessage();
      if (m === null) return this.bareOutcome(res);
      try {
        m.id = req.id;
        m.qr = true;
        wire = encodeMessage(m);
      } catch {
        return this.bareOutcome(res);
      }
    }
    // A reply the plugin that wrote it described (kubernetes) is its prepared answer: taken as it
    // is, not walked, and not copied when that plugin keeps it (the entry then shares it).
    const info = res.prepared;
    let p: PreparedAnswer | PrepareProblem | null =
      info !== null && res.hasWire ? describedResponse(req, wire, info) : null;
    let serial = -1;
    let built = false;
    if (p !== null) {
      if (p.serialAt >= 0) serial = wire.readUInt32BE(req.questionEnd + p.serialAt);
    } else {
      p = prepareResponse(req, wire);
      if (typeof p !== 'number') {
        if (info !== null) p.dependencies = info.dependencies;
        built = p.dependencies.length === 0;
      }
    }
    if (typeof p === 'number') {
      if (p === PrepareProblem.QuestionMismatch) {
        const rc = res.rcode;
        if (rc === Rcode.NOERROR || rc === Rcode.NXDOMAIN || rc === Rcode.SERVFAIL) this.counters.drops++;
      }
      return this.bareOutcome(res);
    }
    if (
      (flight === null ||
        (!flight.noStore &&
          (p.dependencies.length === 0 || !this.store.answers.changedSince(p.dependencies, flight.epoch)))) &&
      !this.keepsBetter(req, p)
    ) {
      // What CoreDNS's rules keep it as, and how long: decided once, for a refresh and a new entry alike.
      const kind = this.kindFor(req, p);
      const lifetimeMs = kind === -1 ? 0 : this.lifetimeOf(req, p, kind);
      if (kind !== -1 && lifetimeMs > 0) {
        // A refresh is its own method, not a branch of keep: its first call then throws away only
        // settle's small optimized code, where keep's would be compiled again (BENCHMARKS.md,
        // "The first refresh wave").
        const e =
          (dead !== null ? this.renewed(req, dead, p, kind, lifetimeMs, serial, built) : null) ??
          this.keep(req, p, kind, lifetimeMs, serial, built, info);
        if (e !== null) return { res, prepared: e.answer, ttl: e.ttl, serial, entry: e, stored: true, shared: false };
      }
    }
    return { res, prepared: p, ttl: -1, serial, entry: null, stored: false, shared: false };
  }

  /**
   * Stores `p` as `kind` for `lifetimeMs` (what CoreDNS's rules keep it as: kindFor, lifetimeOf);
   * returns the entry, or null. `built`: the cache prepared `p` itself, for this entry alone.
   * `info`: what the plugin that wrote the reply described, when it did.
   */
  private keep(
    req: Request,
    p: PreparedAnswer,
    kind: EntryKind,
    lifetimeMs: number,
    serial: number,
    built: boolean,
    info: PreparedAnswer | null,
  ): CacheEntry | null {
    const name = req.name;
    const now = clock.ms;
    const ttl = Math.floor(lifetimeMs / 1000);
    const bits = bitsOf(req);
    // Built for that reply alone (nobody keeps it), its bytes sit in Node's shared pool: an entry gets a copy.
    const a = p.holders === null && p === info ? p.ownCopy() : p;
    const endsMs = lifetimeMs - this.spreadMs(lifetimeMs);
    const e = new CacheEntry(name, req.qtype, req.qclass, bits, kind, a, ttl, now, endsMs, serial);
    e.ownsAnswer = built;
    return this.store.insert(e, now - this.opts.staleMs, this.countEviction) ? e : null;
  }

  /**
   * A refresh of `dead`, an entry nobody can be served any more (past its TTL and any stale
   * window), starts it again where it is: with the same answer (the one a plugin keeps), or with
   * the fetched records written into its own. Null when it cannot (another kind or size, swept
   * or replaced meanwhile): keep then stores `p` as a new entry.
   */
  private renewed(
    req: Request,
    dead: CacheEntry,
    p: PreparedAnswer,
    kind: EntryKind,
    lifetimeMs: number,
    serial: number,
    built: boolean,
  ): CacheEntry | null {
    const now = clock.ms;
    if (
      dead.kind !== kind ||
      dead.expiresMs > now - this.opts.staleMs ||
      this.store.find(req.name, req.qtype, req.qclass, bitsOf(req)) !== dead ||
      !(dead.answer === p || (built && dead.ownsAnswer && dead.answer.refill(p)))
    ) {
      return null;
    }
    this.store.renew(dead, Math.floor(lifetimeMs / 1000), now, lifetimeMs - this.spreadMs(lifetimeMs), serial);
    return dead;
  }

  /** How much sooner than its lifetime says an entry stored now ends (EXPIRY_SPREAD_BURST), ms. */
  private spreadMs(lifetimeMs: number): number {
    if (!this.spreads || lifetimeMs < EXPIRY_SPREAD_FROM_MS) return 0;
    const now = clock.ms;
    if (now - this.burstFromMs >= 1000) {
      this.burstFromMs = now;
      this.burstStores = 0;
    }
    if (++this.burstStores <= EXPIRY_SPREAD_BURST) return 0;
    const most = lifetimeMs / 10 < EXPIRY_SPREAD_MOST_MS ? lifetimeMs / 10 : EXPIRY_SPREAD_MOST_MS;
    return Math.floor(Math.random() * most);
  }

  /** How long CoreDNS's rules keep `p` as `kind`, ms; 0 = not at all (or not under this name). */
  private lifetimeOf(req: Request, p: PreparedAnswer, kind: EntryKind): number {
    const o = this.opts;
    const lifetimeMs =
      kind === EntryKind.Success
        ? clampTtl(p.minTtl, o.success) * 1000
        : (p.flags & 0xf) === Rcode.SERVFAIL || (p.flags & 0xf) === Rcode.NOTIMP
          ? o.servfailMs // CoreDNS's ServerError: both kept for the servfail duration
          : clampTtl(p.negativeTtl, o.denial) * 1000;
    if (lifetimeMs <= 0) return 0;
    const disabled = kind === EntryKind.Success ? o.disableSuccess : o.disableDenial;
    return matchZone(disabled, req.name) === undefined ? lifetimeMs : 0;
  }

  /** CoreDNS's caching rules: which store keeps `p`; -1 = not cached. */
  private kindFor(req: Request, p: PreparedAnswer): EntryKind | -1 {
    if ((p.flags & FLAG_TC) !== 0 || p.expiredSignature) return -1;
    switch (p.flags & 0xf) {
      case Rcode.NOERROR:
        if (p.an > 0) {
          // A CNAME chain that does not reach the asked type, with no SOA to say why, is partial.
          if (!p.answerHasQtype && !p.hasSoa && req.qtype !== QType.CNAME && req.qtype !== QType.ANY) return -1;
          return EntryKind.Success;
        }
        if (p.hasSoa) return EntryKind.Denial; // NODATA
        if (p.nsInAuthority > 0) return EntryKind.Success; // a referral
        return -1;
      case Rcode.NXDOMAIN:
        return p.hasSoa ? EntryKind.Denial : -1;
      case Rcode.SERVFAIL:
      case Rcode.NOTIMP:
        return EntryKind.Denial;
      default:
        return -1;
    }
  }

  /**
   * A SERVFAIL never replaces a real answer that can still be served (a refresh by prefetch or
   * serve_stale that fails): the entry stays, and with serve_stale it keeps being served. A dead
   * entry (past its TTL and any stale window) is replaced like any other.
   */
  private keepsBetter(req: Request, p: PreparedAnswer): boolean {
    if ((p.flags & 0xf) !== Rcode.SERVFAIL) return false;
    const old = this.store.find(req.name, req.qtype, req.qclass, bitsOf(req));
    return old !== null && clock.ms < old.expiresMs + this.opts.staleMs && (old.answer.flags & 0xf) !== Rcode.SERVFAIL;
  }

  private disabledBoth(name: string): boolean {
    return (
      matchZone(this.opts.disableSuccess, name) !== undefined && matchZone(this.opts.disableDenial, name) !== undefined
    );
  }

  // ------------------------------------------------------------------ prefetch and stale

  /** CoreDNS's rule: AMOUNT hits with no gap of DURATION, and at most PERCENTAGE of the TTL left. */
  private shouldPrefetch(e: CacheEntry, now: number, ttl: number): boolean {
    const p = this.opts.prefetch!;
    if (p.amount <= 0) return false;
    if (now - e.lastHitMs > p.durationMs) e.hits = 1;
    else e.hits++;
    e.lastHitMs = now;
    return e.hits >= p.amount && ttl <= Math.ceil((p.percentage / 100) * e.ttl) && !e.refreshing;
  }

  /** Refreshes `e` after this reply is sent; at most one refresh per entry at a time. */
  private refreshInBackground(req: Request, next: Next, e: CacheEntry): void {
    if (e.refreshing || this.flights.has(flightKey(req))) return;
    e.refreshing = true;
    this.counters.prefetches++;
    setImmediate(() => {
      const preq = refreshRequest(req);
      const done = (o: Outcome): void => {
        e.refreshing = false;
        // The refreshed entry inherits the popularity gathered so far.
        if (o.entry !== null) {
          o.entry.hits = e.hits;
          o.entry.lastHitMs = clock.ms;
        }
      };
      let o: Outcome | Promise<Outcome>;
      try {
        o = this.fetch(preq, next);
      } catch {
        e.refreshing = false;
        return;
      }
      if (o instanceof Promise) {
        o.then(done, () => {
          e.refreshing = false;
        });
      } else done(o);
    });
  }

  private staleReply(req: Request, e: CacheEntry): Response {
    this.counters.servedStale++;
    return this.hitReply(req, e, 0);
  }

  private serveStale(req: Request, next: Next, e: CacheEntry): HandlerResult {
    if (!this.opts.verifyStale) {
      this.refreshInBackground(req, next, e);
      return this.staleReply(req, e);
    }
    // verify: a fresh NOERROR or NXDOMAIN wins (RFC 8767 4); anything else gets the stale entry.
    const fresh = (o: Outcome): Response => {
      const rc = o.res.rcode;
      if (!o.res.isBare && (rc === Rcode.NOERROR || rc === Rcode.NXDOMAIN)) return this.answer(req, o);
      return this.staleReply(req, e);
    };
    let o: Outcome | Promise<Outcome>;
    try {
      o = this.fetch(req, next);
    } catch {
      return this.staleReply(req, e);
    }
    if (o instanceof Promise) return o.then(fresh, () => this.staleReply(req, e));
    return fresh(o);
  }

  // ------------------------------------------------------------------ housekeeping

  /** Drops entries past their TTL, any stale window and the grace: one second's round at once (tests). */
  sweep(): number {
    return this.store.sweep(clock.ms - this.opts.staleMs - SWEEP_GRACE_MS, this.sweepBudget());
  }

  /** Entries of each queue a round visits: all of a small store, an eighth of a big one. */
  private sweepBudget(): number {
    return Math.max(1024, Math.ceil(Math.max(this.opts.success.capacity, this.opts.denial.capacity) / 8));
  }

  /** Every second: a round of the sweep, done a slice per turn so queries are answered in between. */
  private readonly beginSweep = (): void => {
    this.store.beginSweep(this.sweepBudget());
    if (this.sweepSlice === null) this.sweepStep();
  };

  /** One slice of the round; the next runs after the loop has polled for queries again. */
  private readonly sweepStep = (): void => {
    this.sweepSlice = null;
    this.store.sweepStep(clock.ms - this.opts.staleMs - SWEEP_GRACE_MS, SWEEP_SLICE);
    if (this.store.sweeping && this.detach !== null) {
      this.sweepSlice = setImmediate(this.sweepStep);
      this.sweepSlice.unref();
    }
  };
}
