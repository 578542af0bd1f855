// Top names for the status page: a Space-Saving heavy-hitters sketch (Metwally, Agrawal,
// El Abbadi 2005) in a fixed number of slots, so counting a name costs one Map lookup on a
// hit and a 64-slot scan on a miss, and memory never grows with the names clients invent.
// Counts decay (half-life one minute) so the list shows what is asked now, not since start.

import { Rcode } from '../dns/constants.js';

/** Slots per sketch: names whose share of queries is above 1/64 are always kept. */
export const TOP_SLOTS = 64;
/** Half-life of a counted query, in seconds. */
export const NAME_HALF_LIFE_SECONDS = 60;

export interface NameCount {
  name: string;
  /** Queries for the name, decayed (an estimate: off by at most the smallest slot's count). */
  count: number;
}

export class TopNames {
  private readonly names: string[] = [];
  private readonly counts: Float64Array;
  private readonly slotOf = new Map<string, number>();
  /** Every query counted, decayed like the slots: the denominator of a name's share. */
  total = 0;

  constructor(readonly capacity = TOP_SLOTS) {
    this.counts = new Float64Array(capacity);
  }

  /** `n`: queries at once (answers the native table gave, folded). */
  add(name: string, n = 1): void {
    this.total += n;
    const slot = this.slotOf.get(name);
    if (slot !== undefined) {
      this.counts[slot]! += n;
      return;
    }
    const used = this.names.length;
    if (used < this.capacity) {
      this.names.push(name);
      this.counts[used] = n;
      this.slotOf.set(name, used);
      return;
    }
    // Full: the smallest slot counts the query, and its name gives way to the newcomer with
    // probability 1/count (Unbiased Space-Saving, Ting 2018): heavy hitters still take a
    // slot, counts stay unbiased, and a flood of one-off names rarely touches the Map.
    const counts = this.counts;
    let min = 0;
    let least = counts[0]!;
    for (let i = 1; i < used; i++) {
      const c = counts[i]!;
      if (c < least) {
        least = c;
        min = i;
      }
    }
    counts[min] = least + n;
    if (Math.random() * (least + n) >= n) return;
    this.slotOf.delete(this.names[min]!);
    this.names[min] = name;
    this.slotOf.set(name, min);
  }

  /** Multiplies every count by `factor` (0..1]. */
  decay(factor: number): void {
    for (let i = 0; i < this.names.length; i++) this.counts[i]! *= factor;
    this.total *= factor;
  }

  /** Names held, largest count first. */
  top(limit = this.capacity): NameCount[] {
    const out: NameCount[] = this.names.map((name, i) => ({ name, count: this.counts[i]! }));
    out.sort((a, b) => b.count - a.count || (a.name < b.name ? -1 : 1));
    return out.slice(0, limit);
  }

  get size(): number {
    return this.names.length;
  }

  clear(): void {
    this.names.length = 0;
    this.slotOf.clear();
    this.counts.fill(0);
    this.total = 0;
  }
}

/** The two sketches the server feeds while the status page is on (Dispatcher.count). */
export class QueryNames {
  /** Set while a status page is configured; the server checks it before calling record. */
  enabled = false;
  readonly all = new TopNames();
  readonly nxdomain = new TopNames();

  record(name: string, rcode: number, n = 1): void {
    this.all.add(name, n);
    if (rcode === Rcode.NXDOMAIN) this.nxdomain.add(name, n);
  }

  /** Ages both sketches by `seconds` of the half-life. */
  age(seconds: number): void {
    const f = 2 ** (-seconds / NAME_HALF_LIFE_SECONDS);
    this.all.decay(f);
    this.nxdomain.decay(f);
  }
}
