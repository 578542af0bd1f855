// cluster-proportional-autoscaler's arithmetic, checked against the upstream project's vectors
// (its linear and ladder controller tests) and its edge cases.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { ClusterStatus } from '../../src/autoscale/cluster.js';
import { stepReplicas } from '../../src/autoscale/ladder.js';
import { defaultParamsData, expectedReplicas, parseScalingParams } from '../../src/autoscale/params.js';

/** Replicas for params JSON `{"MODE": ...}` on a cluster status. */
function replicasFor(params: Record<string, unknown>, status: ClusterStatus): number {
  const data: Record<string, string> = {};
  for (const [k, v] of Object.entries(params)) data[k] = JSON.stringify(v);
  return expectedReplicas(parseScalingParams(data).scaling, status);
}

/** Every node schedulable: totals and schedulable counts agree. */
const all = (nodes: number, cores: number): ClusterStatus => ({
  totalNodes: nodes,
  schedulableNodes: nodes,
  totalCores: cores,
  schedulableCores: cores,
});

const ADDON_DEFAULTS = {
  linear: {
    coresPerReplica: 256,
    nodesPerReplica: 16,
    preventSinglePointFailure: true,
    includeUnschedulableNodes: true,
  },
};

describe('linear mode: the kube-dns addon defaults give the upstream test vectors', () => {
  // [#, nodes, cores, replicas] as upstream's linear controller tests give them
  const vectors: Array<[number, number, number, number]> = [
    [1, 0, 0, 1],
    [2, 1, 2, 1],
    [3, 1, 512, 2],
    [4, 2, 4, 2],
    [5, 4, 13, 2],
    [6, 16, 64, 2],
    [7, 17, 68, 2],
    [8, 10, 1000, 4],
    [9, 3, 2048, 8],
    [10, 33, 257, 3],
    [11, 100, 400, 7],
    [12, 160, 2560, 10],
    [13, 1000, 4000, 63],
    [14, 5000, 80000, 313],
  ];
  for (const [n, nodes, cores, want] of vectors) {
    test(`vector ${n}: ${nodes} nodes, ${cores} cores → ${want} replicas`, () => {
      assert.equal(replicasFor(ADDON_DEFAULTS, all(nodes, cores)), want);
    });
  }
});

describe('linear mode: clamping, preventSinglePointFailure and includeUnschedulableNodes', () => {
  test('preventSinglePointFailure is applied after the clamp, so it beats max: max 1, 5 nodes, 10 cores → 2', () => {
    assert.equal(replicasFor({ linear: { ...ADDON_DEFAULTS.linear, max: 1 } }, all(5, 10)), 2);
  });

  test('README example: cpr 2, npr 1, min 1, max 100, PSPF; 4 nodes and 13 cores → max(7, 4) = 7', () => {
    assert.equal(
      replicasFor(
        { linear: { coresPerReplica: 2, nodesPerReplica: 1, min: 1, max: 100, preventSinglePointFailure: true } },
        all(4, 13),
      ),
      7,
    );
  });

  test('each dimension is clamped to [min, max] before the larger is taken', () => {
    const p = { linear: { coresPerReplica: 1, nodesPerReplica: 1, min: 3, max: 5 } };
    assert.equal(replicasFor(p, all(1, 1)), 3, 'both below min → min');
    assert.equal(replicasFor(p, all(2, 100)), 5, 'cores above max → max');
    assert.equal(replicasFor(p, all(4, 0)), 4);
  });

  test('min 0 means 1; max 0 means unlimited', () => {
    assert.equal(replicasFor({ linear: { nodesPerReplica: 1, min: 0, max: 0 } }, all(0, 0)), 1);
    assert.equal(replicasFor({ linear: { nodesPerReplica: 1 } }, all(1000, 0)), 1000);
  });

  test('a per-replica value of 0 makes that dimension 1 (not min)', () => {
    // coresPerReplica 0 → core dimension 1 even with min 4; nodes 8/2 = 4 → 4
    assert.equal(replicasFor({ linear: { nodesPerReplica: 2, min: 4 } }, all(8, 1000)), 4);
    assert.equal(replicasFor({ linear: { coresPerReplica: 10 } }, all(100, 5)), 1);
  });

  test('fractional per-replica values divide as floats and round up', () => {
    assert.equal(replicasFor({ linear: { coresPerReplica: 0.5 } }, all(1, 3)), 6);
    assert.equal(replicasFor({ linear: { nodesPerReplica: 2.5 } }, all(6, 0)), 3);
  });

  test('preventSinglePointFailure needs more than one node', () => {
    const p = { linear: { nodesPerReplica: 16, preventSinglePointFailure: true } };
    assert.equal(replicasFor(p, all(1, 64)), 1);
    assert.equal(replicasFor(p, all(2, 64)), 2);
    assert.equal(replicasFor({ linear: { nodesPerReplica: 16 } }, all(2, 64)), 1, 'off by default');
  });

  test('without includeUnschedulableNodes only Ready, schedulable nodes and their cores count', () => {
    const status: ClusterStatus = { totalNodes: 40, schedulableNodes: 10, totalCores: 400, schedulableCores: 100 };
    assert.equal(replicasFor({ linear: { nodesPerReplica: 4 } }, status), 3);
    assert.equal(replicasFor({ linear: { nodesPerReplica: 4, includeUnschedulableNodes: true } }, status), 10);
    assert.equal(replicasFor({ linear: { coresPerReplica: 10 } }, status), 10);
    assert.equal(replicasFor({ linear: { coresPerReplica: 10, includeUnschedulableNodes: true } }, status), 40);
    // PSPF looks at the counted nodes: one schedulable node of many → no raise
    const oneSchedulable: ClusterStatus = { totalNodes: 5, schedulableNodes: 1, totalCores: 10, schedulableCores: 2 };
    assert.equal(replicasFor({ linear: { nodesPerReplica: 16, preventSinglePointFailure: true } }, oneSchedulable), 1);
  });
});

describe('ladder mode: the upstream README tables', () => {
  const README = {
    ladder: {
      coresToReplicas: [
        [1, 1],
        [64, 3],
        [512, 5],
        [1024, 7],
        [2048, 10],
        [4096, 15],
      ],
      nodesToReplicas: [
        [1, 1],
        [2, 2],
      ],
    },
  };
  const vectors: Array<[number, number, number]> = [
    [0, 0, 1],
    [1, 63, 1],
    [1, 64, 3],
    [3, 5000, 15],
    [2, 1, 2],
    [100, 400, 3],
  ];
  for (const [nodes, cores, want] of vectors) {
    test(`${nodes} nodes, ${cores} cores → ${want} replicas`, () => {
      assert.equal(replicasFor(README, all(nodes, cores)), want);
    });
  }

  test('a value below the first step gives the first step’s replicas, not 0', () => {
    assert.equal(
      stepReplicas(3, [
        [5, 4],
        [10, 6],
      ]),
      4,
    );
  });

  test('thresholds are inclusive and tables are sorted before lookup', () => {
    assert.equal(
      replicasFor(
        {
          ladder: {
            nodesToReplicas: [
              [10, 6],
              [0, 1],
              [5, 4],
            ],
          },
        },
        all(5, 0),
      ),
      4,
    );
    assert.equal(
      replicasFor(
        {
          ladder: {
            nodesToReplicas: [
              [10, 6],
              [0, 1],
              [5, 4],
            ],
          },
        },
        all(9, 0),
      ),
      4,
    );
    assert.equal(
      replicasFor(
        {
          ladder: {
            nodesToReplicas: [
              [10, 6],
              [0, 1],
              [5, 4],
            ],
          },
        },
        all(10, 0),
      ),
      6,
    );
  });

  test('0 replicas is allowed: a component enabled only from 6 nodes', () => {
    const p = {
      ladder: {
        nodesToReplicas: [
          [0, 0],
          [6, 1],
        ],
      },
    };
    assert.equal(replicasFor(p, all(5, 100)), 0);
    assert.equal(replicasFor(p, all(6, 100)), 1);
  });

  test('an absent or empty table contributes 0', () => {
    assert.equal(replicasFor({ ladder: { coresToReplicas: [[1, 2]] } }, all(50, 1)), 2);
    assert.equal(replicasFor({ ladder: { coresToReplicas: [], nodesToReplicas: [[1, 3]] } }, all(1, 9999)), 3);
  });

  test('includeUnschedulableNodes switches the ladder to total counts', () => {
    const status: ClusterStatus = { totalNodes: 10, schedulableNodes: 2, totalCores: 0, schedulableCores: 0 };
    const table = [
      [1, 1],
      [5, 5],
      [10, 10],
    ];
    assert.equal(replicasFor({ ladder: { nodesToReplicas: table } }, status), 1);
    assert.equal(replicasFor({ ladder: { nodesToReplicas: table, includeUnschedulableNodes: true } }, status), 10);
  });
});

describe('--default-params become ConfigMap data the way CPA stores them', () => {
  test('each top-level key holds its value as compact JSON with sorted keys', () => {
    assert.deepEqual(
      defaultParamsData('{"linear":{"nodesPerReplica":16,"coresPerReplica":256,"preventSinglePointFailure":true}}'),
      { linear: '{"coresPerReplica":256,"nodesPerReplica":16,"preventSinglePointFailure":true}' },
    );
  });
});
