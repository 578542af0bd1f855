// copyBytes, the hot path's copy: whole arrays, short ranges (the loop) and long ranges, into
// Buffers and plain Uint8Arrays, at offsets, without touching what lies around the target.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { copyBytes } from '../../src/dns/bytes.js';

function pattern(n: number, seed: number): Buffer {
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = (i * 31 + seed) & 0xff;
  return b;
}

describe('copyBytes', () => {
  const cases: Array<[string, number, number, number]> = [
    ['a whole short array', 0, 60, 60],
    ['a whole long array', 0, 300, 300],
    ['a short range', 7, 50, 60],
    ['a short range ending at the end', 10, 60, 60],
    ['a long range', 3, 290, 300],
    ['an empty range', 5, 5, 60],
    ['a whole empty array', 0, 0, 0],
  ];
  for (const [what, from, to, size] of cases) {
    for (const kind of ['Buffer', 'Uint8Array'] as const) {
      test(`${what} into a ${kind} at an offset`, () => {
        const src = pattern(size, 3);
        const dst = kind === 'Buffer' ? Buffer.alloc(size + 20, 0xee) : new Uint8Array(size + 20).fill(0xee);
        copyBytes(src, from, to, dst, 9);
        const want = Buffer.alloc(size + 20, 0xee);
        src.copy(want, 9, from, to);
        assert.deepEqual(Buffer.from(dst), want);
      });
    }
  }

  test('a view into a larger buffer copies only its own bytes', () => {
    const big = pattern(200, 5);
    const view = big.subarray(40, 90);
    const dst = Buffer.alloc(60, 0);
    copyBytes(view, 0, view.length, dst, 5);
    assert.deepEqual(dst.subarray(5, 55), big.subarray(40, 90));
    assert.equal(dst[4], 0);
    assert.equal(dst[55], 0);
  });
});
