// CoreDNS's autopath metric: coredns_autopath_success_total{server}, counted in the server's
// plain map and turned into samples only when /metrics is scraped.

import { serverCounter } from '../../server/services.js';

/** Successful autopath walks, by server ("dns://:53"). */
export const AUTOPATH_SUCCESS = serverCounter(
  'coredns_autopath_success_total',
  'Counter of requests that did autopath.',
);
