// CoreDNS's autopath metric: coredns_autopath_success_total{server}, counted in a plain map
// and turned into samples only when /metrics is scraped.

import { defineCollected } from '../../metrics/collected.js';
import { PlainCounter } from '../../metrics/registry.js';

/** Successful autopath walks, by server ("dns://:53"). */
export const autopathSuccess = new PlainCounter();

defineCollected('coredns_autopath_success_total', 'Counter of requests that did autopath.', 'counter', () =>
  [...autopathSuccess.entries()].map(([server, value]) => ({ labels: { server }, value })),
);
