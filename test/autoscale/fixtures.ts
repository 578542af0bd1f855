// Objects for autoscaler tests: nodes with allocatable CPU and conditions, and a Deployment.

export interface NodeOptions {
  ready?: boolean;
  unschedulable?: boolean;
  labels?: Record<string, string>;
}

export function nodeObject(name: string, cpu: string | undefined, opts: NodeOptions = {}): Record<string, unknown> {
  return {
    kind: 'Node',
    apiVersion: 'v1',
    metadata: { name, ...(opts.labels ? { labels: opts.labels } : {}) },
    spec: opts.unschedulable ? { unschedulable: true } : {},
    status: {
      ...(cpu === undefined ? {} : { allocatable: { cpu, memory: '8Gi' }, capacity: { cpu, memory: '8Gi' } }),
      conditions: [
        { type: 'MemoryPressure', status: 'False' },
        { type: 'Ready', status: opts.ready === false ? 'False' : 'True' },
      ],
    },
  };
}

export function deploymentObject(name: string, namespace: string, replicas: number): Record<string, unknown> {
  const labels = { 'k8s-app': name };
  return {
    kind: 'Deployment',
    apiVersion: 'apps/v1',
    metadata: { name, namespace, labels },
    spec: {
      replicas,
      selector: { matchLabels: labels },
      template: { metadata: { labels }, spec: { containers: [{ name, image: 'clusterdns:test' }] } },
    },
  };
}

/** Replicas of a stored Deployment, or undefined. */
export function replicasOf(obj: Record<string, unknown> | undefined): number | undefined {
  const spec = obj?.spec;
  if (typeof spec !== 'object' || spec === null) return undefined;
  const r = (spec as Record<string, unknown>).replicas;
  return typeof r === 'number' ? r : undefined;
}
