// "Did you mean backend.default?": after NXDOMAIN, the Services whose <name>.<namespace> is
// closest (by edit distance, a swap of two letters counting as one edit) to what was asked,
// read the way the pod's search list would read it.

import type { ServiceRef } from './cluster.js';

export interface Suggestion {
  /** `backend.default`: what to type in a pod. */
  name: string;
  fqdn: string;
  service: string;
  namespace: string;
  distance: number;
  why: string;
}

/** The Service and namespace a name refers to in the pod's eyes, if it looks like one. */
export interface ServiceQuery {
  service: string;
  namespace: string;
  /** The namespace was not written: it is the pod's, from the first search domain. */
  namespaceImplied: boolean;
  clusterDomain: string;
}

/** Optimal string alignment distance (Levenshtein plus adjacent transpositions). */
export function editDistance(a: string, b: string): number {
  const n = a.length;
  const m = b.length;
  if (n === 0) return m;
  if (m === 0) return n;
  let prev2 = new Array<number>(m + 1).fill(0);
  let prev = Array.from({ length: m + 1 }, (_, j) => j);
  let cur = new Array<number>(m + 1).fill(0);
  for (let i = 1; i <= n; i++) {
    cur[0] = i;
    for (let j = 1; j <= m; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min(prev[j]! + 1, cur[j - 1]! + 1, prev[j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d = Math.min(d, prev2[j - 2]! + 1);
      cur[j] = d;
    }
    [prev2, prev, cur] = [prev, cur, prev2];
  }
  return prev[m]!;
}

/** The pod's namespace and cluster domain, read from a Kubernetes search list. */
export function podContext(search: readonly string[]): { namespace: string; clusterDomain: string } {
  let namespace = 'default';
  let clusterDomain = 'cluster.local';
  const first = search.find((d) => /^[^.]+\.svc\..+/.test(d));
  if (first) {
    const dot = first.indexOf('.');
    namespace = first.slice(0, dot);
    clusterDomain = first.slice(dot + '.svc.'.length);
  } else {
    const svc = search.find((d) => d.startsWith('svc.'));
    if (svc) clusterDomain = svc.slice(4);
  }
  return { namespace, clusterDomain };
}

/** Reads `svc`, `svc.ns`, `svc.ns.svc`, `svc.ns.svc.<domain>` (and a leading hostname/port label is dropped). */
export function parseServiceQuery(input: string, search: readonly string[]): ServiceQuery | null {
  const ctx = podContext(search);
  let name = input.toLowerCase();
  if (name.endsWith('.')) name = name.slice(0, -1);
  const domainSuffix = `.svc.${ctx.clusterDomain}`;
  if (name.endsWith(domainSuffix)) name = name.slice(0, -domainSuffix.length);
  else if (name.endsWith('.svc')) name = name.slice(0, -4);
  else if (name.endsWith(`.${ctx.clusterDomain}`)) name = name.slice(0, -(ctx.clusterDomain.length + 1));
  const labels = name.split('.').filter((l) => l !== '');
  if (labels.length === 1)
    return { service: labels[0]!, namespace: ctx.namespace, namespaceImplied: true, clusterDomain: ctx.clusterDomain };
  if (labels.length === 2)
    return { service: labels[0]!, namespace: labels[1]!, namespaceImplied: false, clusterDomain: ctx.clusterDomain };
  if (labels.length === 3 && input.toLowerCase().includes('.svc')) {
    // pod-0.mysql.default.svc...: a hostname under a headless Service.
    return { service: labels[1]!, namespace: labels[2]!, namespaceImplied: false, clusterDomain: ctx.clusterDomain };
  }
  return null;
}

// Top-level domains a Service's namespace is unlikely to be named after: `example.com` is an
// external name, not Service `example` in namespace `com`.
const EXTERNAL_TLDS = new Set(
  'com net org io dev app ai co info biz me tv us uk de fr nl eu ch jp cn ru in br au ca cloud edu gov mil int arpa example test invalid localhost local internal lan home corp'.split(
    ' ',
  ),
);

/** A dotted name outside the cluster domain whose last label is a well-known top-level domain. */
export function looksExternal(input: string, search: readonly string[]): boolean {
  const { clusterDomain } = podContext(search);
  const name = input.toLowerCase().replace(/\.$/, '');
  if (name === clusterDomain || name.endsWith(`.${clusterDomain}`) || name.endsWith('.svc')) return false;
  const labels = name.split('.');
  return labels.length >= 2 && EXTERNAL_TLDS.has(labels[labels.length - 1]!);
}

/** Up to `limit` Services close to the query, the closest first. */
export function suggestServices(q: ServiceQuery, services: readonly ServiceRef[], limit = 3): Suggestion[] {
  const asked = `${q.service}.${q.namespace}`;
  const threshold = Math.max(2, Math.floor(asked.length / 4));
  const scored: Suggestion[] = [];
  for (const s of services) {
    const key = `${s.name}.${s.namespace}`;
    if (key === asked) continue; // it exists: NXDOMAIN has another cause
    const fqdn = `${s.name}.${s.namespace}.svc.${q.clusterDomain}`;
    if (s.name === q.service) {
      scored.push({
        name: key,
        fqdn,
        service: s.name,
        namespace: s.namespace,
        distance: 0,
        why: `a Service ${s.name} exists in namespace ${s.namespace}, not in ${q.namespace}`,
      });
      continue;
    }
    const best = editDistance(asked, key);
    if (best <= threshold) {
      scored.push({
        name: key,
        fqdn,
        service: s.name,
        namespace: s.namespace,
        distance: best,
        why: `${best} edit${best === 1 ? '' : 's'} from ${asked}`,
      });
    }
  }
  scored.sort((a, b) => a.distance - b.distance || a.name.localeCompare(b.name));
  return scored.slice(0, limit);
}
