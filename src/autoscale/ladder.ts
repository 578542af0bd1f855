// Ladder mode: step tables [threshold, replicas] for cores and for nodes. Each dimension takes
// the step with the largest threshold ≤ its count (the first step when below all of them; 0
// for an empty table); the result is the larger of the two. 0 replicas is allowed.
import { countedNodesAndCores, type ClusterStatus } from './cluster.js';
import { ParamsError, type ParamsObject } from './params-json.js';

export type LadderStep = readonly [threshold: number, replicas: number];

export interface LadderParams {
  /** Sorted by threshold. */
  coresToReplicas: readonly LadderStep[];
  nodesToReplicas: readonly LadderStep[];
  includeUnschedulableNodes: boolean;
}

function steps(p: ParamsObject, field: string): LadderStep[] {
  const pairs = p.intPairs(field);
  for (const [threshold, replicas] of pairs) {
    if (threshold < 0 || replicas < 0)
      throw new ParamsError(`invalid negative values in entry [${threshold},${replicas}] in ${field}`);
  }
  return pairs.sort((a, b) => a[0] - b[0]);
}

export function parseLadderParams(p: ParamsObject): LadderParams {
  return {
    coresToReplicas: steps(p, 'coresToReplicas'),
    nodesToReplicas: steps(p, 'nodesToReplicas'),
    includeUnschedulableNodes: p.bool('includeUnschedulableNodes'),
  };
}

/** The replicas of the last step whose threshold is ≤ count; the first step's when count is below them all. */
export function stepReplicas(count: number, table: readonly LadderStep[]): number {
  if (table.length === 0) return 0;
  let lo = 0;
  let hi = table.length; // first index whose threshold > count
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((table[mid]?.[0] ?? 0) > count) hi = mid;
    else lo = mid + 1;
  }
  return table[Math.max(0, lo - 1)]?.[1] ?? 0;
}

export function ladderReplicas(p: LadderParams, status: ClusterStatus): number {
  const { nodes, cores } = countedNodesAndCores(status, p.includeUnschedulableNodes);
  return Math.max(stepReplicas(cores, p.coresToReplicas), stepReplicas(nodes, p.nodesToReplicas));
}
