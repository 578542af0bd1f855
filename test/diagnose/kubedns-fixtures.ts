// The kube-system objects of cluster DNS, as `kubectl get -o json` shows them, for the test
// API server: the kube-dns Service, its EndpointSlice and the DNS pods.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { KubeApiServer } from '../helpers/kubeapi.js';

export function kubeDnsService(clusterIP = '10.96.0.10'): Record<string, unknown> {
  return {
    kind: 'Service',
    apiVersion: 'v1',
    metadata: { name: 'kube-dns', namespace: 'kube-system', labels: { 'k8s-app': 'kube-dns' } },
    spec: {
      type: 'ClusterIP',
      clusterIP,
      clusterIPs: [clusterIP],
      selector: { 'k8s-app': 'kube-dns' },
      ports: [
        { name: 'dns', port: 53, protocol: 'UDP' },
        { name: 'dns-tcp', port: 53, protocol: 'TCP' },
      ],
    },
  };
}

/** One endpoint per entry: true = ready. */
export function kubeDnsSlice(ready: boolean[]): Record<string, unknown> {
  return {
    kind: 'EndpointSlice',
    apiVersion: 'discovery.k8s.io/v1',
    metadata: {
      name: 'kube-dns-x7k2p',
      namespace: 'kube-system',
      labels: { 'kubernetes.io/service-name': 'kube-dns' },
    },
    addressType: 'IPv4',
    ports: [{ name: 'dns', port: 53, protocol: 'UDP' }],
    endpoints: ready.map((r, i) => ({
      addresses: [`10.244.0.${i + 2}`],
      conditions: { ready: r },
      targetRef: { kind: 'Pod', namespace: 'kube-system', name: `coredns-5d78c9869d-${i}` },
    })),
  };
}

export function kubeDnsPod(i: number, ready: boolean, waitingReason?: string): Record<string, unknown> {
  return {
    kind: 'Pod',
    apiVersion: 'v1',
    metadata: { name: `coredns-5d78c9869d-${i}`, namespace: 'kube-system', labels: { 'k8s-app': 'kube-dns' } },
    spec: { nodeName: 'node-1' },
    status: {
      phase: 'Running',
      podIP: `10.244.0.${i + 2}`,
      conditions: [{ type: 'Ready', status: ready ? 'True' : 'False' }],
      containerStatuses: [
        {
          name: 'coredns',
          ready,
          restartCount: waitingReason ? 7 : 0,
          state: waitingReason ? { waiting: { reason: waitingReason } } : { running: {} },
        },
      ],
    },
  };
}

export function appService(name: string, namespace: string, clusterIP: string): Record<string, unknown> {
  return {
    kind: 'Service',
    apiVersion: 'v1',
    metadata: { name, namespace },
    spec: { type: 'ClusterIP', clusterIP, ports: [{ port: 8080, protocol: 'TCP' }] },
  };
}

/** A healthy cluster DNS: the Service, two ready endpoints, two ready pods. */
export function applyHealthyDns(api: KubeApiServer, clusterIP = '10.96.0.10'): void {
  api.apply(kubeDnsService(clusterIP));
  api.apply(kubeDnsSlice([true, true]));
  api.apply(kubeDnsPod(0, true));
  api.apply(kubeDnsPod(1, true));
}

/** A kubeconfig file for the (plain HTTP) test API server; returns its path. */
export function writeKubeconfig(dir: string, api: KubeApiServer): string {
  const file = join(dir, 'kubeconfig.yaml');
  writeFileSync(
    file,
    [
      'apiVersion: v1',
      'kind: Config',
      'clusters:',
      '  - name: test',
      `    cluster: { server: "${api.url}" }`,
      'contexts:',
      '  - name: test',
      '    context: { cluster: test, namespace: default }',
      'current-context: test',
      '',
    ].join('\n'),
  );
  return file;
}
