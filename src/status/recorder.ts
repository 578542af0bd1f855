// The status page's numbers for one server (each has its recorder: services.ts). A one-second
// tick copies the server's counters (and its cache metrics) into a short ring, from which come the query rate and
// the last-10-seconds window; clusterdns_status_* metrics publish them, so with several
// workers the primary's metrics aggregation (src/metrics/cluster.ts) sums every worker's
// numbers exactly as it does for /metrics. Nothing here runs per query.

import { registerCollected, type MetricKind, type Sample } from '../metrics/collected.js';
import { keepOffMetrics, type Registry } from '../metrics/registry.js';
import { rcodeToString } from '../dns/constants.js';
import { DURATION_BUCKETS, NT, type ServerStats } from '../server/stats.js';
import { ServiceKey, type ServerServices } from '../server/services.js';
import { fastFlush } from '../server/fast-answers.js';
import type { PluginInstance } from '../plugins/plugin.js';
import type { QueryNames } from './names.js';
import { apiSyncStates, upstreamHealth, type UpstreamState } from './sources.js';

export const TICK_MS = 1000;
/** The "recent" window of the page, in seconds (ticks). */
export const WINDOW_SECONDS = 10;
/** Header rcodes are four bits. */
const RCODE_SLOTS = 16;
/** DURATION_BUCKETS and the +Inf slot. */
const DURATION_SLOTS = DURATION_BUCKETS.length + 1;
export const UPSTREAM_STATES: readonly UpstreamState[] = ['up', 'failing', 'down'];
export type ApiState = 'up' | 'stale' | 'syncing';
export const API_STATES: readonly ApiState[] = ['up', 'stale', 'syncing'];

/** Cumulative counters of this process at one instant (or the difference of two). */
export class Counts {
  readonly rcodes = new Float64Array(RCODE_SLOTS);
  /** Requests by duration bucket, not cumulative; the last slot is +Inf. */
  readonly durations = new Float64Array(DURATION_SLOTS);
  cacheRequests = 0;
  cacheHits = 0;

  /** When taken (performance.now(), ms); for a difference, the milliseconds it spans. */
  constructor(readonly at: number) {}

  get queries(): number {
    let n = 0;
    for (let r = 0; r < RCODE_SLOTS; r++) n += this.rcodes[r]!;
    return n;
  }

  minus(older: Counts): Counts {
    const d = new Counts(this.at - older.at);
    for (let r = 0; r < RCODE_SLOTS; r++) d.rcodes[r] = this.rcodes[r]! - older.rcodes[r]!;
    for (let b = 0; b < DURATION_SLOTS; b++) d.durations[b] = this.durations[b]! - older.durations[b]!;
    d.cacheRequests = this.cacheRequests - older.cacheRequests;
    d.cacheHits = this.cacheHits - older.cacheHits;
    return d;
  }
}

/** The sum of `name`'s samples labelled with one of `servers`, from the server's own registry. */
async function metricSum(name: string, servers: ReadonlySet<string>, reg: Registry): Promise<number> {
  const m = reg.getSingleMetric(name);
  if (m === undefined) return 0;
  let sum = 0;
  for (const v of (await m.get()).values) if (servers.has(String(v.labels['server']))) sum += v.value;
  return sum;
}

/** The server's counters now: every server block and zone, every plugin and qtype. */
async function readCounts(at: number, serverStats: ServerStats, reg: Registry): Promise<Counts> {
  const c = new Counts(at);
  const servers = new Set<string>();
  for (const z of serverStats.all()) {
    servers.add(z.server);
    for (const byRcode of z.responses.values()) for (let r = 0; r < RCODE_SLOTS; r++) c.rcodes[r]! += byRcode[r]!;
    for (let t = 0; t < NT; t++)
      for (let b = 0; b < DURATION_SLOTS; b++) c.durations[b]! += z.durations[t * DURATION_SLOTS + b]!;
  }
  // Through the server's registry, by CoreDNS's names: no core module imports the cache plugin.
  c.cacheRequests = await metricSum('coredns_cache_requests_total', servers, reg);
  c.cacheHits = await metricSum('coredns_cache_hits_total', servers, reg);
  return c;
}

export class StatusRecorder {
  /** Instance lists of the configurations showing a page; the newest is read. */
  private readonly users: Array<() => readonly PluginInstance[]> = [];
  private stopCounting: (() => void) | null = null;
  private defined = false;
  private ring: Counts[] = [];
  private timer: NodeJS.Timeout | null = null;
  private ticking: Promise<void> | null = null;
  /** Queries per second over the last tick. */
  queriesPerSecond = 0;

  constructor(private readonly services: ServerServices) {}

  /** Turns counting on for a page; the returned function turns it off again. */
  acquire(instances: () => readonly PluginInstance[]): () => void {
    this.users.push(instances);
    if (this.users.length === 1) this.start();
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.users.splice(this.users.indexOf(instances), 1);
      if (this.users.length === 0) this.stop();
    };
  }

  get active(): boolean {
    return this.users.length > 0;
  }

  instances(): readonly PluginInstance[] {
    return this.users[this.users.length - 1]?.() ?? [];
  }

  private start(): void {
    if (!this.defined) {
      this.defined = true;
      defineStatusMetrics(this, this.services.metrics(), this.services.queryNames);
    }
    this.stopCounting = this.services.stats.count();
    this.services.queryNames.enabled = true;
    fastFlush(); // the native table's answers kept without their name would not count it
    this.ring = [];
    this.queriesPerSecond = 0;
    void this.tick();
    this.timer = setInterval(() => void this.tick(), TICK_MS);
    this.timer.unref();
  }

  private stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    this.stopCounting?.();
    this.stopCounting = null;
    const names = this.services.queryNames;
    names.enabled = false;
    names.all.clear();
    names.nxdomain.clear();
  }

  /** Takes one snapshot (or joins the one being taken); tests call it to tick by hand. */
  tick(): Promise<void> {
    this.ticking ??= this.snapshot().finally(() => {
      this.ticking = null;
    });
    return this.ticking;
  }

  private async snapshot(): Promise<void> {
    const c = await readCounts(performance.now(), this.services.stats, this.services.metrics());
    if (!this.active) return;
    const prev = this.ring[this.ring.length - 1];
    if (prev !== undefined) {
      const seconds = (c.at - prev.at) / 1000;
      this.queriesPerSecond = seconds > 0 ? (c.queries - prev.queries) / seconds : 0;
      this.services.queryNames.age(seconds);
    }
    this.ring.push(c);
    if (this.ring.length > WINDOW_SECONDS * (1000 / TICK_MS) + 1) this.ring.shift();
  }

  /** Since counting began. */
  total(): Counts {
    return this.ring[this.ring.length - 1] ?? new Counts(0);
  }

  /** The last WINDOW_SECONDS (less just after start). */
  recent(): Counts {
    const n = this.ring.length;
    return n < 2 ? new Counts(0) : this.ring[n - 1]!.minus(this.ring[0]!);
  }
}

/** Each server's recorder, started by the first configuration that shows a page. */
export const STATUS_RECORDER = new ServiceKey('status page', (services) => new StatusRecorder(services));

// ------------------------------------------------------------------ published metrics

/** The windows of the windowed metrics, as their `window` label says. */
export const WINDOW_LABELS = { recent: `${WINDOW_SECONDS}s`, total: 'total' } as const;

/** Registers the clusterdns_status_* metrics of `statusRecorder` in its server's registry. */
function defineStatusMetrics(statusRecorder: StatusRecorder, own: Registry, queryNames: QueryNames): void {
  const windows = (): Array<[string, Counts]> => [
    [WINDOW_LABELS.recent, statusRecorder.recent()],
    [WINDOW_LABELS.total, statusRecorder.total()],
  ];
  /** No samples while no configuration shows a page (the metrics stay registered). */
  const whileShown =
    (samples: () => Sample[]): (() => Sample[]) =>
    () =>
      statusRecorder.active ? samples() : [];
  const defineCollected = (
    name: string,
    help: string,
    type: MetricKind,
    collect: () => Sample[],
    aggregator: 'sum' | 'max' | 'first' = 'sum',
  ) => registerCollected(own, name, help, type, collect, aggregator);
  const about = "For the health plugin's /status page, summed over workers.";
  // Client-chosen names as label values, and a gauge shaped like histogram buckets: page only.
  for (const name of [
    'clusterdns_status_top_names',
    'clusterdns_status_names_counted',
    'clusterdns_status_request_duration_seconds',
  ])
    keepOffMetrics(name);
  defineCollected(
    'clusterdns_status_workers',
    `Processes counting for the status page. ${about}`,
    'gauge',
    whileShown(() => [{ labels: {}, value: 1 }]),
  );
  defineCollected(
    'clusterdns_status_uptime_seconds',
    'Seconds since the longest-running worker started.',
    'gauge',
    whileShown(() => [{ labels: {}, value: Math.round(process.uptime()) }]),
    'max',
  );
  defineCollected(
    'clusterdns_status_queries_per_second',
    `DNS queries answered per second over the last second. ${about}`,
    'gauge',
    whileShown(() => [{ labels: {}, value: statusRecorder.queriesPerSecond }]),
  );
  defineCollected(
    'clusterdns_status_responses',
    `Responses by rcode in the window (last ${WINDOW_SECONDS}s, or since counting began). ${about}`,
    'gauge',
    whileShown(() => {
      const out: Sample[] = [];
      for (const [window, c] of windows())
        for (let r = 0; r < RCODE_SLOTS; r++)
          if (c.rcodes[r]! > 0) out.push({ labels: { window, rcode: rcodeToString(r) }, value: c.rcodes[r]! });
      return out;
    }),
  );
  defineCollected(
    'clusterdns_status_request_duration_seconds',
    `Requests answered within le seconds in the window (cumulative, as histogram buckets). ${about}`,
    'gauge',
    whileShown(() => {
      const out: Sample[] = [];
      for (const [window, c] of windows()) {
        let acc = 0;
        for (let b = 0; b < DURATION_SLOTS; b++) {
          acc += c.durations[b]!;
          out.push({
            labels: { window, le: b < DURATION_BUCKETS.length ? String(DURATION_BUCKETS[b]) : '+Inf' },
            value: acc,
          });
        }
      }
      return out;
    }),
  );
  defineCollected(
    'clusterdns_status_cache',
    `Cache lookups by result in the window. ${about}`,
    'gauge',
    whileShown(() => {
      const out: Sample[] = [];
      for (const [window, c] of windows()) {
        out.push({ labels: { window, result: 'hit' }, value: c.cacheHits });
        out.push({ labels: { window, result: 'miss' }, value: Math.max(0, c.cacheRequests - c.cacheHits) });
      }
      return out;
    }),
  );
  defineCollected(
    'clusterdns_status_top_names',
    `The most asked names (kind="query") and NXDOMAIN names, counts decayed with a one-minute half-life; at most 64 per kind and worker. ${about}`,
    'gauge',
    whileShown(() => {
      const out: Sample[] = [];
      for (const [kind, sketch] of [
        ['query', queryNames.all],
        ['nxdomain', queryNames.nxdomain],
      ] as const)
        for (const e of sketch.top()) out.push({ labels: { kind, name: e.name }, value: e.count });
      return out;
    }),
  );
  defineCollected(
    'clusterdns_status_names_counted',
    `Every name counted by the top-names sketch, decayed likewise (the denominator of a name's share). ${about}`,
    'gauge',
    whileShown(() => [
      { labels: { kind: 'query' }, value: queryNames.all.total },
      { labels: { kind: 'nxdomain' }, value: queryNames.nxdomain.total },
    ]),
  );
  defineCollected(
    'clusterdns_status_upstream',
    `forward upstreams by health state: how many instances (forward lines times workers) see each state. ${about}`,
    'gauge',
    whileShown(() => {
      const counts = new Map<string, Record<UpstreamState, number>>();
      for (const u of upstreamHealth(statusRecorder.instances())) {
        let c = counts.get(u.to);
        if (c === undefined) counts.set(u.to, (c = { up: 0, failing: 0, down: 0 }));
        c[u.state]++;
      }
      const out: Sample[] = [];
      for (const [to, c] of counts)
        for (const state of UPSTREAM_STATES) out.push({ labels: { to, state }, value: c[state] });
      return out;
    }),
  );
  const apis = () =>
    apiSyncStates(statusRecorder.instances()).map((a) => ({
      a,
      labels: { zones: a.zones.join(' '), source: a.source },
    }));
  defineCollected(
    'clusterdns_status_kubernetes',
    `kubernetes plugin instances by API state (up, stale: serving the last known state, syncing: no complete list yet). ${about}`,
    'gauge',
    whileShown(() => {
      const out: Sample[] = [];
      for (const { a, labels } of apis()) {
        const state: ApiState = !a.synced ? 'syncing' : a.connected ? 'up' : 'stale';
        for (const s of API_STATES) out.push({ labels: { ...labels, state: s }, value: s === state ? 1 : 0 });
      }
      return out;
    }),
  );
  defineCollected(
    'clusterdns_status_kubernetes_objects',
    'Objects the kubernetes plugin holds, by kind (largest over workers).',
    'gauge',
    whileShown(() => {
      const out: Sample[] = [];
      for (const { a, labels } of apis()) {
        out.push({ labels: { ...labels, kind: 'services' }, value: a.services });
        out.push({ labels: { ...labels, kind: 'endpointslices' }, value: a.endpointSlices });
        out.push({ labels: { ...labels, kind: 'namespaces' }, value: a.namespaces });
        out.push({ labels: { ...labels, kind: 'pods' }, value: a.pods });
      }
      return out;
    }),
    'max',
  );
  defineCollected(
    'clusterdns_status_kubernetes_last_change_seconds',
    'Unix time of the last cluster change DNS answers reflect (latest over workers).',
    'gauge',
    whileShown(() => apis().map(({ a, labels }) => ({ labels, value: a.lastChange }))),
    'max',
  );
}
