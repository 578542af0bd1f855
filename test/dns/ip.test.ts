// Address text helpers shared by the plugins that look at the client's address.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { unmappedIP } from '../../src/dns/ip.js';

test('an IPv4-mapped IPv6 client address is its IPv4 address; other addresses stay as they are', () => {
  assert.equal(unmappedIP('::ffff:10.1.2.3'), '10.1.2.3');
  assert.equal(unmappedIP('10.1.2.3'), '10.1.2.3');
  assert.equal(unmappedIP('::ffff:a01:203'), '::ffff:a01:203');
  assert.equal(unmappedIP('fd00::ffff:1'), 'fd00::ffff:1');
  assert.equal(unmappedIP('::1'), '::1');
});
