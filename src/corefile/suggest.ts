// "Did you mean" for a directive clusterdns does not know, and what to use for a CoreDNS plugin it lacks.

import { knownDirectives } from '../plugins/order.js';

/** Levenshtein distance, bounded: directive names are short. */
function distance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    let prev = row[0]!;
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const cur = row[j]!;
      row[j] = Math.min(row[j]! + 1, row[j - 1]! + 1, prev + (a[i - 1] === b[j - 1] ? 0 : 1));
      prev = cur;
    }
  }
  return row[b.length]!;
}

/** ` (did you mean 'forward'?)` for a near miss of a known directive, else ''. */
export function didYouMean(name: string): string {
  let best = '';
  let bestD = Infinity;
  for (const k of knownDirectives) {
    const d = distance(name.toLowerCase(), k);
    if (d < bestD) {
      bestD = d;
      best = k;
    }
  }
  return bestD <= Math.max(1, Math.floor(best.length / 3)) ? ` (did you mean '${best}'?)` : '';
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
  metadata: 'log',
  rewrite: 'template or hosts',
  template: 'hosts',
  bufsize: "the server's built-in UDP size cap",
};

/** `; use X instead` for a CoreDNS plugin with a near equivalent here, else ''. */
export function insteadHint(name: string): string {
  const c = CLOSEST[name];
  return c === undefined ? '' : `; the closest here: ${c}`;
}
