// Small copies on the hot path. Buffer#copy builds a Uint8Array view and calls
// TypedArray#set for every call with offsets, which costs more than the copy itself at the
// sizes of a DNS question or a short answer.

/** Longest copy done by a plain loop; a longer one goes through TypedArray#set. */
const LOOP_MAX = 128;

/** Copies src[from, to) into dst at `at`; the caller has checked that it fits. */
export function copyBytes(src: Uint8Array, from: number, to: number, dst: Uint8Array, at: number): void {
  // A whole array: TypedArray#set then makes no view, and copies faster than the loop at any size.
  if (from === 0 && to === src.length) {
    dst.set(src, at);
    return;
  }
  if (to - from > LOOP_MAX) {
    dst.set(src.subarray(from, to), at);
    return;
  }
  for (let i = from; i < to; i++) dst[at++] = src[i]!;
}
