// The shared log helpers every role and plugin uses.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { warnEachOnce } from '../src/log.js';
import { memoryLog } from './connect/memory-log.js';

test('warnEachOnce says each distinct warning once, and still says new ones after 10,000 distinct lines', () => {
  const log = memoryLog();
  const warn = warnEachOnce(log);
  warn('Service default/a', 'clusterIP "x" is not an IP address; skipped');
  warn('Service default/a', 'clusterIP "x" is not an IP address; skipped');
  assert.deepEqual(log.lines, ['[WARNING] Service default/a: clusterIP "x" is not an IP address; skipped']);
  for (let i = 0; i < 10_000; i++) warn(`Service default/s${i}`, 'bad');
  warn('Service default/late', 'bad');
  assert.equal(log.lines.at(-1), '[WARNING] Service default/late: bad');
  assert.equal(log.lines.length, 10_002);
});
