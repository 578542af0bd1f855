// Process-tree helpers for tests of worker processes.
import { readdirSync, readFileSync } from 'node:fs';

/** PIDs whose parent is `pid`, from /proc. */
export function childrenOf(pid: number): number[] {
  const out: number[] = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = readFileSync(`/proc/${d}/stat`, 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid) out.push(Number(d));
    } catch {
      /* gone */
    }
  }
  return out;
}
