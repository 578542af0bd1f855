// What the autoscaler knows about a node, and the cluster status it scales on: node and core
// counts, all of them and the schedulable ones (Ready and not cordoned), as CPA counts them.
import type { Projected } from '../kube/reflector.js';
import { isRecord, objectKey } from '../kube/types.js';
import { ceilUnits, parseQuantityNanos, QuantityError } from './quantity.js';

/** The projection of a Node kept in the autoscaler's store: three fields, nothing else. */
export interface NodeRecord {
  /** `spec.unschedulable` (cordoned). */
  unschedulable: boolean;
  /** Condition `Ready` is `True`. */
  ready: boolean;
  /** `status.allocatable.cpu` in 10⁻⁹ cores; 0 when absent or unusable. */
  cpuNanos: bigint;
}

export interface ClusterStatus {
  totalNodes: number;
  schedulableNodes: number;
  /** Allocatable CPU summed over the nodes, then rounded up once. */
  totalCores: number;
  schedulableCores: number;
}

/**
 * Node → NodeRecord. A node without a name is malformed (null); a bad `allocatable.cpu` keeps
 * the node (it still counts as a node) with 0 cores, and `warn` says which node and why.
 */
export function projectNode(obj: unknown, warn: (msg: string) => void): Projected<NodeRecord> | null {
  const key = objectKey(obj);
  if (key === null || !isRecord(obj)) return null;
  const spec = isRecord(obj.spec) ? obj.spec : {};
  const status = isRecord(obj.status) ? obj.status : {};
  const conditions = Array.isArray(status.conditions) ? status.conditions : [];
  const ready = conditions.some((c) => isRecord(c) && c.type === 'Ready' && c.status === 'True');
  let cpuNanos = 0n;
  const allocatable = isRecord(status.allocatable) ? status.allocatable : {};
  const cpu = allocatable.cpu;
  if (cpu !== undefined) {
    try {
      if (typeof cpu !== 'string' && typeof cpu !== 'number')
        throw new QuantityError(JSON.stringify(cpu), 'not a string');
      const nanos = parseQuantityNanos(String(cpu));
      if (nanos < 0n) throw new QuantityError(String(cpu), 'negative');
      cpuNanos = nanos;
    } catch (err) {
      cpuNanos = 0n;
      warn(
        `node ${key}: ignoring status.allocatable.cpu: ${err instanceof Error ? err.message : String(err)}; counting 0 cores`,
      );
    }
  }
  return { key, value: { unschedulable: spec.unschedulable === true, ready, cpuNanos } };
}

/** Totals over `nodes`; schedulable = Ready and not unschedulable. */
export function clusterStatus(nodes: Iterable<NodeRecord>): ClusterStatus {
  let totalNodes = 0;
  let schedulableNodes = 0;
  let totalNanos = 0n;
  let schedulableNanos = 0n;
  for (const n of nodes) {
    totalNodes++;
    totalNanos += n.cpuNanos;
    if (n.ready && !n.unschedulable) {
      schedulableNodes++;
      schedulableNanos += n.cpuNanos;
    }
  }
  return {
    totalNodes,
    schedulableNodes,
    totalCores: ceilUnits(totalNanos),
    schedulableCores: ceilUnits(schedulableNanos),
  };
}

/** The node and core counts a controller uses: all nodes, or only the schedulable ones. */
export function countedNodesAndCores(
  status: ClusterStatus,
  includeUnschedulableNodes: boolean,
): { nodes: number; cores: number } {
  return includeUnschedulableNodes
    ? { nodes: status.totalNodes, cores: status.totalCores }
    : { nodes: status.schedulableNodes, cores: status.schedulableCores };
}

export function describeStatus(s: ClusterStatus): string {
  return `nodes ${s.totalNodes} (schedulable ${s.schedulableNodes}), cores ${s.totalCores} (schedulable ${s.schedulableCores})`;
}
