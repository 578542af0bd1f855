// The one store of prepared answers of a configuration. An answer is held by whoever serves it
// (the table of the plugin that built it, the entries of every cache that kept its reply) and is
// one object for all of them (PreparedAnswer): a cache entry made from a kubernetes reply refers
// to the kubernetes plugin's own answer, it does not copy it. The store indexes every held answer
// by the dependency keys it recorded, so that a change drops it once, from every holder.
// A producer's table (AnswerTable) finds its answers by lowercase name and qtype. Only positive
// and NODATA answers are kept there: NXDOMAIN depends on fallthrough and on sync state, and the
// set of names that do not exist is unbounded.

import { QType } from '../dns/constants.js';
import type { AnswerHolder, PreparedAnswer } from './prepared-reply.js';

/** Slots per name: A, AAAA, SRV, TXT, PTR, CNAME, SOA, NS, and every other type (they all get NODATA). */
const SLOTS = 9;

export function slotOf(qtype: number): number {
  switch (qtype) {
    case QType.A:
      return 0;
    case QType.AAAA:
      return 1;
    case QType.SRV:
      return 2;
    case QType.TXT:
      return 3;
    case QType.PTR:
      return 4;
    case QType.CNAME:
      return 5;
    case QType.SOA:
      return 6;
    case QType.NS:
      return 7;
    case QType.AXFR:
    case QType.IXFR:
      return -1;
    default:
      return 8;
  }
}

/** Kept answers' bytes are copied into slabs of this size (larger answers keep their own memory). */
const SLAB = 16 * 1024;
const OWN_MEMORY = 1024;
/** Layouts of TTL offsets shared at most; past it they start again. */
const MAX_SHARED_OFFSETS = 1024;

/** Dependency keys remembered for answers in flight (changedSince) before older trips are all refused instead. */
const MAX_CHANGED_KEYS = 4096;

/** Adds `h` to `a`'s holders; true when it is the first. */
function addHolder(a: PreparedAnswer, h: AnswerHolder): boolean {
  const hs = a.holders;
  if (hs === null) {
    a.holders = h;
    return true;
  }
  if (Array.isArray(hs)) hs.push(h);
  else a.holders = [hs, h];
  return false;
}

/** Removes one `h` from `a`'s holders; true when none is left. */
function removeHolder(a: PreparedAnswer, h: AnswerHolder): boolean {
  const hs = a.holders;
  if (hs === null) return false;
  if (!Array.isArray(hs)) {
    if (hs !== h) return false;
    a.holders = null;
    return true;
  }
  const i = hs.indexOf(h);
  if (i < 0) return false;
  hs[i] = hs[hs.length - 1]!;
  hs.pop();
  if (hs.length === 1) a.holders = hs[0]!;
  return false;
}

/**
 * The answers of one configuration that someone holds, by the dependency keys they recorded.
 * One per Runtime (Invalidation.answers): a configuration being replaced keeps serving its own.
 */
export class AnswerStore {
  /** Dependency key → the held answers that recorded it: one directly (most keys), several in an array. */
  private readonly byDependency = new Map<string, PreparedAnswer | PreparedAnswer[]>();
  /** Dependency drops so far; a trip to the next plugin notes it when it starts (changedSince). */
  epoch = 0;
  /** Key → the epoch it last changed at, for trips in flight; bounded by MAX_CHANGED_KEYS. */
  private readonly changedAt = new Map<string, number>();
  /** Trips that started before this epoch predate a forgotten change: all of them are refused. */
  private changedFloor = 0;

  /** A producer's table of answers by name and qtype, held in this store. */
  table(maxNames?: number): AnswerTable {
    return new AnswerTable(this, maxNames);
  }

  /** `h` keeps `a` until it releases it or the store drops it (h.answerDropped). */
  hold(a: PreparedAnswer, h: AnswerHolder): void {
    if (!addHolder(a, h)) return;
    for (const key of a.dependencies) {
      const cur = this.byDependency.get(key);
      if (cur === undefined) this.byDependency.set(key, a);
      else if (Array.isArray(cur)) cur.push(a);
      else this.byDependency.set(key, [cur, a]);
    }
  }

  /** `h` no longer keeps `a`; the last holder gone, the store forgets it. */
  release(a: PreparedAnswer, h: AnswerHolder): void {
    if (removeHolder(a, h)) this.unindex(a);
  }

  /**
   * Drops every held answer that recorded one of `keys`, from every holder; returns how many
   * answers. Cost: O(answers that recorded them and their holders).
   */
  dropDependencies(keys: readonly string[]): number {
    this.noteChange(keys);
    const doomed: PreparedAnswer[] = [];
    for (const key of keys) {
      const cur = this.byDependency.get(key);
      if (cur === undefined) continue;
      if (Array.isArray(cur)) for (const a of cur) doomed.push(a);
      else doomed.push(cur);
    }
    let n = 0;
    for (const a of doomed) {
      const hs = a.holders;
      if (hs === null) continue; // recorded under two of the keys
      a.holders = null;
      this.unindex(a);
      n++;
      if (Array.isArray(hs)) for (const h of hs) h.answerDropped(a);
      else hs.answerDropped(a);
    }
    return n;
  }

  /** True when one of `keys` changed after `epoch`: an answer built meanwhile may predate the change. */
  changedSince(keys: readonly string[], epoch: number): boolean {
    if (epoch < this.changedFloor) return true;
    if (this.changedAt.size === 0) return false;
    for (const k of keys) {
      const at = this.changedAt.get(k);
      if (at !== undefined && at > epoch) return true;
    }
    return false;
  }

  /** Dependency keys that held answers recorded (for tests). */
  get dependencyCount(): number {
    return this.byDependency.size;
  }

  private noteChange(keys: readonly string[]): void {
    this.epoch++;
    if (this.changedAt.size + keys.length > MAX_CHANGED_KEYS) {
      this.changedAt.clear();
      this.changedFloor = this.epoch;
      return;
    }
    for (const k of keys) this.changedAt.set(k, this.epoch);
  }

  private unindex(a: PreparedAnswer): void {
    for (const key of a.dependencies) {
      const cur = this.byDependency.get(key);
      if (cur === a) this.byDependency.delete(key);
      else if (Array.isArray(cur)) {
        const i = cur.indexOf(a);
        if (i >= 0) {
          cur[i] = cur[cur.length - 1]!;
          cur.pop();
        }
        if (cur.length === 1) this.byDependency.set(key, cur[0]!);
      }
    }
  }
}

/**
 * A producer's answers (the kubernetes plugin's), one per (name, qtype slot). Most names are
 * asked with one qtype (A for a Service, SRV for a port name): such a name keeps its one answer
 * directly, and only a name asked with several gets an array of slots.
 *
 * The bytes of a kept answer are copied into slabs that hold only kept answers: a view
 * costs a third of a Buffer with its own memory, and unlike a slice of Node's shared pool
 * it does not pin 8 KiB that short-lived buffers filled. Dropped answers leave holes; when
 * the slabs hold more than twice what is kept (and at least 8 slabs), the kept answers are
 * copied into fresh ones, so slab memory stays within about twice the kept bytes. A cache
 * entry that holds a kept answer shares these bytes.
 */
export class AnswerTable implements AnswerHolder {
  private readonly byName = new Map<string, PreparedAnswer | Array<PreparedAnswer | undefined>>();
  private slab: Buffer = Buffer.alloc(0);
  private slabUsed = 0;
  /** Bytes of the slabs made since the last compaction (live and dropped answers both). */
  private slabBytes = 0;
  /** Bytes of the kept answers held in slabs. */
  private keptBytes = 0;
  private compacting = false;
  /** TTL offsets by layout (sharedOffsets). */
  private readonly offsets = new Map<string, Uint16Array>();

  constructor(
    readonly store: AnswerStore,
    private readonly maxNames = 200_000,
  ) {}

  /** Names with a kept answer. */
  get size(): number {
    return this.byName.size;
  }

  get(name: string, qtype: number): PreparedAnswer | undefined {
    const e = this.byName.get(name);
    if (e === undefined) return undefined;
    if (!Array.isArray(e)) return e.qtype === qtype || slotOf(e.qtype) === slotOf(qtype) ? e : undefined;
    const i = slotOf(qtype);
    return i < 0 ? undefined : e[i];
  }

  /** Keeps `p`, the answer to (`p.name`, `p.qtype`), in place of the one before. */
  set(p: PreparedAnswer): void {
    const name = p.name;
    const i = slotOf(p.qtype);
    if (i < 0) return;
    const e = this.byName.get(name);
    if (e === undefined) {
      // A bound, not an LRU: the names that exist are bounded by the cluster, so this only trips on churn.
      if (this.byName.size >= this.maxNames) this.clear();
      this.keep(p);
      this.byName.set(name, p);
      return;
    }
    this.keep(p);
    if (Array.isArray(e)) {
      this.forget(e[i]);
      e[i] = p;
    } else if (slotOf(e.qtype) === i) {
      this.forget(e);
      this.byName.set(name, p);
    } else {
      const slots = new Array<PreparedAnswer | undefined>(SLOTS);
      slots[slotOf(e.qtype)] = e;
      slots[i] = p;
      this.byName.set(name, slots);
    }
  }

  /** Lets go of every answer (caches that hold some keep them). */
  clear(): void {
    for (const e of this.byName.values()) {
      if (Array.isArray(e)) {
        for (const p of e) if (p !== undefined) this.store.release(p, this);
      } else this.store.release(e, this);
    }
    this.byName.clear();
    this.slab = Buffer.alloc(0);
    this.slabUsed = 0;
    this.slabBytes = 0;
    this.keptBytes = 0;
  }

  /** The store dropped `a` (a dependency changed): it goes from its slot. */
  answerDropped(a: PreparedAnswer): void {
    const e = this.byName.get(a.name);
    if (e === undefined) return;
    if (Array.isArray(e)) {
      const i = slotOf(a.qtype);
      if (e[i] !== a) return;
      e[i] = undefined;
      this.unkeep(a);
      if (e.every((x) => x === undefined)) this.byName.delete(a.name);
    } else if (e === a) {
      this.byName.delete(a.name);
      this.unkeep(a);
    }
  }

  /** Moves `p`'s bytes into a slab (or into memory of their own when large), shares its TTL offsets, holds it. */
  private keep(p: PreparedAnswer): void {
    this.store.hold(p, this);
    this.place(p);
  }

  private place(p: PreparedAnswer): void {
    if (p.ttlOffsets !== null) p.ttlOffsets = this.sharedOffsets(p.ttlOffsets);
    const n = p.body.length;
    if (n > OWN_MEMORY) {
      const own = Buffer.allocUnsafeSlow(n);
      p.body.copy(own);
      p.body = own;
      return;
    }
    if (this.slabUsed + n > this.slab.length) {
      if (!this.compacting && this.slabBytes >= 8 * SLAB && this.slabBytes > 2 * (this.keptBytes + n)) this.compact();
      this.slab = Buffer.allocUnsafeSlow(SLAB);
      this.slabUsed = 0;
      this.slabBytes += SLAB;
    }
    const view = this.slab.subarray(this.slabUsed, this.slabUsed + n);
    p.body.copy(view);
    p.body = view;
    this.slabUsed += n;
    this.keptBytes += n;
  }

  /** `p` replaced in its slot: released, its bytes no longer counted as kept. */
  private forget(p: PreparedAnswer | undefined): void {
    if (p === undefined) return;
    this.store.release(p, this);
    this.unkeep(p);
  }

  private unkeep(p: PreparedAnswer): void {
    if (p.body.length <= OWN_MEMORY) this.keptBytes -= p.body.length;
  }

  /**
   * One array per layout: kept answers come in a few shapes (one A record, an SRV with its glue),
   * and a typed array costs more memory than the offsets it holds. Never written to.
   */
  private sharedOffsets(offsets: Uint16Array): Uint16Array {
    if (offsets.length > 16) return offsets;
    const key = offsets.join(',');
    const found = this.offsets.get(key);
    if (found !== undefined) return found;
    if (this.offsets.size >= MAX_SHARED_OFFSETS) this.offsets.clear();
    this.offsets.set(key, offsets);
    return offsets;
  }

  /** Copies every kept answer into fresh slabs; the old ones go when their last view does. */
  private compact(): void {
    this.compacting = true;
    this.slab = Buffer.alloc(0);
    this.slabUsed = 0;
    this.slabBytes = 0;
    this.keptBytes = 0;
    for (const e of this.byName.values()) {
      if (Array.isArray(e)) {
        for (const p of e) if (p !== undefined) this.place(p);
      } else this.place(e);
    }
    this.compacting = false;
  }
}
