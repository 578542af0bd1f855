// What one server owns for as long as it runs, across the configurations it loads: its
// query counters, its own probe names, the plugins its running configuration enables, and
// the long-lived things plugins keep per server (the kubernetes plugin's watch). Each
// Runtime gets it from the server (SetupContext.services), so a reload sees what the server
// it replaces built up, and a second server in the same process sees none of it.

import { aggregatedInWorker } from '../metrics/cluster.js';
import { registerCollected } from '../metrics/collected.js';
import { PlainCounter, promClient, type Registry } from '../metrics/registry.js';
import { QueryNames } from '../status/names.js';
import { ServerStats } from './stats.js';

/**
 * A per-server service a plugin declares once, at module level (the declaration never
 * changes); `make` builds the server's own instance the first time one of its plugins asks.
 */
export class ServiceKey<T> {
  constructor(
    readonly name: string,
    readonly make: (services: ServerServices) => T,
  ) {}
}

/** (server, zone, plugin) triples of the running configurations, as coredns_plugin_enabled reports them. */
class EnabledPlugins {
  private readonly holds = new Map<string, number>();

  /** Marks `entries` enabled until the returned function is called (a configuration's shutdown). */
  hold(entries: ReadonlyArray<{ server: string; zone: string; plugin: string }>): () => void {
    const keys = entries.map((e) => `${e.server} ${e.zone} ${e.plugin}`);
    for (const k of keys) this.holds.set(k, (this.holds.get(k) ?? 0) + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      for (const k of keys) {
        const n = (this.holds.get(k) ?? 1) - 1;
        if (n > 0) this.holds.set(k, n);
        else this.holds.delete(k);
      }
    };
  }

  *entries(): IterableIterator<{ server: string; zone: string; plugin: string }> {
    for (const k of this.holds.keys()) {
      const [server = '', zone = '', plugin = ''] = k.split(' ');
      yield { server, zone, plugin };
    }
  }
}

export class ServerServices {
  /** CoreDNS's per-zone request counters, counted while a configuration asks for them. */
  readonly stats = new ServerStats();
  /**
   * Names of this server's own probes (the loop plugin's HINFO queries to itself). They must
   * reach every plugin each time they arrive: a cache that coalesced or stored them would
   * hide a forwarding loop, since the looping copy would wait on the first instead of
   * coming back through the loop detector.
   */
  readonly selfProbes = new Set<string>();
  readonly enabledPlugins = new EnabledPlugins();
  /** The status page's top names, fed while a page is configured. */
  readonly queryNames = new QueryNames();
  private readonly made = new Map<ServiceKey<unknown>, unknown>();
  private registry: Registry | null = null;
  private readonly declared: Array<(r: Registry) => void> = [];

  /**
   * The server's own metrics (its counters, its status page), served with the process's;
   * made on first use, so a server that wants no metrics never loads prom-client.
   */
  metrics(): Registry {
    if (this.registry === null) {
      const r = (this.registry = new (promClient().Registry)());
      aggregatedInWorker(r);
      // First in the registry: its collect folds the native table's hits into every counter
      // (the core metrics, the plugins' own) before any of them is read.
      const stats = this.stats;
      registerCollected(
        r,
        'clusterdns_fast_answers_total',
        'Counter of UDP queries answered by the native answer table (a repeat of an answer JS gave) per server.',
        'counter',
        () => {
          stats.fold();
          return [...stats.fastAnswers].map(([server, value]) => ({ labels: { server }, value }));
        },
      );
      for (const define of this.declared.splice(0)) define(r);
    }
    return this.registry;
  }

  /** Runs `define` with the server's registry: now if it exists, else when metrics are first wanted. */
  withMetrics(define: (r: Registry) => void): void {
    if (this.registry !== null) define(this.registry);
    else this.declared.push(define);
  }

  /** This server's instance of `key`, made at the first call. */
  get<T>(key: ServiceKey<T>): T {
    if (this.made.has(key)) return this.made.get(key) as T;
    const v = key.make(this);
    this.made.set(key, v);
    return v;
  }
}

/**
 * A plugin's metrics kept per server: `make` builds the server's counters at the first ask,
 * `register` publishes them in the server's registry once it serves metrics.
 */
export function metricsKey<T>(
  name: string,
  make: () => T,
  register: (registry: Registry, counters: T) => void,
): ServiceKey<T> {
  return new ServiceKey(name, (services) => {
    const counters = make();
    services.withMetrics((registry) => register(registry, counters));
    return counters;
  });
}

/**
 * A plugin's counter labelled by `server` alone (CoreDNS's dns64, local, autopath): the
 * server's own, kept across reloads and published in its registry when it serves metrics.
 */
export function serverCounter(name: string, help: string): ServiceKey<PlainCounter> {
  return metricsKey(
    name,
    () => new PlainCounter(),
    (registry, counter) =>
      registerCollected(registry, name, help, 'counter', () =>
        [...counter.entries()].map(([server, value]) => ({ labels: { server }, value })),
      ),
  );
}
