// Work put off to the end of a native batch callback (answers and upstream queries to send).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { atBatchEnd, enterBatch, leaveBatch } from '../../src/server/batch-end.js';

describe('batch end', () => {
  it('outside a batch nothing is put off; inside, it runs in order when the outermost batch ends', () => {
    const ran: string[] = [];
    assert.equal(
      atBatchEnd(() => ran.push('x')),
      false,
    );
    enterBatch();
    assert.equal(
      atBatchEnd(() => ran.push('a')),
      true,
    );
    enterBatch();
    atBatchEnd(() => {
      ran.push('b');
      // Added while the others run (a retry's query): it runs in the same end.
      atBatchEnd(() => ran.push('c'));
    });
    leaveBatch();
    assert.deepEqual(ran.slice(), []);
    leaveBatch();
    assert.deepEqual(ran.slice(), ['a', 'b', 'c']);
    assert.equal(
      atBatchEnd(() => ran.push('y')),
      false,
    );
  });

  it('one that throws does not keep the others from running; the first error comes out', () => {
    const ran: string[] = [];
    enterBatch();
    atBatchEnd(() => {
      throw new Error('first');
    });
    atBatchEnd(() => ran.push('after'));
    atBatchEnd(() => {
      throw new Error('second');
    });
    assert.throws(() => leaveBatch(), /first/);
    assert.deepEqual(ran.slice(), ['after']);
    // The next batch starts clean.
    enterBatch();
    atBatchEnd(() => ran.push('next'));
    leaveBatch();
    assert.deepEqual(ran.slice(), ['after', 'next']);
  });
});
