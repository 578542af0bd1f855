// What the status page reads from plugins beyond their metrics: optional capabilities a
// plugin instance (or its handler) offers by having the method. The page finds them among
// the running configuration's instances, so no core module imports a plugin and a plugin
// folder stays removable.

import type { PluginInstance } from '../plugins/plugin.js';

/** CoreDNS's view of an upstream: `down` after more than max_fails failed checks in a row. */
export type UpstreamState = 'up' | 'failing' | 'down';

export interface UpstreamHealth {
  /** "10.0.0.1:53", as the `to` label of the forward metrics. */
  readonly to: string;
  readonly state: UpstreamState;
}

/** Offered by the forward plugin's handler. */
export interface UpstreamHealthSource {
  upstreamHealth(): readonly UpstreamHealth[];
}

/** Where a plugin that mirrors the Kubernetes API stands. */
export interface ApiSyncState {
  /** The plugin's zones, lowercase FQDNs. */
  readonly zones: readonly string[];
  /** Where the state comes from ("endpoint https://…", "manifests cluster.yaml", …). */
  readonly source: string;
  /** The first complete list has arrived. */
  readonly synced: boolean;
  /** The API (or manifest file) answers now; false while serving the last known state. */
  readonly connected: boolean;
  readonly services: number;
  readonly endpointSlices: number;
  readonly namespaces: number;
  readonly pods: number;
  /** Unix seconds of the last change DNS answers reflect (the SOA serial). */
  readonly lastChange: number;
}

/** Offered by the kubernetes plugin's instance. */
export interface ApiSyncSource {
  apiSync(): ApiSyncState;
}

function hasMethod<K extends string>(x: unknown, key: K): x is Record<K, () => unknown> {
  return typeof x === 'object' && x !== null && typeof (x as Record<string, unknown>)[key] === 'function';
}

/** The instance and its handler: either may offer a capability. */
function* candidates(instances: readonly PluginInstance[]): Generator<unknown> {
  for (const inst of instances) {
    yield inst;
    if (inst.handler !== undefined && (inst.handler as unknown) !== inst) yield inst.handler;
  }
}

export function upstreamHealth(instances: readonly PluginInstance[]): UpstreamHealth[] {
  const out: UpstreamHealth[] = [];
  for (const c of candidates(instances))
    if (hasMethod(c, 'upstreamHealth')) out.push(...(c as UpstreamHealthSource).upstreamHealth());
  return out;
}

export function apiSyncStates(instances: readonly PluginInstance[]): ApiSyncState[] {
  const out: ApiSyncState[] = [];
  for (const c of candidates(instances)) if (hasMethod(c, 'apiSync')) out.push((c as ApiSyncSource).apiSync());
  return out;
}
