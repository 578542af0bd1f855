// The contract between the server and a plugin folder: a setup function that turns the
// directives of one server block into an instance, which may serve queries, start
// listeners, report readiness, and shut down.

import type { Directive, ServerKey } from '../corefile/types.js';
import type { Handler, Request, HandlerResult } from '../server/request.js';
import type { HttpServices } from '../server/http.js';
import type { ServerServices } from '../server/services.js';
import type { Logger } from '../log.js';
import type { ResourceRecord } from '../dns/message.js';
import type { ClusterIndex } from '../cluster/clusterindex.js';

/** A Service as plugins other than kubernetes see it (k8s_external), from the kubernetes plugin's own index. */
export interface ClusterService {
  kind: 'ClusterIP' | 'Headless' | 'ExternalName';
  /** spec.externalIPs and LoadBalancer ingress IPs, canonical text. */
  externalIPs: readonly string[];
  /** LoadBalancer ingress host names, fully qualified. */
  externalHosts: readonly string[];
  ports: ReadonlyArray<{ name: string; protocol: string; port: number }>;
  /** Ready endpoints of a headless Service: each address with its endpoint name. */
  endpoints(): Array<{ host: string; ip: string }>;
}

/** What the kubernetes plugin publishes on its instance for other plugins, found through the block. */
export interface ClusterView {
  /** The zones it serves, lowercase FQDNs (routes picks the instance serving its `zone`). */
  readonly zones: readonly string[];
  /** Its `pods` mode: a client's namespace is known only with 'verified' (autopath @kubernetes). */
  readonly pods: 'disabled' | 'insecure' | 'verified';
  /** The cluster state it answers from, for a plugin that follows every Service (routes). */
  readonly index: ClusterIndex;
  /** Namespace of the (first) pod with this IP, as CoreDNS's podWithIP; null when none. */
  podNamespace(ip: string): string | null;
  /** Whether the namespace exists and is served (the `namespaces` option). */
  namespaceExposed(namespace: string): boolean;
  service(namespace: string, name: string): ClusterService | undefined;
  /** The Service (`namespace`, `name`) that has `ip` among its external addresses, if any. */
  serviceByExternalIP(ip: string): { namespace: string; name: string } | undefined;
  /** Addresses of this DNS server's own Service (kube-dns), for NS glue. */
  nameserverAddresses(): readonly string[];
  /** Unix seconds of the last change (an SOA serial). */
  serial(): number;
  /** Calls `changed(namespace, name)` for each Service whose answers may differ; returns what stops it. */
  onServiceChange(changed: (namespace: string, name: string) => void): () => void;
}

/**
 * What a plugin that holds whole zones (file, kubernetes) offers the `transfer` plugin, found
 * through the block's instances rather than by import.
 */
export interface ZoneTransferSource {
  /** The zones it can hand out whole (lowercase FQDNs). */
  transferZones(): readonly string[];
  /** Every record of `zone`, its SOA first (and only there); null when the zone is not its own. */
  transferRecords(zone: string): ResourceRecord[] | null;
  /** Calls `changed(zone)` whenever a zone's content changes; returns what stops it. */
  onZoneChange(changed: (zone: string) => void): () => void;
}
import type { Metadata } from '../server/metadata.js';
import type { Invalidation } from '../server/invalidation.js';

export interface BlockInfo {
  keys: ServerKey[];
  /** The block's zones, lowercase FQDNs. */
  zones: string[];
  port: number;
  /** "dns://:53" as CoreDNS labels the server in metrics. */
  serverLabel: string;
  /** Addresses to listen on; empty means all. Set by the `bind` plugin. */
  bindAddresses: string[];
  /** Source file of the block, for error messages. */
  file: string;
}

/** Things a plugin can reach beyond its own block. */
export interface SetupContext {
  block: BlockInfo;
  /** Path of the Corefile (imports are relative to it). */
  corefile: string;
  /** The Corefile and every file it imports (what `reload` watches). */
  configFiles: readonly string[];
  http: HttpServices;
  /**
   * What the server owns across configurations (counters, probe names, enabled plugins, a
   * plugin's per-server state by ServiceKey): take what the handler needs here, at setup.
   */
  services: ServerServices;
  logger: Logger;
  /** Resolve a name through this block's whole chain (for ExternalName targets, loop probes). */
  resolve(req: Request): HandlerResult;
  /** Ask the process to reload its configuration (the `reload` plugin, SIGUSR1). */
  requestReload(reason: string): void;
  /** Every instance of this configuration, filled in before startup (for `ready`). */
  instances(): readonly PluginInstance[];
  /** The instances of this server block (for `coredns_plugin_enabled`). */
  blockInstances(): readonly PluginInstance[];
  /** True once the process is shutting down (lameduck). */
  shuttingDown(): boolean;
  /** This configuration's answer coherence: stores of answers attach, plugins whose data changes invalidate. */
  invalidation: Invalidation;
}

export interface PluginInstance {
  readonly name: string;
  /** Present when the plugin takes part in answering queries. */
  readonly handler?: Handler;
  /** Called after every block is set up, before the listeners take queries. */
  startup?(): Promise<void> | void;
  /** Called when this configuration is replaced (reload) or the process stops. */
  shutdown?(): Promise<void> | void;
  /** For `ready`: false until the plugin can answer correctly. */
  ready?(): boolean;
  /** For `ready`: why the plugin is not ready, when the user must act (e.g. a missing RBAC permission). */
  readyDetail?(): string | undefined;
  /** CoreDNS's metadata.Provider: publish this query's labels (called by the `metadata` plugin). */
  metadata?(req: Request, md: Metadata): void;
  /** For `health`: how long to keep serving after SIGTERM before closing listeners. */
  lameduckMs?(): number;
  /** True when the plugin answers classes other than IN (`chaos`): the server then lets them through to the block. */
  readonly anyClass?: boolean;
  /** The `view` plugin: the block answers a query only when this is true for it. */
  readonly routeFilter?: (req: Request) => boolean;
  /** The `view` plugin's name for the block (metrics' `view` label). */
  readonly viewName?: string;
  /** The kubernetes plugin's view of the cluster, for plugins that answer other names from it. */
  readonly clusterView?: ClusterView;
  /** Present when the plugin's zones can be transferred (AXFR) by the `transfer` plugin. */
  readonly transfer?: ZoneTransferSource;
}

export type PluginSetup = (directives: Directive[], ctx: SetupContext) => PluginInstance | PluginInstance[];
