// CoreDNS's `fallthrough [ZONES...]`: pass a would-be negative answer to the next plugin
// when the name lies in one of the zones (all names when none are listed).

import { isSubdomain } from '../dns/name.js';

export class Fallthrough {
  /** null: fallthrough is off. */
  constructor(readonly zones: readonly string[] | null) {}

  through(name: string): boolean {
    if (this.zones === null) return false;
    for (const z of this.zones) if (isSubdomain(name, z)) return true;
    return false;
  }
}

/** The zone among `zones` that contains `name`, longest first; undefined when none. */
export function matchZone(zones: readonly string[], name: string): string | undefined {
  let best: string | undefined;
  for (const z of zones) if (isSubdomain(name, z) && (best === undefined || z.length > best.length)) best = z;
  return best;
}
