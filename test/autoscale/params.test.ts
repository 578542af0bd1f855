// The params ConfigMap: one key, linear or ladder, with CPA's validation; bad params are errors
// that say what is wrong (the control loop then changes nothing).
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { ParamsError, parseScalingParams } from '../../src/autoscale/params.js';

function rejects(data: Record<string, string>, message: RegExp): void {
  assert.throws(
    () => parseScalingParams(data),
    (err: unknown) => {
      assert.ok(err instanceof ParamsError, `expected ParamsError, got ${String(err)}`);
      assert.equal(err.code, 'AUTOSCALE_ERR_PARAMS');
      assert.match(err.message, message);
      return true;
    },
  );
}

describe('ConfigMap shape', () => {
  test('exactly one data key is required', () => {
    rejects({}, /exactly one data key.*found none/);
    rejects({ linear: '{"nodesPerReplica":1}', ladder: '{}' }, /exactly one data key.*"linear", "ladder"/);
  });

  test('the key must be linear or ladder', () => {
    rejects({ Linear: '{"nodesPerReplica":1}' }, /unknown mode "Linear"/);
  });

  test('the value must be a JSON object', () => {
    rejects({ linear: '{nodesPerReplica: 1}' }, /could not parse parameters/);
    rejects({ linear: '[1,2]' }, /must be a JSON object/);
  });
});

describe('linear params validation (CPA rules)', () => {
  test('a valid object parses with defaults filled in', () => {
    const { scaling } = parseScalingParams({ linear: '{"coresPerReplica":256,"nodesPerReplica":16}' });
    assert.deepEqual(scaling, {
      mode: 'linear',
      params: {
        coresPerReplica: 256,
        nodesPerReplica: 16,
        min: 1,
        max: 0,
        preventSinglePointFailure: false,
        includeUnschedulableNodes: false,
      },
    });
  });

  test('negative min, max, coresPerReplica or nodesPerReplica is an error', () => {
    rejects(
      { linear: '{"nodesPerReplica":1,"min":-1}' },
      /error parsing linear params: invalid negative value for min: -1/,
    );
    rejects({ linear: '{"nodesPerReplica":1,"max":-3}' }, /negative value for max/);
    rejects({ linear: '{"coresPerReplica":-2,"nodesPerReplica":1}' }, /negative value for coresPerReplica: -2/);
    rejects({ linear: '{"nodesPerReplica":-0.5}' }, /negative value for nodesPerReplica/);
  });

  test('max below min is an error', () => {
    rejects(
      { linear: '{"nodesPerReplica":1,"min":5,"max":2}' },
      /max replicas count 2 should be greater than \/ equal to min replicas count 5/,
    );
  });

  test('at least one per-replica value must be set', () => {
    rejects({ linear: '{"min":2}' }, /either coresPerReplica or nodesPerReplica/);
    rejects({ linear: 'null' }, /either coresPerReplica or nodesPerReplica/);
  });

  test('wrong types are errors, as in Go: string numbers, float min, string booleans', () => {
    rejects({ linear: '{"nodesPerReplica":"16"}' }, /nodesPerReplica: "16" is not a number/);
    rejects({ linear: '{"nodesPerReplica":1,"min":1.5}' }, /min: 1.5 is not an integer/);
    rejects(
      { linear: '{"nodesPerReplica":1,"preventSinglePointFailure":"true"}' },
      /preventSinglePointFailure: "true" is not true or false/,
    );
  });

  test('keys match case-insensitively and null keeps the default, as Go’s json does', () => {
    const { scaling } = parseScalingParams({ linear: '{"NodesPerReplica":4,"min":null}' });
    assert.equal(scaling.mode, 'linear');
    if (scaling.mode === 'linear') {
      assert.equal(scaling.params.nodesPerReplica, 4);
      assert.equal(scaling.params.min, 1);
    }
  });

  test('unknown keys are ignored but reported', () => {
    const { unknownKeys } = parseScalingParams({ linear: '{"nodesPerReplica":4,"nodesPerReplicas":8}' });
    assert.deepEqual(unknownKeys, ['nodesPerReplicas']);
  });
});

describe('ladder params validation', () => {
  test('entries must be pairs of non-negative integers', () => {
    rejects({ ladder: '{"nodesToReplicas":[[1,2,3]]}' }, /invalid element \[1,2,3\] in nodesToReplicas/);
    rejects({ ladder: '{"coresToReplicas":[[1]]}' }, /invalid element \[1\] in coresToReplicas/);
    rejects({ ladder: '{"coresToReplicas":[[1,-1]]}' }, /invalid negative values in entry \[1,-1\] in coresToReplicas/);
    rejects({ ladder: '{"coresToReplicas":[[1.5,1]]}' }, /must be integers/);
    rejects({ ladder: '{"coresToReplicas":{"1":1}}' }, /coresToReplicas: .* is not a list/);
  });

  test('tables are sorted by threshold', () => {
    const { scaling } = parseScalingParams({ ladder: '{"nodesToReplicas":[[10,3],[1,1],[5,2]]}' });
    assert.equal(scaling.mode, 'ladder');
    if (scaling.mode === 'ladder')
      assert.deepEqual(scaling.params.nodesToReplicas, [
        [1, 1],
        [5, 2],
        [10, 3],
      ]);
  });
});
