// Answers already built, by lowercase name and qtype, so a repeated query is one Map read
// and one copy. Each name belongs to a scope — the Service it is under (`s:ns/name`), the
// IP of a PTR name (`p:IP`), or everything else (`g`) — and a watch event drops exactly
// the scopes it touched. Only positive and NODATA answers are kept: NXDOMAIN depends on
// fallthrough and on sync state, and the set of names that do not exist is unbounded.

import { QType } from '../../dns/constants.js';
import type { Prepared } from './answer.js';

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

export class PreparedAnswers {
  private readonly byName = new Map<string, Array<Prepared | undefined>>();
  private readonly byScope = new Map<string, string[]>();

  constructor(private readonly maxNames = 200_000) {}

  get size(): number {
    return this.byName.size;
  }

  get(name: string, qtype: number): Prepared | undefined {
    const slots = this.byName.get(name);
    if (slots === undefined) return undefined;
    const i = slotOf(qtype);
    return i < 0 ? undefined : slots[i];
  }

  set(name: string, qtype: number, scope: string, p: Prepared): void {
    const i = slotOf(qtype);
    if (i < 0) return;
    let slots = this.byName.get(name);
    if (slots === undefined) {
      // A bound, not an LRU: the names that exist are bounded by the cluster, so this only trips on churn.
      if (this.byName.size >= this.maxNames) this.clear();
      slots = new Array<Prepared | undefined>(SLOTS);
      this.byName.set(name, slots);
      const names = this.byScope.get(scope);
      if (names === undefined) this.byScope.set(scope, [name]);
      else names.push(name);
    }
    slots[i] = p;
  }

  dropScope(scope: string): void {
    const names = this.byScope.get(scope);
    if (names === undefined) return;
    this.byScope.delete(scope);
    for (const n of names) this.byName.delete(n);
  }

  clear(): void {
    this.byName.clear();
    this.byScope.clear();
  }
}
