// Linear mode: replicas = max(ceil(cores / coresPerReplica), ceil(nodes / nodesPerReplica)),
// each dimension clamped to [min, max] before the max is taken, and preventSinglePointFailure
// applied to the node dimension after its clamp (so it can exceed max), as CPA computes it.
import { countedNodesAndCores, type ClusterStatus } from './cluster.js';
import { ParamsError, type ParamsObject } from './params-json.js';

export interface LinearParams {
  coresPerReplica: number;
  nodesPerReplica: number;
  /** ≥ 1 (0 in the ConfigMap means 1). */
  min: number;
  /** 0 = unlimited. */
  max: number;
  preventSinglePointFailure: boolean;
  includeUnschedulableNodes: boolean;
}

export function parseLinearParams(p: ParamsObject): LinearParams {
  const params: LinearParams = {
    coresPerReplica: p.number('coresPerReplica'),
    nodesPerReplica: p.number('nodesPerReplica'),
    min: p.int('min'),
    max: p.int('max'),
    preventSinglePointFailure: p.bool('preventSinglePointFailure'),
    includeUnschedulableNodes: p.bool('includeUnschedulableNodes'),
  };
  if (params.min < 0) throw new ParamsError(`invalid negative value for min: ${params.min}`);
  if (params.min === 0) params.min = 1;
  if (params.max < 0) throw new ParamsError(`invalid negative value for max: ${params.max}`);
  if (params.max !== 0 && params.max < params.min) {
    throw new ParamsError(
      `max replicas count ${params.max} should be greater than / equal to min replicas count ${params.min}`,
    );
  }
  if (params.coresPerReplica < 0)
    throw new ParamsError(`invalid negative value for coresPerReplica: ${params.coresPerReplica}`);
  if (params.nodesPerReplica < 0)
    throw new ParamsError(`invalid negative value for nodesPerReplica: ${params.nodesPerReplica}`);
  if (params.coresPerReplica === 0 && params.nodesPerReplica === 0) {
    throw new ParamsError('should at least provide either coresPerReplica or nodesPerReplica (greater than 0)');
  }
  return params;
}

/** One dimension: 1 when its per-replica value is 0, else ceil(count / perReplica) clamped to [min, max]. */
function dimensionReplicas(count: number, perReplica: number, p: LinearParams): number {
  if (perReplica === 0) return 1;
  let replicas = Math.ceil(count / perReplica);
  if (p.max !== 0) replicas = Math.min(p.max, replicas);
  return Math.max(p.min, replicas);
}

export function linearReplicas(p: LinearParams, status: ClusterStatus): number {
  const { nodes, cores } = countedNodesAndCores(status, p.includeUnschedulableNodes);
  const fromCores = dimensionReplicas(cores, p.coresPerReplica, p);
  let fromNodes = dimensionReplicas(nodes, p.nodesPerReplica, p);
  if (p.preventSinglePointFailure && nodes > 1 && fromNodes < 2) fromNodes = 2;
  return Math.max(fromCores, fromNodes);
}
