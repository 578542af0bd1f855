// The one place the kubernetes plugin works out what a change in the cluster makes wrong, for
// its configuration's Invalidation: the dependency keys of the Services and IPs involved (every
// prepared answer built from them, wherever it is held, an ExternalName's that embeds its
// target's addresses included), and the names below them, for cached answers built from nothing
// (a cached NXDOMAIN for a Service that now exists).

import type { Invalidation } from '../../server/invalidation.js';
import { ipToReverseName } from '../../dns/reverse.js';
import type { ClusterChange } from '../../cluster/clusterindex.js';
import { dashedIp } from './lookup.js';
import { GLOBAL_SCOPE } from './answer.js';

/**
 * The keys answers record (handler.ts): `s:ns/name` for a Service and its EndpointSlices, `p:IP`
 * for a PTR answer, and the zone-wide `g` (apex SOA and NS, ns.dns) that every change moves.
 */
export function changeDependencies(change: ClusterChange): string[] {
  const keys: string[] = [GLOBAL_SCOPE];
  for (const key of change.services) keys.push(`s:${key}`);
  for (const ip of change.ips) keys.push(`p:${ip}`);
  return keys;
}

export function invalidateCaches(
  invalidation: Invalidation,
  change: ClusterChange,
  forwardZones: readonly string[],
  allZones: readonly string[],
): void {
  invalidation.invalidateDependencies(changeDependencies(change));
  // The apex answers carry the SOA serial, which every change moves.
  invalidation.invalidateNames(allZones);
  for (const key of change.services) {
    const slash = key.indexOf('/');
    const svcDomain = `${key.slice(slash + 1)}.${key.slice(0, slash)}.svc.`;
    for (const z of forwardZones) invalidation.invalidateSuffix(svcDomain + z);
  }
  if (change.ips.length > 0) {
    const names: string[] = [];
    for (const ip of change.ips) {
      try {
        names.push(ipToReverseName(ip));
      } catch {
        // Only canonical IPs reach the index; nothing to invalidate for anything else.
      }
    }
    invalidation.invalidateNames(names);
  }
  for (const ns of change.namespaces) {
    for (const z of forwardZones) {
      invalidation.invalidateSuffix(`${ns}.svc.${z}`);
      invalidation.invalidateSuffix(`${ns}.pod.${z}`);
    }
  }
  if (change.pods.length > 0) {
    const names: string[] = [];
    for (const p of change.pods)
      if (p.ip) for (const z of forwardZones) names.push(`${dashedIp(p.ip)}.${p.namespace}.pod.${z}`);
    invalidation.invalidateNames(names);
  }
}

/** After the first sync every cached answer from before (SERVFAIL, NXDOMAIN) may be wrong. */
export function invalidateZones(invalidation: Invalidation, zones: readonly string[]): void {
  for (const z of zones) invalidation.invalidateSuffix(z);
}
