// The one place the kubernetes plugin tells caches (the cache plugin, in every server block
// of this process) that cluster data changed, so none keeps answering with what was true
// before: the Service's names (its SRV and endpoint names are below it), the PTR names of
// the IPs involved, a namespace's names, a pod's name.

import { invalidateNames, invalidateSuffix } from '../../server/invalidation.js';
import { ipToReverseName } from '../../dns/reverse.js';
import type { ClusterChange } from '../../cluster/clusterindex.js';
import { dashedIp } from './lookup.js';

export function invalidateCaches(
  change: ClusterChange,
  forwardZones: readonly string[],
  allZones: readonly string[],
): void {
  // The apex answers carry the SOA serial, which every change moves.
  invalidateNames(allZones);
  for (const key of change.services) {
    const slash = key.indexOf('/');
    const svcDomain = `${key.slice(slash + 1)}.${key.slice(0, slash)}.svc.`;
    for (const z of forwardZones) invalidateSuffix(svcDomain + z);
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
    invalidateNames(names);
  }
  for (const ns of change.namespaces) {
    for (const z of forwardZones) {
      invalidateSuffix(`${ns}.svc.${z}`);
      invalidateSuffix(`${ns}.pod.${z}`);
    }
  }
  if (change.pods.length > 0) {
    const names: string[] = [];
    for (const p of change.pods)
      if (p.ip) for (const z of forwardZones) names.push(`${dashedIp(p.ip)}.${p.namespace}.pod.${z}`);
    invalidateNames(names);
  }
}

/** After the first sync every cached answer from before (SERVFAIL, NXDOMAIN) may be wrong. */
export function invalidateZones(zones: readonly string[]): void {
  for (const z of zones) invalidateSuffix(z);
}
