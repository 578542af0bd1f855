// Answers already built, by lowercase name and qtype, so a repeated query is one Map read
// and one copy. Each name belongs to a scope — the Service it is under (`s:ns/name`), the
// IP of a PTR name (`p:IP`), or everything else (`g`) — and a watch event drops exactly
// the scopes it touched. Only positive and NODATA answers are kept: NXDOMAIN depends on
// fallthrough and on sync state, and the set of names that do not exist is unbounded.

import { QType } from '../dns/constants.js';
import type { Prepared } from '../plugins/kubernetes/answer.js';

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

export const GLOBAL_SCOPE = 'g';

/** Kept answers' bytes are copied into slabs of this size (larger answers keep their own memory). */
const SLAB = 16 * 1024;
const OWN_MEMORY = 1024;
/** Layouts of TTL offsets shared at most; past it they start again. */
const MAX_SHARED_OFFSETS = 1024;

/**
 * Most names are asked with one qtype (A for a Service, SRV for a port name): such a name
 * keeps its one answer directly, and only a name asked with several gets an array of
 * slots; likewise a scope with one name keeps the string. Per kept answer this is about
 * half the memory of a slot array and a name list for each.
 *
 * The bytes of a kept answer are copied into slabs that hold only kept answers: a view
 * costs a third of a Buffer with its own memory, and unlike a slice of Node's shared pool
 * it does not pin 8 KiB that short-lived buffers filled. Dropped answers leave holes; when
 * the slabs hold more than twice what is kept (and at least 8 slabs), the kept answers are
 * copied into fresh ones, so slab memory stays within about twice the kept bytes.
 */
export class PreparedAnswers {
  private readonly byName = new Map<string, Prepared | Array<Prepared | undefined>>();
  private readonly byScope = new Map<string, string | string[]>();
  private slab: Buffer = Buffer.alloc(0);
  private slabUsed = 0;
  /** Bytes of the slabs made since the last compaction (live and dropped answers both). */
  private slabBytes = 0;
  /** Bytes of the kept answers held in slabs. */
  private keptBytes = 0;
  private compacting = false;
  /** TTL offsets by layout (sharedOffsets). */
  private readonly offsets = new Map<string, Uint16Array>();

  constructor(private readonly maxNames = 200_000) {}

  get size(): number {
    return this.byName.size;
  }

  get(name: string, qtype: number): Prepared | undefined {
    const e = this.byName.get(name);
    if (e === undefined) return undefined;
    const i = slotOf(qtype);
    if (i < 0) return undefined;
    if (Array.isArray(e)) return e[i];
    return e.slot === i ? e : undefined;
  }

  set(name: string, qtype: number, scope: string, p: Prepared): void {
    const i = slotOf(qtype);
    if (i < 0) return;
    p.slot = i;
    const e = this.byName.get(name);
    if (e === undefined) {
      // A bound, not an LRU: the names that exist are bounded by the cluster, so this only trips on churn.
      if (this.byName.size >= this.maxNames) this.clear();
      this.keep(p);
      this.byName.set(name, p);
      const names = this.byScope.get(scope);
      if (names === undefined) this.byScope.set(scope, name);
      else if (typeof names === 'string') this.byScope.set(scope, [names, name]);
      else names.push(name);
      return;
    }
    this.keep(p);
    if (Array.isArray(e)) {
      this.forget(e[i]);
      e[i] = p;
    } else if (e.slot === i) {
      this.forget(e);
      this.byName.set(name, p);
    } else {
      const slots = new Array<Prepared | undefined>(SLOTS);
      slots[e.slot] = e;
      slots[i] = p;
      this.byName.set(name, slots);
    }
  }

  dropScope(scope: string): void {
    const names = this.byScope.get(scope);
    if (names === undefined) return;
    this.byScope.delete(scope);
    if (typeof names === 'string') this.dropName(names);
    else for (const n of names) this.dropName(n);
  }

  clear(): void {
    this.byName.clear();
    this.byScope.clear();
    this.slab = Buffer.alloc(0);
    this.slabUsed = 0;
    this.slabBytes = 0;
    this.keptBytes = 0;
  }

  private dropName(name: string): void {
    const e = this.byName.get(name);
    if (e === undefined) return;
    this.byName.delete(name);
    if (Array.isArray(e)) for (const p of e) this.forget(p);
    else this.forget(e);
  }

  /** Moves `p`'s bytes into a slab (or into memory of their own when large); shares its TTL offsets. */
  private keep(p: Prepared): void {
    if (p.ttlOffsets !== null) p.ttlOffsets = this.sharedOffsets(p.ttlOffsets);
    const n = p.bytes.length;
    if (n > OWN_MEMORY) {
      const own = Buffer.allocUnsafeSlow(n);
      p.bytes.copy(own);
      p.bytes = own;
      return;
    }
    if (this.slabUsed + n > this.slab.length) {
      if (!this.compacting && this.slabBytes >= 8 * SLAB && this.slabBytes > 2 * (this.keptBytes + n)) this.compact();
      this.slab = Buffer.allocUnsafeSlow(SLAB);
      this.slabUsed = 0;
      this.slabBytes += SLAB;
    }
    const view = this.slab.subarray(this.slabUsed, this.slabUsed + n);
    p.bytes.copy(view);
    p.bytes = view;
    this.slabUsed += n;
    this.keptBytes += n;
  }

  private forget(p: Prepared | undefined): void {
    if (p !== undefined && p.bytes.length <= OWN_MEMORY) this.keptBytes -= p.bytes.length;
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
        for (const p of e) if (p !== undefined) this.keep(p);
      } else this.keep(e);
    }
    this.compacting = false;
  }
}
