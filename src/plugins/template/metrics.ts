// CoreDNS's template metrics, counted in plain maps and turned into samples at scrape time.

import { defineCollected } from '../../metrics/collected.js';
import { labelKey, PlainCounter, splitLabelKey } from '../../metrics/registry.js';

/** Queries a template answered: server, zone, view, class, type. */
export const templateMatches = new PlainCounter();
/** Templates that failed to execute: server, zone, view, class, type, section, template. */
export const templateFailures = new PlainCounter();
/** Executed templates that did not give a valid record: the same labels. */
export const rrFailures = new PlainCounter();

export { labelKey };

const MATCH_LABELS = ['server', 'zone', 'view', 'class', 'type'] as const;
const FAILURE_LABELS = [...MATCH_LABELS, 'section', 'template'] as const;

function samples(c: PlainCounter, names: readonly string[]) {
  return [...c.entries()].map(([key, value]) => {
    const parts = splitLabelKey(key);
    const labels: Record<string, string> = {};
    names.forEach((n, i) => (labels[n] = parts[i] ?? ''));
    return { labels, value };
  });
}

defineCollected('coredns_template_matches_total', 'Counter of template regex matches.', 'counter', () =>
  samples(templateMatches, MATCH_LABELS),
);
defineCollected('coredns_template_template_failures_total', 'Counter of go template failures.', 'counter', () =>
  samples(templateFailures, FAILURE_LABELS),
);
defineCollected('coredns_template_rr_failures_total', 'Counter of mis-templated RRs.', 'counter', () =>
  samples(rrFailures, FAILURE_LABELS),
);
