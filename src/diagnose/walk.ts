// The search walk of glibc's __res_context_search over the planned candidates:
// - the first answer ends the lookup;
// - in the search list, NXDOMAIN, NODATA and SERVFAIL go on to the next domain (glibc: "a
//   wildcard entry of another type could keep us from finding this entry higher up", and
//   SERVFAIL "try next search element");
// - any other failure (timeout, REFUSED, FORMERR...) stops the search list, but the name as
//   it is is still tried if it has not been ("in case it's fully-qualified");
// - "connection refused" from every server stops everything at once.
// The application's error is the h_errno glibc is left with: the as-is query's when it went
// first, else NO_DATA if any domain had the name, else TRY_AGAIN if any SERVFAIL'd, else
// the last query's.

import { performance } from 'node:perf_hooks';
import type { Candidate, CandidatePlan } from '../dns/search.js';
import { lookupCandidate, type CandidateOutcome, type CandidateResult, type LookupSettings } from './lookup.js';

export interface WalkStep {
  candidate: Candidate;
  /** null: not sent, see `skipped`. */
  result: CandidateResult | null;
  /** Why the resolver does not send this one. */
  skipped?: string;
  /** What the resolver does after this step, in words. */
  then?: string;
  elapsedMs: number;
}

export interface WalkResult {
  steps: WalkStep[];
  /** The step whose answer the application gets, when one answered. */
  answeredBy: WalkStep | null;
  /** The outcome the application sees (glibc's final h_errno), `answered` when resolved. */
  final: CandidateOutcome;
  /** The step whose outcome became `final`. */
  decidedBy: WalkStep | null;
  durationMs: number;
}

const CONTINUES: ReadonlySet<CandidateOutcome> = new Set(['nxdomain', 'nodata', 'servfail']);

export async function walkCandidates(
  plan: CandidatePlan,
  qtypes: number[],
  settings: LookupSettings,
  timeoutFloorMs = 1000,
): Promise<WalkResult> {
  const started = performance.now();
  const steps: WalkStep[] = plan.candidates.map((candidate) => ({ candidate, result: null, elapsedMs: 0 }));
  let asIsFirst: WalkStep | null = null;
  let firstNodata: WalkStep | null = null;
  let firstServfail: WalkStep | null = null;
  let last: WalkStep | null = null;
  let stopSearch: string | null = null;
  let stopAll: string | null = null;

  for (const step of steps) {
    const c = step.candidate;
    if (stopAll !== null) {
      step.skipped = stopAll;
      continue;
    }
    if (c.phase === 'search' && stopSearch !== null) {
      step.skipped = stopSearch;
      continue;
    }
    const t0 = performance.now();
    const result: CandidateResult = c.invalid
      ? { outcome: 'invalid', types: [], partialLoss: false }
      : await lookupCandidate(c.name, qtypes, settings, timeoutFloorMs);
    step.result = result;
    step.elapsedMs = performance.now() - t0;
    last = step;
    const o = result.outcome;
    if (o === 'answered') {
      const records = result.types.some((t) => t.reply?.answers.some((rr) => qtypes.includes(rr.type)));
      step.then = records
        ? 'answered: the resolver stops here and returns these addresses'
        : 'answered with only a CNAME: the resolver stops here, with no address for the application';
      return finish(steps, step, 'answered', step, started);
    }
    if (c.phase === 'as-is-first') {
      asIsFirst = step;
      if (plan.trailingDot) {
        step.then = 'absolute name: nothing else is tried';
        break;
      }
      step.then = `${outcomeText(o)}: the resolver goes on with the search list`;
      continue;
    }
    if (c.phase === 'search') {
      if (o === 'unreachable') {
        step.then = 'connection refused by every nameserver: the resolver gives up at once (TRY_AGAIN)';
        stopAll = 'not asked: the resolver gave up after "connection refused"';
        continue;
      }
      if (o === 'nodata') firstNodata ??= step;
      if (o === 'servfail') firstServfail ??= step;
      if (CONTINUES.has(o)) {
        step.then = `${outcomeText(o)}: the resolver goes on with the next name`;
        continue;
      }
      step.then = `${outcomeText(o)}: the resolver stops walking the search list`;
      stopSearch = `not asked: the search list was abandoned after a ${outcomeText(o)}`;
      continue;
    }
    step.then = `${outcomeText(o)}: this was the last name to try`;
  }

  // glibc's final h_errno when nothing answered.
  const decidedBy = asIsFirst ?? firstNodata ?? firstServfail ?? last;
  const final: CandidateOutcome = asIsFirst
    ? asIsFirst.result!.outcome
    : firstNodata
      ? 'nodata'
      : firstServfail
        ? 'servfail'
        : (last?.result?.outcome ?? 'error');
  return finish(steps, null, final, decidedBy, started);
}

function finish(
  steps: WalkStep[],
  answeredBy: WalkStep | null,
  final: CandidateOutcome,
  decidedBy: WalkStep | null,
  started: number,
): WalkResult {
  if (answeredBy) {
    let after = false;
    for (const s of steps) {
      if (s === answeredBy) after = true;
      else if (after && !s.result && !s.skipped) s.skipped = 'not asked: an earlier name was answered';
    }
  }
  return { steps, answeredBy, final, decidedBy, durationMs: performance.now() - started };
}

export function outcomeText(o: CandidateOutcome): string {
  switch (o) {
    case 'answered':
      return 'answered';
    case 'nxdomain':
      return 'NXDOMAIN (no such name)';
    case 'nodata':
      return 'NODATA (the name exists, without records of this type)';
    case 'servfail':
      return 'SERVFAIL';
    case 'rejected':
      return 'refusal (REFUSED, NOTIMP or FORMERR)';
    case 'timeout':
      return 'timeout';
    case 'unreachable':
      return 'connection refused';
    case 'invalid':
      return 'name that cannot be asked for (too long or an empty label)';
    case 'error':
      return 'network error';
  }
}
