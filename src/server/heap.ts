// One memory-reducing collection, started when clusterdns knows there is garbage in bulk.
//
// A cluster list (the first sync, a relist, a re-read manifests file) leaves megabytes of parsed
// JSON and replaced records in the old generation, and V8 frees them only at its next full
// collection. V8's memory reducer would start one when the process looks idle, but a server
// under load never does, so the reducer's watchdog started it ~100 s later, in the middle of
// serving (BENCHMARKS.md, issue 23 point 3). The launcher turns the reducer off
// (--no-memory-reducer, README "Node flags") and the server asks for the same collection
// itself: V8's moderate memory-pressure notification, an incremental mark-compact that
// shrinks the heap, run a second after the list is in (calls within that second share it).
// Node has no JavaScript call for it, so the native addon makes it (native/heap.cc); without
// the addon the garbage waits for V8's next full collection.

import { requireNativeAddon } from './udp-native.js';

/** How long after a bulk load the collection starts: lists of several kinds arrive together. */
const SETTLE_DELAY_MS = 1000;

// Process-wide on purpose: there is one heap per process, whatever servers or reloads share it,
// and a request from any of them starts the one collection.
let timer: NodeJS.Timeout | null = null;

/** Asks for one memory-reducing collection a second from now. */
export function settleHeapSoon(): void {
  if (timer !== null) return;
  timer = setTimeout(() => {
    timer = null;
    const r = requireNativeAddon();
    if ('module' in r && typeof r.module.memoryPressure === 'function') r.module.memoryPressure(1);
  }, SETTLE_DELAY_MS);
  timer.unref();
}
