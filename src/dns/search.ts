// The names glibc's res_search (resolv/res_query.c, __res_context_search) asks for, in its
// order: a trailing dot means only the name itself; ndots or more dots mean the name as it
// is first and then the search list; fewer dots mean the search list first and the bare
// name last. Which of them are actually sent depends on the answers (see walk.ts).

import { nameToLabels, NameError } from './name.js';

export type CandidatePhase = 'as-is-first' | 'search' | 'as-is-last';

export interface Candidate {
  /** Fully qualified, with the trailing dot: what goes into the question. */
  name: string;
  phase: CandidatePhase;
  /** 0-based position in the search list, for phase `search`. */
  searchIndex?: number;
  /** Why the resolver asks for this name, in words. */
  reason: string;
  /** Set when the name cannot be put in a query (empty label, longer than 255 octets). */
  invalid?: string;
}

export interface CandidatePlan {
  /** The name as typed. */
  input: string;
  dots: number;
  trailingDot: boolean;
  ndots: number;
  candidates: Candidate[];
  /** One sentence: which rule applies and why. */
  rule: string;
}

export interface SearchSettings {
  search: readonly string[];
  ndots: number;
  noTldQuery: boolean;
}

/** Lists the candidates for `input` in the order glibc tries them. */
export function planCandidates(input: string, s: SearchSettings): CandidatePlan {
  let dots = 0;
  for (let i = 0; i < input.length; i++) if (input.charCodeAt(i) === 0x2e) dots++;
  const trailingDot = input.length > 1 && input.endsWith('.');
  const asIs = trailingDot ? input : `${input}.`;
  const candidates: Candidate[] = [];
  const plural = (n: number, w: string) => `${n} ${w}${n === 1 ? '' : 's'}`;

  let triedAsIs = false;
  let rule: string;
  if (trailingDot) {
    rule = `"${input}" ends with a dot: it is absolute, so only that name is asked for`;
    candidates.push(candidate(asIs, 'as-is-first', 'absolute name (trailing dot): the search list is not used'));
    return { input, dots, trailingDot, ndots: s.ndots, candidates, rule };
  }
  if (dots >= s.ndots) {
    rule = `"${input}" has ${plural(dots, 'dot')}, not fewer than ndots:${s.ndots}: the name is tried as it is first, then the search list`;
    candidates.push(
      candidate(asIs, 'as-is-first', `${plural(dots, 'dot')} >= ndots:${s.ndots}: asked for as it is first`),
    );
    triedAsIs = true;
  } else {
    rule = `"${input}" has ${plural(dots, 'dot')}, fewer than ndots:${s.ndots}: the search list is tried first, then the name as it is`;
  }

  // RES_DEFNAMES and RES_DNSRCH are always on for getaddrinfo: without a trailing dot, search.
  let rootOnList = false;
  const n = s.search.length;
  for (let i = 0; i < n; i++) {
    const domain = s.search[i]!;
    const isRoot = domain === '.' || domain === '';
    if (isRoot) rootOnList = true;
    const name = isRoot ? asIs : `${input}.${domain}.`;
    const why = triedAsIs
      ? `search domain ${i + 1} of ${n} (after the name as it is)`
      : `search domain ${i + 1} of ${n}`;
    candidates.push({
      ...candidate(name, 'search', isRoot ? `${why}: the root, so the name as it is` : why),
      searchIndex: i,
    });
  }
  const searched = n > 0;
  if ((dots > 0 || !searched || !s.noTldQuery) && !(triedAsIs || rootOnList)) {
    const why = searched
      ? `${plural(dots, 'dot')} < ndots:${s.ndots}: the name as it is comes after the search list`
      : 'no search list: the name as it is';
    candidates.push(candidate(asIs, 'as-is-last', why));
  } else if (searched && dots === 0 && s.noTldQuery && !triedAsIs && !rootOnList) {
    rule += ' (no-tld-query: a single-label name is never asked for as it is)';
  }
  return { input, dots, trailingDot, ndots: s.ndots, candidates, rule };
}

function candidate(name: string, phase: CandidatePhase, reason: string): Candidate {
  const c: Candidate = { name, phase, reason };
  try {
    nameToLabels(name);
  } catch (e) {
    if (!(e instanceof NameError)) throw e;
    c.invalid = e.message;
  }
  return c;
}
