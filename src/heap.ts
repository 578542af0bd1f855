// One full garbage collection after a burst of allocation that leaves little behind: a LIST
// of the whole cluster (pages of JSON parsed, projected to small records, dropped), a
// snapshot relayed to a worker, start-up. V8 keeps the heap it grew to for the burst until
// enough new allocation triggers a major collection, which an idle DNS server may not do
// for hours; with 10,000 objects that is 20–30 MB of resident garbage. A collection of a
// heap of small records takes a few milliseconds per 10 MB, once.

import v8 from 'node:v8';
import vm from 'node:vm';

let gc: (() => void) | null | undefined;
/** Heap size from which the collection after a burst also compacts. */
const COMPACT_ABOVE = 32 << 20;
let timer: NodeJS.Timeout | null = null;

/** V8's gc(), without --expose-gc on the command line (and without defining a global). */
function gcFunction(): (() => void) | null {
  if (gc !== undefined) return gc;
  try {
    const g = (globalThis as { gc?: () => void }).gc;
    if (typeof g === 'function') gc = g;
    else {
      v8.setFlagsFromString('--expose-gc');
      // A fresh context is created with the flag on; its gc() collects the whole isolate.
      gc = vm.runInNewContext('gc') as () => void;
    }
  } catch {
    gc = null;
  }
  return gc;
}

function setFlag(flag: string): void {
  try {
    v8.setFlagsFromString(flag);
  } catch {
    // A V8 without the flag: the collection still runs, without the extra compaction.
  }
}

/**
 * Collects garbage once the burst is over: `delayMs` after the last call (calls in between
 * push it back, so four reflectors finishing their lists give one collection).
 */
export function collectAfterBurst(delayMs = 200): void {
  if (timer !== null) {
    timer.refresh();
    return;
  }
  timer = setTimeout(() => {
    timer = null;
    const gc = gcFunction();
    if (gc === null) return;
    // The first collection finds the garbage; the pages it emptied are given back to the
    // system by the second (measured: one leaves RSS where it was, two take 40 MB of
    // garbage down to what is live). In a big heap, compacting every page, for these two
    // only, also moves the records out of pages the burst left mostly empty: 4 MB less
    // RSS with 10,000 objects, 11 MB with 100,000. In a small one it gains little and the
    // copying raises the peak (+9 MB with 1,000 objects), so it is left out.
    const compact = v8.getHeapStatistics().total_heap_size >= COMPACT_ABOVE;
    if (compact) setFlag('--compact-on-every-full-gc');
    try {
      gc();
      gc();
    } finally {
      if (compact) setFlag('--no-compact-on-every-full-gc');
    }
    smallHeapWhenQuiet();
  }, delayMs);
  timer.unref();
}

// ---------------------------------------------------------------- small-heap mode while serving
//
// Serving, V8's memory-saving heap sizing (--optimize-for-size, switched on at run time) lets
// the old generation grow 2 MB past what is live before a major collection instead of 8 MB or
// more: RSS under steady load saws within about 3 MB instead of 10 (cache hits for 4 minutes:
// 64–67 MB against 66–77 MB) with no cost per query (same interleaved run, one core each:
// cache 141k against 128k QPS, kubernetes 142k against 138k; CPU per query 5.5 against 6.4 µs
// and 5.1 against 5.5 µs). During a LIST it is off: with it, starting with 100,000 objects took
// 15.0 s to ready instead of 8.3 s. So: on once the process serves and no list is running
// (after that list's collection), off while one runs. CLUSTERDNS_SMALL_HEAP=0 never turns it on.

let serving = false;
let listsRunning = 0;
let smallHeap = false;
const smallHeapAllowed = process.env.CLUSTERDNS_SMALL_HEAP !== '0';

function smallHeapWhenQuiet(): void {
  if (!smallHeapAllowed || smallHeap || !serving || listsRunning > 0 || timer !== null) return;
  smallHeap = true;
  setFlag('--optimize-for-size');
}

/** The process answers queries now (called once start-up is done). */
export function servingStarted(): void {
  serving = true;
  smallHeapWhenQuiet();
}

/** A LIST (a burst of allocation) begins: full-speed heap sizing until it ends. */
export function listBegins(): void {
  listsRunning++;
  if (smallHeap) {
    smallHeap = false;
    setFlag('--no-optimize-for-size');
  }
}

/** The LIST that `listBegins` announced ended (completed or failed). */
export function listEnds(): void {
  listsRunning = Math.max(0, listsRunning - 1);
  smallHeapWhenQuiet();
}

/** For tests and the status page: whether the small-heap mode is on. */
export function smallHeapOn(): boolean {
  return smallHeap;
}
