// CoreDNS's template metrics, counted in the server's plain maps (TEMPLATE_METRICS) and turned
// into samples at scrape time.

import { registerCollected } from '../../metrics/collected.js';
import { labelKey, PlainCounter, splitLabelKey } from '../../metrics/registry.js';
import { metricsKey } from '../../server/services.js';

export interface TemplateCounters {
  /** Queries a template answered: server, zone, view, class, type. */
  readonly matches: PlainCounter;
  /** Templates that failed to execute: server, zone, view, class, type, section, template. */
  readonly templateFailures: PlainCounter;
  /** Executed templates that did not give a valid record: the same labels. */
  readonly rrFailures: PlainCounter;
}

export function newTemplateCounters(): TemplateCounters {
  return { matches: new PlainCounter(), templateFailures: new PlainCounter(), rrFailures: new PlainCounter() };
}

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

/** The server's template counters, published in its registry when it serves metrics. */
export const TEMPLATE_METRICS = metricsKey('template metrics', newTemplateCounters, (registry, c) => {
  registerCollected(registry, 'coredns_template_matches_total', 'Counter of template regex matches.', 'counter', () =>
    samples(c.matches, MATCH_LABELS),
  );
  registerCollected(
    registry,
    'coredns_template_template_failures_total',
    'Counter of go template failures.',
    'counter',
    () => samples(c.templateFailures, FAILURE_LABELS),
  );
  registerCollected(registry, 'coredns_template_rr_failures_total', 'Counter of mis-templated RRs.', 'counter', () =>
    samples(c.rrFailures, FAILURE_LABELS),
  );
});
