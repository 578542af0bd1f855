// A coarse monotonic clock for the hit path: reading a property is far cheaper than a
// Date.now() call per lookup (see README). performance.now() is
// monotonic, so a wall-clock step (NTP, suspend) never ages or revives entries.

import { performance } from 'node:perf_hooks';

/** How often the clock advances; TTL arithmetic is in whole seconds, so 100 ms is plenty. */
export const CLOCK_TICK_MS = 100;

/** Milliseconds on a monotonic scale; read `clock.ms`, never cache it across awaits. */
export const clock = { ms: performance.now() };

let timer: NodeJS.Timeout | null = null;
let users = 0;
let frozen = false;

function tick(): void {
  if (!frozen) clock.ms = performance.now();
}

/** Starts the shared ticker (reference counted, unref'd so it never holds the process open). */
export function retainClock(): void {
  users++;
  if (timer === null) {
    tick();
    timer = setInterval(tick, CLOCK_TICK_MS);
    timer.unref();
  }
}

export function releaseClock(): void {
  if (users > 0) users--;
  if (users === 0 && timer !== null) {
    clearInterval(timer);
    timer = null;
  }
}

/** Tests: stop the clock at `ms` (or now); `advanceClock` then moves it by hand. */
export function freezeClock(ms: number = performance.now()): void {
  frozen = true;
  clock.ms = ms;
}

export function advanceClock(byMs: number): void {
  clock.ms += byMs;
}
