// CoreDNS's server metrics, counted on the hot path with plain typed arrays indexed by
// small integers (no label strings built per query) and turned into Prometheus samples
// only when /metrics is scraped. Counting is on while a running configuration asks for it
// (`prometheus`, the status page); each server has its own (services.ts).

import { QType } from '../dns/constants.js';
import { fastFlush } from './fast-answers.js';

/** The qtypes CoreDNS reports by name; everything else is "other". */
export const MONITORED_TYPES = [
  'A',
  'AAAA',
  'NS',
  'PTR',
  'SOA',
  'CNAME',
  'MX',
  'TXT',
  'SRV',
  'NAPTR',
  'DS',
  'DNSKEY',
  'RRSIG',
  'NSEC',
  'NSEC3',
  'HINFO',
  'IXFR',
  'AXFR',
  'ANY',
  'HTTPS',
  'SVCB',
  'CAA',
  'other',
] as const;
const OTHER = MONITORED_TYPES.length - 1;
const typeIndexTable = new Uint8Array(65536).fill(OTHER);
{
  const numbers: Record<string, number> = { ...QType, NSEC3: 50 };
  MONITORED_TYPES.forEach((name, i) => {
    const n = numbers[name];
    if (n !== undefined) typeIndexTable[n] = i;
  });
}
export const NT = MONITORED_TYPES.length;

/** 0.25 ms · 2^k, as CoreDNS's coredns_dns_request_duration_seconds. */
export const DURATION_BUCKETS = Array.from({ length: 16 }, (_, k) => 0.00025 * 2 ** k);
/** CoreDNS's size buckets for request and response sizes. */
export const SIZE_BUCKETS = [0, 100, 200, 300, 400, 511, 1023, 2047, 4095, 8291, 16e3, 32e3, 48e3, 64e3];

const NB = DURATION_BUCKETS.length;
const NS = SIZE_BUCKETS.length;
const RCODES = 24;

export class ZoneStats {
  /** [proto(udp=0,tcp=1)][family(1,2 → 0,1)][type] */
  readonly requests = new Float64Array(2 * 2 * NT);
  doRequests = 0;
  /** [type][bucket], non-cumulative; the last slot is +Inf. */
  readonly durations = new Float64Array(NT * (NB + 1));
  readonly durationSums = new Float64Array(NT);
  readonly requestSizes = new Float64Array(2 * (NS + 1));
  readonly requestSizeSums = new Float64Array(2);
  readonly responseSizes = new Float64Array(2 * (NS + 1));
  readonly responseSizeSums = new Float64Array(2);
  /** plugin name → counts by rcode */
  readonly responses = new Map<string, Float64Array>();

  constructor(
    readonly server: string,
    readonly zone: string,
  ) {}

  record(
    proto: 0 | 1,
    family: 1 | 2,
    qtype: number,
    dnssecOk: boolean,
    reqSize: number,
    respSize: number,
    rcode: number,
    plugin: string,
    seconds: number,
    n = 1,
  ): void {
    const t = typeIndexTable[qtype]!;
    this.requests[(proto * 2 + (family - 1)) * NT + t]! += n;
    if (dnssecOk) this.doRequests += n;
    let b = 0;
    while (b < NB && seconds > DURATION_BUCKETS[b]!) b++;
    this.durations[t * (NB + 1) + b]! += n;
    this.durationSums[t]! += seconds * n;
    let s = 0;
    while (s < NS && reqSize > SIZE_BUCKETS[s]!) s++;
    this.requestSizes[proto * (NS + 1) + s]! += n;
    this.requestSizeSums[proto]! += reqSize * n;
    s = 0;
    while (s < NS && respSize > SIZE_BUCKETS[s]!) s++;
    this.responseSizes[proto * (NS + 1) + s]! += n;
    this.responseSizeSums[proto]! += respSize * n;
    let byRcode = this.responses.get(plugin);
    if (byRcode === undefined) this.responses.set(plugin, (byRcode = new Float64Array(RCODES)));
    byRcode[rcode < RCODES ? rcode : RCODES - 1]! += n;
  }
}

export class ServerStats {
  /** Read once per query: whether to count it. */
  enabled = false;
  panics = 0;
  private readonly zones = new Map<string, ZoneStats>();
  private holders = 0;
  /** Answers the native table gave, by server label (clusterdns_fast_answers_total). */
  readonly fastAnswers = new Map<string, number>();
  /** Move the native table's hits into these counters (fast-answers.ts); run before any read. */
  readonly folders = new Set<() => void>();

  /** Counts queries until the returned function is called (the asking configuration's shutdown). */
  count(): () => void {
    // The native table's answers kept while nothing counted count nothing when repeated: they go.
    if (this.holders++ === 0) fastFlush();
    this.enabled = true;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.enabled = --this.holders > 0;
    };
  }

  /** Stats for one server block zone ("dropped" for queries that never reached a chain). */
  zone(server: string, zone: string): ZoneStats {
    const key = server + ' ' + zone;
    let z = this.zones.get(key);
    if (z === undefined) this.zones.set(key, (z = new ZoneStats(server, zone)));
    return z;
  }

  /** Counts the native table's answers given so far as if JS had answered them. */
  fold(): void {
    for (const f of this.folders) f();
  }

  all(): IterableIterator<ZoneStats> {
    this.fold();
    return this.zones.values();
  }
}
