// The kubernetes plugin's view of the cluster as other plugins see it (plugin.ts's ClusterView):
// read from this instance's own index, so a plugin like k8s_external needs no second watch.

import type { ClusterService, ClusterView } from '../plugin.js';
import { keysOf, type ClusterIndex } from '../../cluster/clusterindex.js';
import { endpointHostname, type Lookup } from './lookup.js';
import type { KubernetesOptions } from './options.js';

const NONE: readonly string[] = [];

export function clusterView(index: ClusterIndex, lookup: Lookup, o: KubernetesOptions): ClusterView {
  // External IP → Service key, rebuilt on the first reverse lookup after a change (external IPs are few).
  let byExternal: Map<string, string> | null = null;
  index.listen({
    onChange: () => {
      byExternal = null;
    },
    onSynced: () => {
      byExternal = null;
    },
  });
  return {
    zones: o.zones,
    pods: o.pods,
    index,
    podNamespace(ip: string) {
      for (const key of keysOf(index.podsByIp.get(ip))) {
        const pod = index.pods.get(key);
        if (pod !== undefined && pod.namespace !== '') return pod.namespace;
      }
      return null;
    },
    serviceByExternalIP(ip: string) {
      if (byExternal === null) {
        byExternal = new Map();
        for (const [key, svc] of index.services)
          for (const e of svc.external?.ips ?? NONE) if (!byExternal.has(e)) byExternal.set(e, key);
      }
      const key = byExternal.get(ip);
      if (key === undefined) return undefined;
      const slash = key.indexOf('/');
      return { namespace: key.slice(0, slash), name: key.slice(slash + 1) };
    },
    namespaceExposed: (ns) => lookup.namespaceExposed(ns),
    service(namespace: string, name: string): ClusterService | undefined {
      const key = `${namespace}/${name}`;
      const svc = index.services.get(key);
      if (svc === undefined) return undefined;
      return {
        kind: svc.kind,
        externalIPs: svc.external?.ips ?? NONE,
        externalHosts: svc.external?.hosts ?? NONE,
        ports: svc.ports,
        endpoints() {
          const out: Array<{ host: string; ip: string }> = [];
          for (const slice of index.slicesByService.get(key) ?? [])
            for (const ep of slice.endpoints) for (const ip of ep.ips) out.push({ host: endpointHostname(ep, ip), ip });
          return out;
        },
      };
    },
    nameserverAddresses: () => lookup.nsAddresses().map((a) => a.ip),
    serial: () => index.serial,
    onServiceChange(changed) {
      return index.listen({
        onChange: (c) => {
          for (const key of c.services) {
            const slash = key.indexOf('/');
            changed(key.slice(0, slash), key.slice(slash + 1));
          }
        },
      });
    },
  };
}
