// The state DNS answers from, kept by events (events.ts): Services by `ns/name`, their
// EndpointSlices, Namespaces, Pods, and reverse indexes by IP. Every lookup is a Map read,
// so it costs the same with 10 Services as with 100,000. Records are referenced, never
// copied: the store of the source and this index share them.

import type { ClusterEvent } from './events.js';
import { joinKey, type EndpointSliceRecord, type PodRecord, type ServiceRecord } from './objects.js';
import { settleHeapSoon } from '../server/heap.js';

/** What one event may have changed in DNS answers, for invalidation and the SOA serial. */
export interface ClusterChange {
  /** Services (`ns/name`) whose names may answer differently. */
  services: string[];
  /** IPs whose PTR answers may have changed. */
  ips: string[];
  /** Namespaces that appeared or went away. */
  namespaces: string[];
  /** Pods whose `a-b-c-d.<ns>.pod` names may answer differently (verified mode). */
  pods: Array<{ namespace: string; ip: string }>;
  /** A slice that changed, with its service's record, for the programming-latency metric. */
  slice: { record: EndpointSliceRecord; service: ServiceRecord | undefined } | null;
}

export interface IndexListener {
  onChange?(change: ClusterChange): void;
  onSynced?(): void;
  onConnection?(up: boolean, detail: string): void;
}

/**
 * One key, or several in the order they came. Most IPs belong to one Service or slice, and
 * a string costs far less than a Set per IP.
 */
export type Keys = string | string[];

const NO_KEYS: readonly string[] = [];

export function keysOf(v: Keys | undefined): readonly string[] {
  return v === undefined ? NO_KEYS : typeof v === 'string' ? [v] : v;
}

function addKey(map: Map<string, Keys>, at: string, key: string): void {
  const cur = map.get(at);
  if (cur === undefined) map.set(at, key);
  else if (typeof cur === 'string') {
    if (cur !== key) map.set(at, [cur, key]);
  } else if (!cur.includes(key)) cur.push(key);
}

function removeKey(map: Map<string, Keys>, at: string, key: string): void {
  const cur = map.get(at);
  if (cur === undefined) return;
  if (typeof cur === 'string') {
    if (cur === key) map.delete(at);
    return;
  }
  const rest = cur.filter((k) => k !== key);
  if (rest.length === 0) map.delete(at);
  else map.set(at, rest.length === 1 ? rest[0]! : rest);
}

export class ClusterIndex {
  readonly services = new Map<string, ServiceRecord>();
  readonly slices = new Map<string, EndpointSliceRecord>();
  /** `ns/service` → its slices. Several slices of one service are merged when answering. */
  readonly slicesByService = new Map<string, EndpointSliceRecord[]>();
  readonly namespaces = new Set<string>();
  /** ClusterIP → Service keys, in the order they appeared (the first one answers PTR). */
  readonly servicesByClusterIp = new Map<string, Keys>();
  /** Endpoint IP → keys of the slices holding it. */
  readonly slicesByIp = new Map<string, Keys>();
  readonly pods = new Map<string, PodRecord>();
  /** Pod IP → pod keys. */
  readonly podsByIp = new Map<string, Keys>();

  synced = false;
  connected = true;
  /** What keeps the source from its data that the user must fix (an RBAC denial), if anything. */
  problem: string | undefined;
  /** Unix seconds of the last change to what DNS answers: the SOA serial. */
  serial = Math.floor(Date.now() / 1000);
  private readonly listeners: IndexListener[] = [];

  /** Adds a listener; the function returned removes it (an index outlives a reload). */
  listen(l: IndexListener): () => void {
    this.listeners.push(l);
    return () => {
      const i = this.listeners.indexOf(l);
      if (i >= 0) this.listeners.splice(i, 1);
    };
  }

  /** The sink a KubeSource feeds. */
  readonly apply = (ev: ClusterEvent): void => {
    let change: ClusterChange | null = null;
    switch (ev.op) {
      case 'synced':
        if (this.synced) return;
        this.synced = true;
        for (const l of this.listeners) l.onSynced?.();
        // What the first lists left behind (their JSON, their pages) goes in one collection now.
        settleHeapSoon();
        return;
      case 'connection':
        this.problem = ev.problem;
        if (this.connected === ev.up) return;
        this.connected = ev.up;
        for (const l of this.listeners) l.onConnection?.(ev.up, ev.detail);
        return;
      case 'upsert':
        switch (ev.kind) {
          case 'Service':
            change = this.setService(ev.key, ev.value);
            break;
          case 'EndpointSlice':
            change = this.setSlice(ev.key, ev.value);
            break;
          case 'Namespace':
            change = this.setNamespace(ev.key, ev.value.name);
            break;
          case 'Pod':
            change = this.setPod(ev.key, ev.value);
            break;
        }
        break;
      case 'delete':
        switch (ev.kind) {
          case 'Service':
            change = this.setService(ev.key, undefined);
            break;
          case 'EndpointSlice':
            change = this.setSlice(ev.key, undefined);
            break;
          case 'Namespace':
            change = this.setNamespace(ev.key, undefined);
            break;
          case 'Pod':
            change = this.setPod(ev.key, undefined);
            break;
        }
        break;
    }
    if (change === null) return;
    this.serial = Math.max(this.serial, Math.floor(Date.now() / 1000));
    for (const l of this.listeners) l.onChange?.(change);
  };

  private emptyChange(): ClusterChange {
    return { services: [], ips: [], namespaces: [], pods: [], slice: null };
  }

  private setService(key: string, rec: ServiceRecord | undefined): ClusterChange | null {
    const old = this.services.get(key);
    if (old === undefined && rec === undefined) return null;
    const change = this.emptyChange();
    change.services.push(key);
    if (old !== undefined) {
      for (const ip of old.clusterIPs) {
        removeKey(this.servicesByClusterIp, ip, key);
        change.ips.push(ip);
      }
    }
    if (rec === undefined) {
      this.services.delete(key);
    } else {
      this.services.set(key, rec);
      for (const ip of rec.clusterIPs) {
        addKey(this.servicesByClusterIp, ip, key);
        if (!change.ips.includes(ip)) change.ips.push(ip);
      }
    }
    return change;
  }

  private setSlice(key: string, rec: EndpointSliceRecord | undefined): ClusterChange | null {
    const old = this.slices.get(key);
    if (old === undefined && rec === undefined) return null;
    const change = this.emptyChange();
    if (old !== undefined) {
      const svcKey = `${old.namespace}/${old.service}`;
      change.services.push(svcKey);
      const group = this.slicesByService.get(svcKey);
      if (group !== undefined) {
        const rest = group.filter((x) => x.name !== old.name);
        if (rest.length === 0) this.slicesByService.delete(svcKey);
        else this.slicesByService.set(svcKey, rest);
      }
      for (const ep of old.endpoints) {
        for (const ip of ep.ips) {
          removeKey(this.slicesByIp, ip, key);
          change.ips.push(ip);
        }
      }
    }
    if (rec === undefined) {
      this.slices.delete(key);
    } else {
      this.slices.set(key, rec);
      const svcKey = joinKey(rec.namespace, rec.service);
      if (!change.services.includes(svcKey)) change.services.push(svcKey);
      const group = this.slicesByService.get(svcKey);
      if (group === undefined) this.slicesByService.set(svcKey, [rec]);
      else group.push(rec);
      for (const ep of rec.endpoints) {
        for (const ip of ep.ips) {
          addKey(this.slicesByIp, ip, key);
          if (!change.ips.includes(ip)) change.ips.push(ip);
        }
      }
      change.slice = { record: rec, service: this.services.get(svcKey) };
    }
    return change;
  }

  private setNamespace(key: string, name: string | undefined): ClusterChange | null {
    const ns = name ?? key;
    const had = this.namespaces.has(ns);
    if (name !== undefined) this.namespaces.add(ns);
    else this.namespaces.delete(ns);
    if (had === (name !== undefined)) return null;
    const change = this.emptyChange();
    change.namespaces.push(ns);
    return change;
  }

  private setPod(key: string, rec: PodRecord | undefined): ClusterChange | null {
    const old = this.pods.get(key);
    if (old === undefined && rec === undefined) return null;
    const change = this.emptyChange();
    if (old !== undefined) {
      if (old.ip) removeKey(this.podsByIp, old.ip, key);
      change.pods.push(old);
    }
    if (rec === undefined) {
      this.pods.delete(key);
    } else {
      this.pods.set(key, rec);
      if (rec.ip) addKey(this.podsByIp, rec.ip, key);
      change.pods.push(rec);
    }
    return change;
  }

  /** Whether a pod with this IP lives in this namespace (`pods verified`). */
  hasPod(namespace: string, ip: string): boolean {
    for (const k of keysOf(this.podsByIp.get(ip))) if (this.pods.get(k)?.namespace === namespace) return true;
    return false;
  }
}
