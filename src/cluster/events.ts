// The one interface between where cluster state comes from (a KubeSource: API reflectors
// or manifest files) and what answers from it (a ClusterIndex). Every event is a plain
// JSON-serialisable object, so a primary process could run the only watcher and send
// these to its workers over IPC, each worker feeding its own index.

import type { EndpointSliceRecord, NamespaceRecord, PodRecord, ServiceRecord } from './objects.js';

/** Where the cluster state comes from. */
export type SourceConfig =
  | { kind: 'in-cluster' }
  | { kind: 'endpoint'; url: string; tls: { cert: string; key: string; ca: string } | null }
  | { kind: 'kubeconfig'; file: string; context: string | undefined }
  | { kind: 'manifests'; path: string };

/** How often manifest files are checked for changes. */
export const MANIFEST_POLL_MS = 2000;

export type ClusterKind = 'Service' | 'EndpointSlice' | 'Namespace' | 'Pod';

export type ClusterEvent =
  | { op: 'upsert'; kind: 'Service'; key: string; value: ServiceRecord }
  | { op: 'upsert'; kind: 'EndpointSlice'; key: string; value: EndpointSliceRecord }
  | { op: 'upsert'; kind: 'Namespace'; key: string; value: NamespaceRecord }
  | { op: 'upsert'; kind: 'Pod'; key: string; value: PodRecord }
  | { op: 'delete'; kind: ClusterKind; key: string }
  /** Every watched collection has been listed once (sent once). */
  | { op: 'synced' }
  /** The source can (not) reach its data; what is known keeps being served either way. `problem`: what the user must fix (e.g. RBAC). */
  | { op: 'connection'; up: boolean; detail: string; problem?: string };

export type ClusterSink = (event: ClusterEvent) => void;

export interface KubeSource {
  /** For log lines: `endpoint http://…`, `manifests cluster.yaml`. */
  readonly description: string;
  /**
   * Begins feeding `sink`. Resolves once the source is running (not synced); rejects on a
   * configuration problem the user must fix (unreadable kubeconfig, missing manifests).
   */
  start(sink: ClusterSink): Promise<void>;
  stop(): Promise<void>;
}

/** IPC message types between a worker's RelayedSource and the primary's relay (relay.ts). */
export const RELAY_SUBSCRIBE = 'clusterdns:kube-subscribe';
export const RELAY_UNSUBSCRIBE = 'clusterdns:kube-unsubscribe';
export const RELAY_ACK = 'clusterdns:kube-ack';
