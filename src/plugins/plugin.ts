// The contract between the server and a plugin folder: a setup function that turns the
// directives of one server block into an instance, which may serve queries, start
// listeners, report readiness, and shut down.

import type { Directive, ServerKey } from '../corefile/types.js';
import type { Handler, Request, HandlerResult } from '../server/request.js';
import type { HttpServices } from '../server/http.js';
import type { Logger } from '../log.js';
import type { ResourceRecord } from '../dns/message.js';

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
  /** For `health`: how long to keep serving after SIGTERM before closing listeners. */
  lameduckMs?(): number;
  /** True when the plugin answers classes other than IN (`chaos`): the server then lets them through to the block. */
  readonly anyClass?: boolean;
  /** The `view` plugin: the block answers a query only when this is true for it. */
  readonly routeFilter?: (req: Request) => boolean;
  /** The `view` plugin's name for the block (metrics' `view` label). */
  readonly viewName?: string;
  /** Present when the plugin's zones can be transferred (AXFR) by the `transfer` plugin. */
  readonly transfer?: ZoneTransferSource;
}

export type PluginSetup = (directives: Directive[], ctx: SetupContext) => PluginInstance | PluginInstance[];
