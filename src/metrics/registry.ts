// The process-wide metrics registry. Plugins declare their metrics at module level (so a
// reload does not register them twice) and count on the hot path with plain numbers that
// a metric's collect() turns into samples only when /metrics is scraped.

import { Registry } from 'prom-client';

export const registry = new Registry();

/** A labelled counter kept as plain numbers: key = label values joined by \u0000. */
export class PlainCounter {
  private readonly values = new Map<string, number>();

  inc(key: string, by = 1): void {
    this.values.set(key, (this.values.get(key) ?? 0) + by);
  }

  entries(): IterableIterator<[string, number]> {
    return this.values.entries();
  }

  get(key: string): number {
    return this.values.get(key) ?? 0;
  }
}

export function labelKey(...values: string[]): string {
  return values.join('\u0000');
}

export function splitLabelKey(key: string): string[] {
  return key.split('\u0000');
}
