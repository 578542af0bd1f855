// CoreDNS's response classes (plugin/pkg/response), used by `log` and `errors` filters.

import { Rcode } from '../dns/constants.js';

export type ResponseClass = 'success' | 'denial' | 'error';

/** Classifies a reply from its rcode and answer count, as CoreDNS's response.Classify does. */
export function classify(rcode: number, answers: number): ResponseClass {
  if (rcode === Rcode.NXDOMAIN) return 'denial';
  if (rcode === Rcode.NOERROR) return answers === 0 ? 'denial' : 'success';
  return 'error';
}
