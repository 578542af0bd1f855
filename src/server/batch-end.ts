// Work gathered while a native socket's batch callback runs (answers to send, upstream queries to
// send), done when the callback returns instead of in a microtask per turn: at a fixed query rate
// most turns carry one query, and a microtask costs a Promise reaction each time.

let depth = 0;
/** The first `count` are due; not shrunk (emptied slot by slot), so not regrown per batch. */
const pending: Array<(() => void) | null> = [];
let count = 0;

/** A native batch callback starts. */
export function enterBatch(): void {
  depth++;
}

/** It ends: what was put off runs now, in the order it was asked for (more may be added meanwhile). */
export function leaveBatch(): void {
  if (depth !== 1) {
    depth--;
    return;
  }
  // One that throws does not keep the others (and their owners' queued flags) waiting.
  let failed = false;
  let error: unknown = null;
  for (let i = 0; i < count; i++) {
    const f = pending[i]!;
    pending[i] = null;
    try {
      f();
    } catch (e) {
      if (!failed) error = e;
      failed = true;
    }
  }
  count = 0;
  depth = 0;
  if (failed) throw error;
}

/** Runs `f` when the batch callback running now returns; false outside one (the caller makes its own microtask). */
export function atBatchEnd(f: () => void): boolean {
  if (depth === 0) return false;
  pending[count++] = f;
  return true;
}
