// The contract between the server and a plugin folder: a setup function that turns the
// directives of one server block into an instance, which may serve queries, start
// listeners, report readiness, and shut down.

import type { Directive, ServerKey } from '../corefile/types.js';
import type { Handler, Request, HandlerResult } from '../server/request.js';
import type { HttpServices } from '../server/http.js';
import type { Logger } from '../log.js';
import type { Metadata } from '../server/metadata.js';

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
  /** CoreDNS's metadata.Provider: publish this query's labels (called by the `metadata` plugin). */
  metadata?(req: Request, md: Metadata): void;
  /** For `health`: how long to keep serving after SIGTERM before closing listeners. */
  lameduckMs?(): number;
}

export type PluginSetup = (directives: Directive[], ctx: SetupContext) => PluginInstance | PluginInstance[];
