// The latency bench's --trace-returns (issue 23 point 3): a serving thread's stalls between a
// wakeup's return and its next system call, read from `perf script` (bench/lib/return-stalls.mjs),
// and the DAMON line of its report.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
const load = (p: string): Promise<any> => import(pathToFileURL(resolve(p)).href);

// `perf script --ns -F time,event,trace` lines, as perf prints them.
const exit = (t: string, nr: number, ret: number) => `  ${t}:        raw_syscalls:sys_exit: NR ${nr} = ${ret}`;
const enter = (t: string, nr: number) => ` ${t}:       raw_syscalls:sys_enter: NR ${nr} (11, 3fe68a20, 40, 40, 0, 0)`;
const sw = (t: string, state: string) =>
  `  ${t}:           sched:sched_switch: prev_comm=node prev_pid=7554 prev_prio=120 prev_state=${state} ==> next_comm=perf next_pid=6898 next_prio=120`;

test('return stalls: a gap after a wakeup with no context switch counts; preemption, timeouts and short gaps do not', async () => {
  const { parseReturnStalls } = await load('bench/lib/return-stalls.mjs');
  const text = [
    // 1: epoll_pwait returns 1 event, recvmmsg 1.2 ms later: a stall.
    enter('2531.571000000', 281),
    exit('2531.572254000', 281, 1),
    enter('2531.573454000', 299),
    exit('2531.573450000', 299, 25),
    // Short: 5 µs to recvmmsg.
    enter('2531.600000000', 232),
    exit('2531.601000000', 232, 1),
    enter('2531.601005000', 299),
    // Preempted after the wakeup: core wait, not a return stall.
    enter('2531.700000000', 281),
    exit('2531.701000000', 281, 1),
    sw('2531.701010000', 'R'),
    enter('2531.703000000', 299),
    // A timeout (0 events) followed by a long gap: the thread ran timers, not a wakeup.
    enter('2531.800000000', 281),
    exit('2531.800100000', 281, 0),
    enter('2531.802000000', 281),
    // 2: poll (7) returning events, 0.5 ms to the next call, 0.5 s after the first.
    exit('2532.072254000', 7, 2),
    enter('2532.072754000', 47),
    '',
    'garbage line',
  ].join('\n');
  const { stalls, summary } = parseReturnStalls(text);
  assert.deepEqual(
    stalls.map(([a, b]: [number, number]) => [a, b]),
    [
      [2531.572254e9, 2531.573454e9],
      [2532.072254e9, 2532.072754e9],
    ],
  );
  assert.equal(summary.count, 2);
  assert.equal(summary.wakeups, 4);
  assert.equal(summary.maxMs, 1.2);
  assert.equal(summary.p50Ms, 1.2);
  assert.equal(summary.spacingS, 0.5);
  assert.equal(summary.seconds, 0.5);
  assert.equal(summary.perSecond, 3.99); // 2 over the 0.502 s from the first event to the last
  // A higher threshold keeps only the first.
  assert.equal(parseReturnStalls(text, { minMs: 1 }).summary.count, 1);
  assert.deepEqual(parseReturnStalls('').summary, {
    wakeups: 0,
    seconds: 0,
    count: 0,
    perSecond: 0,
    p50Ms: null,
    maxMs: null,
    spacingS: null,
  });
});

test('return stalls: the report names each running DAMON monitor, or says there is none', async () => {
  const { damonLine } = await load('bench/lib/return-stalls.mjs');
  assert.equal(damonLine([]), 'no DAMON');
  const on = { index: 0, state: 'on', operations: 'paddr', sampleUs: 500000, aggrUs: 5000000, actions: ['pageout'] };
  assert.equal(damonLine([on]), 'DAMON kdamond.0 on (paddr, sample 500 ms, aggregate 5000 ms, schemes: pageout)');
  assert.equal(damonLine([{ ...on, state: 'off' }]), 'DAMON present, off');
  assert.equal(damonLine([{ ...on, state: null }]), 'DAMON present, its state unreadable (not root)');
});
