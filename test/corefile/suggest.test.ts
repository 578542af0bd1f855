// "did you mean": close typos get the known name, distant words get nothing.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { closestName, didYouMean, editDistance } from '../../src/corefile/suggest.js';

const known = ['whoami', 'forward', 'kubernetes', 'cache', 'hosts', 'health', 'ready', 'reload', 'errors', 'log'];

test('edit distance counts a swap of neighbours as one edit', () => {
  assert.equal(editDistance('forwrad', 'forward'), 1);
  assert.equal(editDistance('kitten', 'sitting'), 3);
  assert.equal(editDistance('', 'log'), 3);
});

test('typos find the directive; unrelated words find nothing', () => {
  assert.equal(closestName('whoam', known), 'whoami');
  assert.equal(closestName('kubernets', known), 'kubernetes');
  assert.equal(closestName('forwrad', known), 'forward');
  assert.equal(closestName('Cache', known), undefined, 'an exact match (any case) is not a typo');
  assert.equal(closestName('proxy', known), undefined);
  assert.equal(closestName('lo', known), 'log');
  assert.equal(didYouMean('helth', known), " (did you mean 'health'?)");
  assert.equal(didYouMean('nosuchplugin', known), '');
});
