// "did you mean ...?" for a misspelt directive or option: the closest known name by edit distance.

/** Optimal string alignment distance: insertions, deletions, substitutions and swaps of neighbours cost 1. */
export function editDistance(a: string, b: string): number {
  const m = a.length;
  const n = b.length;
  let prev2: number[] = [];
  let prev: number[] = Array.from({ length: n + 1 }, (_, j) => j);
  for (let i = 1; i <= m; i++) {
    const cur: number[] = [i];
    for (let j = 1; j <= n; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min(prev[j]! + 1, cur[j - 1]! + 1, prev[j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d = Math.min(d, prev2[j - 2]! + 1);
      cur.push(d);
    }
    prev2 = prev;
    prev = cur;
  }
  return prev[n]!;
}

/**
 * The known name closest to `word`, if close enough to be a typo: at most one edit for short
 * names, two from six letters on (so `whoam` finds `whoami`, `cache` never suggests `hosts`).
 */
export function closestName(word: string, known: Iterable<string>): string | undefined {
  const w = word.toLowerCase();
  const limit = w.length >= 6 ? 2 : 1;
  let best: string | undefined;
  let bestDistance = limit + 1;
  for (const k of known) {
    if (k === w) return undefined;
    const d = editDistance(w, k);
    if (d < bestDistance || (d === bestDistance && best !== undefined && k < best)) {
      best = k;
      bestDistance = d;
    }
  }
  return bestDistance <= limit ? best : undefined;
}

/** " (did you mean 'NAME'?)" or "" when nothing known is close. */
export function didYouMean(word: string, known: Iterable<string>): string {
  const s = closestName(word, known);
  return s === undefined ? '' : ` (did you mean '${s}'?)`;
}

/** What clusterdns has that comes closest to a CoreDNS plugin it does not include. */
const CLOSEST: Record<string, string> = {
  auto: 'file, one line per zone',
  secondary: 'forward to the primary',
  route53: 'file',
  azure: 'file',
  clouddns: 'file',
  grpc: 'forward',
  dnstap: 'log',
  trace: 'log and prometheus',
  geoip: 'acl',
  tls: 'forward with tls://',
};

/** `; use X instead` for a CoreDNS plugin with a near equivalent here, else ''. */
export function insteadHint(name: string): string {
  const c = CLOSEST[name];
  return c === undefined ? '' : `; the closest here: ${c}`;
}
