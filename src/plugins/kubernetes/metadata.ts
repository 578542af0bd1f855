// The labels the kubernetes plugin publishes for the `metadata` plugin, as CoreDNS's
// kubernetes/metadata.go: the client's pod (with `pods verified`) and the parts of a name
// in the cluster zone. Values are computed only when another plugin reads them.

import { unmappedIP } from '../../dns/ip.js';
import type { Metadata } from '../../server/metadata.js';
import type { Request } from '../../server/request.js';
import { matchZone } from '../fallthrough.js';
import { keysOf, type ClusterIndex } from '../../cluster/clusterindex.js';
import { parseRequest } from './lookup.js';
import type { KubernetesOptions } from './options.js';

function clientIp(req: Request): string {
  return unmappedIP(req.client.remoteAddress);
}

export function publishMetadata(o: KubernetesOptions, index: ClusterIndex, req: Request, md: Metadata): void {
  if (o.pods === 'verified') {
    // CoreDNS's podWithIP: only pods we watch (verified mode), the first one with this address.
    const key = keysOf(index.podsByIp.get(clientIp(req)))[0];
    if (key !== undefined) {
      const slash = key.indexOf('/');
      md.set('kubernetes/client-namespace', key.slice(0, slash));
      md.set('kubernetes/client-pod-name', key.slice(slash + 1));
    }
  }
  const zone = matchZone(o.zones, req.name);
  if (zone === undefined) return;
  const r = parseRequest(req.name, zone);
  if (r === null) return;
  md.set('kubernetes/endpoint', r.endpoint);
  md.set('kubernetes/kind', r.podOrSvc);
  md.set('kubernetes/namespace', r.namespace);
  md.set('kubernetes/port-name', r.port);
  md.set('kubernetes/protocol', r.protocol);
  md.set('kubernetes/service', r.service);
}
