// Scale targets (`deployment/NAME`, ...) and scaling them through their autoscaling/v1 `/scale`
// subresource: GET the Scale, and PUT it back only when spec.replicas differs.
import type { KubeClient } from '../kube/http.js';
import { isRecord, objectMeta, type Scale } from '../kube/types.js';

export type TargetKind = 'deployment' | 'replicaset' | 'statefulset' | 'replicationcontroller';

export interface ScaleTarget {
  kind: TargetKind;
  name: string;
  namespace: string;
}

/** A --target that names no scalable kind or no object. */
export class TargetError extends Error {
  readonly code = 'AUTOSCALE_ERR_TARGET';
  constructor(message: string) {
    super(message);
    this.name = 'TargetError';
  }
}

/** Resource names (singular, plural, with API group) → kind. */
const KIND_NAMES: ReadonlyMap<string, TargetKind> = new Map<string, TargetKind>([
  ['deployment', 'deployment'],
  ['deployments', 'deployment'],
  ['deployment.apps', 'deployment'],
  ['deployments.apps', 'deployment'],
  ['replicaset', 'replicaset'],
  ['replicasets', 'replicaset'],
  ['replicaset.apps', 'replicaset'],
  ['replicasets.apps', 'replicaset'],
  ['statefulset', 'statefulset'],
  ['statefulsets', 'statefulset'],
  ['statefulset.apps', 'statefulset'],
  ['statefulsets.apps', 'statefulset'],
  ['replicationcontroller', 'replicationcontroller'],
  ['replicationcontrollers', 'replicationcontroller'],
]);

const NAME = /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;

/** `--target`: a comma-separated list of KIND/NAME, case-insensitive (CPA lower-cases it). */
export function parseTargets(spec: string, namespace: string): ScaleTarget[] {
  const items = spec
    .toLowerCase()
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.length > 0);
  if (items.length === 0) throw new TargetError('--target is required, e.g. --target=deployment/clusterdns');
  return items.map((item) => {
    const parts = item.split('/');
    if (parts.length !== 2) throw new TargetError(`--target "${item}": must be KIND/NAME, e.g. deployment/clusterdns`);
    const [kindName = '', name = ''] = parts;
    const kind = KIND_NAMES.get(kindName);
    if (!kind)
      throw new TargetError(
        `--target "${item}": unsupported kind "${kindName}" (deployment, replicaset, statefulset or replicationcontroller)`,
      );
    if (!NAME.test(name) || name.length > 253)
      throw new TargetError(`--target "${item}": "${name}" is not a valid object name`);
    return { kind, name, namespace };
  });
}

/** The `/scale` subresource of a target. */
export function scalePath(t: ScaleTarget): string {
  const ns = encodeURIComponent(t.namespace);
  const name = encodeURIComponent(t.name);
  switch (t.kind) {
    case 'deployment':
      return `/apis/apps/v1/namespaces/${ns}/deployments/${name}/scale`;
    case 'replicaset':
      return `/apis/apps/v1/namespaces/${ns}/replicasets/${name}/scale`;
    case 'statefulset':
      return `/apis/apps/v1/namespaces/${ns}/statefulsets/${name}/scale`;
    case 'replicationcontroller':
      return `/api/v1/namespaces/${ns}/replicationcontrollers/${name}/scale`;
  }
}

export function describeTarget(t: ScaleTarget): string {
  return `${t.kind}/${t.name} in namespace ${t.namespace}`;
}

export interface ScaleResult {
  target: ScaleTarget;
  previous: number;
  replicas: number;
  /** A PUT was sent. */
  changed: boolean;
}

/** Read the target's Scale; if its spec.replicas is not `replicas`, write it back with `replicas`. */
export async function scaleTarget(
  client: KubeClient,
  target: ScaleTarget,
  replicas: number,
  signal?: AbortSignal,
): Promise<ScaleResult> {
  const path = scalePath(target);
  const body = await client.getJSON(path, undefined, { signal });
  const metadata = objectMeta(body);
  if (!isRecord(body) || !metadata) throw new Error(`${path}: answer is not a Scale object`);
  const spec = isRecord(body.spec) ? body.spec : {};
  const previous = typeof spec.replicas === 'number' ? spec.replicas : 0;
  if (previous === replicas) return { target, previous, replicas, changed: false };
  // Send back the metadata we read (resourceVersion included): a concurrent change is a 409, retried next poll.
  const scale: Scale = {
    kind: 'Scale',
    apiVersion: 'autoscaling/v1',
    metadata,
    spec: { replicas },
  };
  await client.request('PUT', path, scale, { signal });
  return { target, previous, replicas, changed: true };
}
