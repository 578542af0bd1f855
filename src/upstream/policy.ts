// The order in which a query tries the upstreams (`policy random|round_robin|sequential`).

import { randomBelow } from './wire.js';

export type PolicyName = 'random' | 'round_robin' | 'sequential';

export interface Policy {
  readonly name: PolicyName;
  /** The upstreams in the order this query tries them. May return `list` itself. */
  order<T>(list: readonly T[]): readonly T[];
}

/** A fresh random permutation per query (two upstreams: a coin flip, no allocation when kept). */
export class RandomPolicy implements Policy {
  readonly name = 'random';

  order<T>(list: readonly T[]): readonly T[] {
    const n = list.length;
    if (n <= 1) return list;
    if (n === 2) return randomBelow(2) === 0 ? list : [list[1]!, list[0]!];
    const out = list.slice();
    for (let i = n - 1; i > 0; i--) {
      const j = randomBelow(i + 1);
      const t = out[i]!;
      out[i] = out[j]!;
      out[j] = t;
    }
    return out;
  }
}

/** Each query starts one further along the list. */
export class RoundRobinPolicy implements Policy {
  readonly name = 'round_robin';
  private next = 0;

  order<T>(list: readonly T[]): readonly T[] {
    const n = list.length;
    if (n <= 1) return list;
    const start = this.next % n;
    this.next = (this.next + 1) % 0x40000000;
    if (start === 0) return list;
    return [...list.slice(start), ...list.slice(0, start)];
  }
}

/** Always the order written. */
export class SequentialPolicy implements Policy {
  readonly name = 'sequential';

  order<T>(list: readonly T[]): readonly T[] {
    return list;
  }
}

export function makePolicy(name: PolicyName): Policy {
  if (name === 'round_robin') return new RoundRobinPolicy();
  if (name === 'sequential') return new SequentialPolicy();
  return new RandomPolicy();
}
