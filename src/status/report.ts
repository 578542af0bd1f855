// /status.json: what an operator wants at a glance, computed from the metrics text of the
// whole process (every worker summed): rate, rcode mix, latency percentiles, cache hit
// ratio, top names, upstream health and Kubernetes API state. The shape is documented in
// src/plugins/health/README.md.

import { VERSION } from '../version.js';
import type { Exposition, ExpositionSample } from './exposition.js';
import { API_STATES, UPSTREAM_STATES, WINDOW_LABELS, WINDOW_SECONDS, type ApiState } from './recorder.js';
import type { UpstreamState } from './sources.js';

/** Entries in each top-names list. */
export const TOP_LIST = 10;

export interface LatencySummary {
  /** Requests the percentiles are estimated from. */
  count: number;
  /** Seconds; null without requests. */
  p50: number | null;
  p90: number | null;
  p99: number | null;
}

export interface CacheSummary {
  requests: number;
  hits: number;
  /** hits / requests; null without requests. */
  hitRatio: number | null;
}

export interface NameShare {
  name: string;
  /** Queries, decayed with a one-minute half-life. */
  count: number;
  /** Fraction of all counted queries (of that kind). */
  share: number;
}

export interface UpstreamReport {
  to: string;
  /** The worst state any forward instance (in any worker) sees. */
  state: UpstreamState;
  instances: Record<UpstreamState, number>;
  /** Tries sent since start (coredns_forward_requests_total). */
  requests: number;
  /** Replies by rcode since start (coredns_forward_responses_total). */
  rcodes: Record<string, number>;
  /** Tries that got no reply (timeouts, refused connections). */
  noReply: number;
  healthcheckFailures: number;
  /** Mean time to a reply, seconds; null before the first reply. */
  meanLatency: number | null;
}

export interface ApiReport {
  zones: string[];
  source: string;
  /** The worst state over the workers. */
  state: ApiState;
  instances: Record<ApiState, number>;
  services: number;
  endpointSlices: number;
  namespaces: number;
  pods: number;
  /** ISO time of the last change DNS answers reflect. */
  lastChange: string | null;
}

export interface StatusReport {
  version: string;
  /** When this report was made (ISO 8601). */
  time: string;
  uptimeSeconds: number;
  /** Processes whose numbers are summed here. */
  workers: number;
  /** Length of the "recent" window. */
  windowSeconds: number;
  queries: { perSecond: number; recent: number; total: number };
  rcodes: { recent: Record<string, number>; total: Record<string, number> };
  latency: { recent: LatencySummary; total: LatencySummary };
  cache: { recent: CacheSummary; total: CacheSummary };
  topNames: NameShare[];
  topNxdomain: NameShare[];
  upstreams: UpstreamReport[];
  kubernetes: ApiReport[];
}

/** The metric families the report reads (the rest of /metrics is skipped unparsed). */
export function wantedFamily(name: string): boolean {
  return name.startsWith('clusterdns_status_') || name.startsWith('coredns_forward_');
}

/**
 * Prometheus's histogram_quantile: linear interpolation inside the bucket holding rank
 * q·count; the largest finite bound when that bucket is +Inf; null without observations.
 * `bounds` ends with Infinity and `cumulative` holds the count at or below each bound.
 */
export function bucketQuantile(q: number, bounds: readonly number[], cumulative: readonly number[]): number | null {
  const total = cumulative[cumulative.length - 1] ?? 0;
  if (total <= 0) return null;
  const rank = q * total;
  let b = 0;
  while (b < cumulative.length - 1 && cumulative[b]! < rank) b++;
  if (bounds[b] === Infinity) return b > 0 ? bounds[b - 1]! : null;
  const lower = b > 0 ? bounds[b - 1]! : 0;
  const below = b > 0 ? cumulative[b - 1]! : 0;
  const inBucket = cumulative[b]! - below;
  if (inBucket <= 0) return bounds[b]!;
  return lower + (bounds[b]! - lower) * ((rank - below) / inBucket);
}

function samples(m: Exposition, name: string): ExpositionSample[] {
  return m.get(name) ?? [];
}

function sumWhere(m: Exposition, name: string, match: Record<string, string>): number {
  let sum = 0;
  for (const s of samples(m, name)) if (Object.entries(match).every(([k, v]) => s.labels[k] === v)) sum += s.value;
  return sum;
}

function single(m: Exposition, name: string): number {
  return samples(m, name)[0]?.value ?? 0;
}

function rcodeMix(m: Exposition, window: string): Record<string, number> {
  const list = samples(m, 'clusterdns_status_responses')
    .filter((s) => s.labels.window === window && s.value > 0)
    .map((s) => [s.labels.rcode ?? '', s.value] as const)
    .sort((a, b) => b[1] - a[1]);
  return Object.fromEntries(list);
}

function latency(m: Exposition, window: string): LatencySummary {
  const rows = samples(m, 'clusterdns_status_request_duration_seconds')
    .filter((s) => s.labels.window === window)
    .map((s) => ({ le: s.labels.le === '+Inf' ? Infinity : Number(s.labels.le), n: s.value }))
    .sort((a, b) => a.le - b.le);
  const bounds = rows.map((r) => r.le);
  const cumulative = rows.map((r) => r.n);
  return {
    count: cumulative[cumulative.length - 1] ?? 0,
    p50: bucketQuantile(0.5, bounds, cumulative),
    p90: bucketQuantile(0.9, bounds, cumulative),
    p99: bucketQuantile(0.99, bounds, cumulative),
  };
}

function cache(m: Exposition, window: string): CacheSummary {
  const hits = sumWhere(m, 'clusterdns_status_cache', { window, result: 'hit' });
  const requests = hits + sumWhere(m, 'clusterdns_status_cache', { window, result: 'miss' });
  return { requests, hits, hitRatio: requests > 0 ? hits / requests : null };
}

function topNames(m: Exposition, kind: string): NameShare[] {
  const counted = sumWhere(m, 'clusterdns_status_names_counted', { kind });
  return samples(m, 'clusterdns_status_top_names')
    .filter((s) => s.labels.kind === kind && s.value >= 0.5)
    .sort((a, b) => b.value - a.value || ((a.labels.name ?? '') < (b.labels.name ?? '') ? -1 : 1))
    .slice(0, TOP_LIST)
    .map((s) => ({
      name: s.labels.name ?? '',
      count: Math.round(s.value * 10) / 10,
      share: counted > 0 ? Math.min(1, s.value / counted) : 0,
    }));
}

/** The first state of `ranked` (worst first) that some instance is in. */
function worst<S extends string>(counts: Record<S, number>, ranked: readonly S[]): S {
  for (const s of ranked) if (counts[s] > 0) return s;
  return ranked[ranked.length - 1]!;
}

function upstreams(m: Exposition): UpstreamReport[] {
  const byTo = new Map<string, Record<UpstreamState, number>>();
  for (const s of samples(m, 'clusterdns_status_upstream')) {
    const to = s.labels.to ?? '';
    let c = byTo.get(to);
    if (c === undefined) byTo.set(to, (c = { up: 0, failing: 0, down: 0 }));
    const state = s.labels.state as UpstreamState;
    if (UPSTREAM_STATES.includes(state)) c[state] += s.value;
  }
  return [...byTo].map(([to, instances]) => {
    const rcodes: Record<string, number> = {};
    let replies = 0;
    for (const s of samples(m, 'coredns_forward_responses_total'))
      if (s.labels.to === to && s.value > 0) {
        const rc = s.labels.rcode ?? '';
        rcodes[rc] = (rcodes[rc] ?? 0) + s.value;
        replies += s.value;
      }
    const requests = sumWhere(m, 'coredns_forward_requests_total', { to });
    const durationSum = sumWhere(m, 'coredns_forward_request_duration_seconds_sum', { to });
    const durationCount = sumWhere(m, 'coredns_forward_request_duration_seconds_count', { to });
    return {
      to,
      state: worst(instances, ['down', 'failing', 'up']),
      instances,
      requests,
      rcodes,
      noReply: Math.max(0, requests - replies),
      healthcheckFailures: sumWhere(m, 'coredns_forward_healthcheck_failures_total', { to }),
      meanLatency: durationCount > 0 ? durationSum / durationCount : null,
    };
  });
}

function kubernetes(m: Exposition): ApiReport[] {
  const byKey = new Map<string, ApiReport>();
  for (const s of samples(m, 'clusterdns_status_kubernetes')) {
    const zones = s.labels.zones ?? '';
    const source = s.labels.source ?? '';
    const key = `${zones}\u0000${source}`;
    let r = byKey.get(key);
    if (r === undefined) {
      const last = sumWhere(m, 'clusterdns_status_kubernetes_last_change_seconds', { zones, source });
      const objects = (kind: string) => sumWhere(m, 'clusterdns_status_kubernetes_objects', { zones, source, kind });
      r = {
        zones: zones === '' ? [] : zones.split(' '),
        source,
        state: 'up',
        instances: { up: 0, stale: 0, syncing: 0 },
        services: objects('services'),
        endpointSlices: objects('endpointslices'),
        namespaces: objects('namespaces'),
        pods: objects('pods'),
        lastChange: last > 0 ? new Date(last * 1000).toISOString() : null,
      };
      byKey.set(key, r);
    }
    const state = s.labels.state as ApiState;
    if (API_STATES.includes(state)) r.instances[state] += s.value;
  }
  for (const r of byKey.values()) r.state = worst(r.instances, ['syncing', 'stale', 'up']);
  return [...byKey.values()];
}

/** Builds the report from the metrics of the whole process. */
export function buildReport(m: Exposition, now = new Date()): StatusReport {
  const recent = WINDOW_LABELS.recent;
  const total = WINDOW_LABELS.total;
  const rcodesRecent = rcodeMix(m, recent);
  const rcodesTotal = rcodeMix(m, total);
  const sum = (r: Record<string, number>) => Object.values(r).reduce((a, b) => a + b, 0);
  return {
    version: VERSION,
    time: now.toISOString(),
    uptimeSeconds: single(m, 'clusterdns_status_uptime_seconds'),
    workers: single(m, 'clusterdns_status_workers'),
    windowSeconds: WINDOW_SECONDS,
    queries: {
      perSecond: Math.round(single(m, 'clusterdns_status_queries_per_second') * 10) / 10,
      recent: sum(rcodesRecent),
      total: sum(rcodesTotal),
    },
    rcodes: { recent: rcodesRecent, total: rcodesTotal },
    latency: { recent: latency(m, recent), total: latency(m, total) },
    cache: { recent: cache(m, recent), total: cache(m, total) },
    topNames: topNames(m, 'query'),
    topNxdomain: topNames(m, 'nxdomain'),
    upstreams: upstreams(m),
    kubernetes: kubernetes(m),
  };
}
