// The cluster zone as a whole, for the `transfer` plugin (AXFR), after CoreDNS's kubernetes/xfr.go:
// SOA, NS, then per Service its A/AAAA, its named ports' SRV, a headless Service's endpoint
// names, and an ExternalName's CNAME. Pod names (`a-b-c-d.ns.pod`) are not listed, as in CoreDNS.

import { QClass, QType } from '../../dns/constants.js';
import type { RecordData, ResourceRecord } from '../../dns/message.js';
import type { ZoneTransferSource } from '../plugin.js';
import type { ClusterIndex } from '../../cluster/clusterindex.js';
import { endpointHostname, type Lookup } from './lookup.js';
import type { KubernetesOptions } from './options.js';

export function clusterTransfer(index: ClusterIndex, o: KubernetesOptions, lookup: Lookup): ZoneTransferSource {
  const zone = o.primaryZone;
  return {
    transferZones: () => [zone],
    transferRecords(z: string): ResourceRecord[] | null {
      if (z !== zone || !index.synced) return null;
      const ttl = o.ttl;
      const out: ResourceRecord[] = [];
      const seen = new Set<string>();
      const add = (name: string, type: number, data: RecordData, key: string) => {
        const k = `${name} ${type} ${key}`;
        if (seen.has(k)) return;
        seen.add(k);
        out.push({ name, type, class: QClass.IN, ttl, data });
      };
      const at = (rel: string) => `${rel}.${zone}`;
      out.push({
        name: zone,
        type: QType.SOA,
        class: QClass.IN,
        ttl: Math.min(ttl, 300),
        data: {
          mname: at('ns.dns'),
          rname: at('hostmaster'),
          serial: index.serial,
          refresh: 7200,
          retry: 1800,
          expire: 86400,
          minimum: ttl,
        },
      });
      for (const ns of lookup.nsAddresses()) {
        add(zone, QType.NS, { target: at(ns.target) }, ns.target);
        add(at(ns.target), ns.ip.includes(':') ? QType.AAAA : QType.A, { address: ns.ip }, ns.ip);
      }
      const addressType = (ip: string) => (ip.includes(':') ? QType.AAAA : QType.A);
      const keys = [...index.services.keys()].sort();
      for (const key of keys) {
        const svc = index.services.get(key)!;
        if (!lookup.namespaceExposed(svc.namespace)) continue;
        const base = at(`${svc.name}.${svc.namespace}.svc`);
        if (svc.kind === 'ExternalName') {
          if (svc.externalName !== '') add(base, QType.CNAME, { target: svc.externalName }, svc.externalName);
          continue;
        }
        if (svc.kind === 'ClusterIP') {
          for (const ip of svc.clusterIPs) add(base, addressType(ip), { address: ip }, ip);
          for (const p of svc.ports) {
            if (p.name === '' || p.port < 0) continue;
            add(
              at(`_${p.name}._${p.protocol}.${svc.name}.${svc.namespace}.svc`),
              QType.SRV,
              { priority: 0, weight: 100, port: p.port, target: base },
              `${p.port} ${base}`,
            );
          }
          continue;
        }
        for (const slice of index.slicesByService.get(key) ?? []) {
          for (const ep of slice.endpoints) {
            for (const ip of ep.ips) {
              const host = `${endpointHostname(ep, ip)}.${svc.name}.${svc.namespace}.svc.${zone}`;
              add(base, addressType(ip), { address: ip }, ip);
              add(host, addressType(ip), { address: ip }, ip);
              for (const p of slice.ports) {
                if (p.name === '' || p.port < 0) continue;
                add(
                  at(`_${p.name}._${p.protocol}.${svc.name}.${svc.namespace}.svc`),
                  QType.SRV,
                  { priority: 0, weight: 100, port: p.port, target: host },
                  `${p.port} ${host}`,
                );
              }
            }
          }
        }
      }
      return out;
    },
    onZoneChange(changed: (zone: string) => void): () => void {
      return index.listen({
        onChange: () => {
          if (index.synced) changed(zone);
        },
        onSynced: () => changed(zone),
      });
    },
  };
}
