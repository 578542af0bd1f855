// Cluster status as CPA counts it: allocatable CPU summed as exact quantities and rounded up
// once; schedulable = Ready and not cordoned.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { clusterStatus, projectNode, type NodeRecord } from '../../src/autoscale/cluster.js';
import { ceilUnits, parseQuantityNanos, QuantityError } from '../../src/autoscale/quantity.js';
import { nodeObject } from './fixtures.js';

function record(obj: unknown, warnings: string[] = []): NodeRecord {
  const p = projectNode(obj, (m) => warnings.push(m));
  assert.ok(p);
  return p.value;
}

describe('Kubernetes quantities', () => {
  test('decimal, milli, SI, binary and exponent forms', () => {
    const cases: Array<[string, bigint]> = [
      ['4', 4_000_000_000n],
      ['3920m', 3_920_000_000n],
      ['1.5', 1_500_000_000n],
      ['.5', 500_000_000n],
      ['250u', 250_000n],
      ['7n', 7n],
      ['2k', 2_000_000_000_000n],
      ['1Ki', 1_024_000_000_000n],
      ['1e3', 1_000_000_000_000n],
      ['15E-1', 1_500_000_000n],
      ['+1', 1_000_000_000n],
    ];
    for (const [text, nanos] of cases) assert.equal(parseQuantityNanos(text), nanos, text);
  });

  test('sub-nano amounts round up, like Kubernetes', () => {
    assert.equal(parseQuantityNanos('0.0000000001'), 1n);
  });

  test('malformed quantities are errors', () => {
    for (const text of ['', 'abc', '1x', '1.2.3', 'm', '1e', '1e1000', '1 ']) {
      assert.throws(() => parseQuantityNanos(text), QuantityError, text);
    }
  });

  test('whole units round up once: 3 × 3920m = 11.76 → 12', () => {
    assert.equal(ceilUnits(3n * parseQuantityNanos('3920m')), 12);
    assert.equal(ceilUnits(0n), 0);
  });
});

describe('cluster status from nodes', () => {
  test('cores are summed over nodes before rounding up', () => {
    const nodes = ['a', 'b', 'c'].map((n) => record(nodeObject(n, '3920m')));
    assert.deepEqual(clusterStatus(nodes), {
      totalNodes: 3,
      schedulableNodes: 3,
      totalCores: 12,
      schedulableCores: 12,
    });
  });

  test('cordoned and NotReady nodes count only in the totals', () => {
    const nodes = [
      record(nodeObject('ready', '4')),
      record(nodeObject('cordoned', '8', { unschedulable: true })),
      record(nodeObject('notready', '16', { ready: false })),
      record({ metadata: { name: 'no-conditions' }, status: { allocatable: { cpu: '2' } } }),
    ];
    assert.deepEqual(clusterStatus(nodes), { totalNodes: 4, schedulableNodes: 1, totalCores: 30, schedulableCores: 4 });
  });

  test('a node with unusable allocatable CPU still counts as a node, with 0 cores and a warning naming it', () => {
    const warnings: string[] = [];
    const r = record(nodeObject('weird', 'lots'), warnings);
    assert.deepEqual(r, { unschedulable: false, ready: true, cpuNanos: 0n });
    assert.match(warnings[0] ?? '', /node weird: ignoring status.allocatable.cpu: quantity "lots"/);
    assert.equal(record(nodeObject('negative', '-2'), warnings).cpuNanos, 0n);
    assert.equal(record(nodeObject('nocpu', undefined), warnings).cpuNanos, 0n);
  });

  test('a node without a name is malformed', () => {
    assert.equal(
      projectNode({ metadata: {} }, () => {}),
      null,
    );
  });
});
