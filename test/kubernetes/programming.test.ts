// The programming-latency metric's service_kind, as CoreDNS labels it: a headless Service's
// slice is headless_with_selector, any other cluster_ip; no trigger time or no Service, nothing.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { KUBE_CLIENT_METRICS } from '../../src/cluster/metrics.js';
import { ServerServices } from '../../src/server/services.js';
import type { EndpointSliceRecord, ServiceRecord } from '../../src/cluster/objects.js';

const svc = (kind: ServiceRecord['kind'], selector: boolean): ServiceRecord => ({
  name: 's',
  namespace: 'ns',
  kind,
  clusterIPs: kind === 'ClusterIP' ? ['10.96.0.1'] : [],
  externalName: '',
  ports: [],
  selector,
});
const slice = (triggerTime: number): EndpointSliceRecord => ({
  name: 's-1',
  namespace: 'ns',
  service: 's',
  ports: [],
  endpoints: [],
  triggerTime,
});

const services = new ServerServices();
const metrics = services.get(KUBE_CLIENT_METRICS);
const observeProgramming = metrics.observeProgramming.bind(metrics);

async function counts(): Promise<Record<string, number>> {
  const text = await services.metrics().getSingleMetricAsString('coredns_kubernetes_dns_programming_duration_seconds');
  const out: Record<string, number> = {};
  for (const m of text.matchAll(/_count\{service_kind="([a-z_]+)"\} (\d+)/g)) out[m[1]!] = Number(m[2]);
  return out;
}

test('service_kind follows CoreDNS: headless (with a selector or not) is headless_with_selector, the rest cluster_ip', async () => {
  const now = 10_000;
  observeProgramming(slice(now - 1000), svc('Headless', true), now);
  observeProgramming(slice(now - 1000), svc('Headless', false), now);
  observeProgramming(slice(now - 1000), svc('ClusterIP', true), now);
  observeProgramming(slice(now - 1000), svc('ExternalName', false), now);
  observeProgramming(slice(0), svc('ClusterIP', true), now);
  observeProgramming(slice(now - 1000), undefined, now);
  assert.deepEqual(await counts(), { headless_with_selector: 2, cluster_ip: 1 });
});
