// The names a resolver with this search list and ndots would ask for, in its order: fewer
// dots than ndots, the search domains first and the name as it is last; otherwise the name
// as it is first. The order is glibc's, worked out by the same code `clusterdns diagnose`
// uses to explain a pod's lookups.

import { planCandidates } from '../../dns/search.js';

export interface Expansion {
  /** Fully qualified names, in the order they are preferred. */
  names: string[];
  /** Position of the name as it is (`name.`) in `names`. */
  bare: number;
}

/** The candidates for `qname` (fully qualified, letter case as asked). Names over 255 octets are left out. */
export function expand(qname: string, search: readonly string[], ndots: number): Expansion {
  if (qname === '.') return { names: ['.'], bare: 0 };
  const input = qname.endsWith('.') ? qname.slice(0, -1) : qname;
  const plan = planCandidates(input, { search, ndots, noTldQuery: false });
  const names: string[] = [];
  let bare = -1;
  const asIs = `${input}.`;
  for (const c of plan.candidates) {
    if (c.invalid !== undefined) continue;
    if (names.some((n) => n.toLowerCase() === c.name.toLowerCase())) continue;
    if (c.name === asIs) bare = names.length;
    names.push(c.name);
  }
  if (bare < 0) {
    bare = names.length;
    names.push(asIs);
  }
  return { names, bare };
}
