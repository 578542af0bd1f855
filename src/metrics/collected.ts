// Metrics whose values are computed at scrape time from plain counters. prom-client's
// Registry accepts any object with a name and a get(); this is that object, so histograms
// kept as bucket arrays need no per-query prom-client call.

import type { MetricValue } from 'prom-client';
import type { Registry } from './registry.js';

export type MetricKind = 'counter' | 'gauge' | 'histogram';

export interface Sample {
  labels: Record<string, string | number>;
  value: number;
  /** For histograms: name_bucket / name_sum / name_count. */
  metricName?: string;
}

interface CollectedMetric {
  name: string;
  help: string;
  type: MetricKind;
  aggregator: 'sum' | 'max' | 'first';
  get(): Promise<{
    name: string;
    help: string;
    type: MetricKind;
    values: MetricValue<string>[];
    aggregator: 'sum' | 'max' | 'first';
  }>;
  reset(): void;
}

/**
 * Registers a collected metric in `registry` (a server's own, or the process's through
 * withRegistry()) unless it has one so named.
 */
export function registerCollected(
  registry: Registry,
  name: string,
  help: string,
  type: MetricKind,
  collect: () => Sample[],
  aggregator: 'sum' | 'max' | 'first' = 'sum',
): void {
  if (registry.getSingleMetric(name)) return;
  const m: CollectedMetric = {
    name,
    help,
    type,
    aggregator,
    async get() {
      return { name, help, type, aggregator, values: collect() };
    },
    reset() {},
  };
  registry.registerMetric(m as unknown as Parameters<typeof registry.registerMetric>[0]);
}

/** Expands non-cumulative bucket counts (last slot +Inf) into histogram samples. */
export function histogramSamples(
  name: string,
  labels: Record<string, string | number>,
  bounds: readonly number[],
  counts: ArrayLike<number>,
  offset: number,
  sum: number,
): Sample[] {
  const out: Sample[] = [];
  let acc = 0;
  for (let i = 0; i < bounds.length; i++) {
    acc += counts[offset + i]!;
    out.push({ metricName: `${name}_bucket`, labels: { ...labels, le: bounds[i]! }, value: acc });
  }
  acc += counts[offset + bounds.length]!;
  out.push({ metricName: `${name}_bucket`, labels: { ...labels, le: '+Inf' }, value: acc });
  out.push({ metricName: `${name}_sum`, labels, value: sum });
  out.push({ metricName: `${name}_count`, labels, value: acc });
  return out;
}
