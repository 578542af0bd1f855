// The process-wide metrics registry. Plugins count on the hot path with plain numbers that a
// metric's collect() turns into samples only when /metrics is scraped.
//
// prom-client (with its dependencies, many files and a noticeable share of RSS and start-up) is
// loaded only when metrics are wanted: by the prometheus plugin, the status page, node-cache's
// metrics listener, or anything that reads `registry`. It holds what belongs to the process
// (its process_* metrics, the log's dropped lines); a server's plugins count into the server's
// own registry (server/services.ts). Process families are declared with withRegistry(),
// which runs them, in the order they were made, when the registry is created.

import { createRequire } from 'node:module';
import type * as PromClient from 'prom-client';

export type Prom = typeof PromClient;
export type Registry = PromClient.Registry;

const requireCjs = createRequire(import.meta.url);

let prom: Prom | null = null;
let created: Registry | null = null;
const declared: Array<(r: Registry, p: Prom) => void> = [];
const onCreate: Array<(r: Registry, p: Prom) => void> = [];

/** prom-client, loaded on first use (it is CommonJS, so this is synchronous). */
export function promClient(): Prom {
  return (prom ??= requireCjs('prom-client') as Prom);
}

/** The registry, created (and every declared metric registered) on first use. */
export function metricsRegistry(): Registry {
  if (created === null) {
    const p = promClient();
    created = new p.Registry();
    for (const f of onCreate.splice(0)) f(created, p);
    // A declaration made while these run (one registering another) runs at once.
    for (const f of declared.splice(0)) f(created, p);
  }
  return created;
}

/** Whether the registry (and prom-client) has been loaded. */
export function metricsLoaded(): boolean {
  return created !== null;
}

/** Runs `define` with the registry: now if it exists, else when it is created. */
export function withRegistry(define: (r: Registry, p: Prom) => void): void {
  if (created !== null) define(created, prom!);
  else declared.push(define);
}

/** Runs `f` when the registry is created (before the declared metrics), or now if it exists. */
export function whenRegistryCreated(f: (r: Registry, p: Prom) => void): void {
  if (created !== null) f(created, prom!);
  else onCreate.push(f);
}

/**
 * The registry under its old name: touching any property creates it. Code that only
 * declares metrics uses withRegistry() instead, so that nothing loads prom-client early.
 */
export const registry: Registry = new Proxy({} as Registry, {
  get(_target, key) {
    const r = metricsRegistry();
    const v: unknown = Reflect.get(r, key, r);
    return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(r) : v;
  },
  set(_target, key, value) {
    return Reflect.set(metricsRegistry(), key, value);
  },
  has(_target, key) {
    return Reflect.has(metricsRegistry(), key);
  },
});

/**
 * Families kept in the registry (so the primary sums them over workers for the status page)
 * but left out of every /metrics: client-chosen names must not become label values.
 */
const internalFamilies = new Set<string>();

/** Keeps `name` off /metrics; the status page still reads it from metricsText(). */
export function keepOffMetrics(name: string): void {
  internalFamilies.add(name);
}

/** The exposition text without the internal families (their HELP, TYPE and samples). */
export function withoutInternalFamilies(text: string): string {
  if (internalFamilies.size === 0) return text;
  const out: string[] = [];
  for (const line of text.split('\n')) {
    const name = line.startsWith('# ') ? (line.split(' ', 3)[2] ?? '') : line.slice(0, line.search(/[{ ]|$/));
    if (!internalFamilies.has(name)) out.push(line);
  }
  return out.join('\n');
}

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
