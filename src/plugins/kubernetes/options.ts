// The kubernetes plugin's settings, as parsed from its Corefile block (setup.ts).

import type { SourceConfig } from '../../cluster/events.js';

export type PodMode = 'disabled' | 'insecure' | 'verified';

export interface KubernetesOptions {
  /** Lowercase FQDNs, forward and reverse, in the order given. */
  zones: string[];
  /** The first forward zone: every PTR target is built with it. */
  primaryZone: string;
  source: SourceConfig;
  /** The Corefile line that chose `source` (kubeconfig or endpoint), for errors about it. */
  sourceLine?: { file: string; line: number };
  /** Names under other namespaces give NXDOMAIN; empty = all namespaces. */
  namespaces: ReadonlySet<string>;
  namespaceLabels: string;
  labels: string;
  pods: PodMode;
  endpointPodNames: boolean;
  ttl: number;
  noEndpoints: boolean;
  /** null: fallthrough off. */
  fallthrough: string[] | null;
  ignoreEmptyService: boolean;
  startupTimeoutMs: number;
  /** How often manifest files are checked for changes. */
  manifestPollMs: number;
}

export const DEFAULT_TTL = 5;
export const DEFAULT_STARTUP_TIMEOUT_MS = 5000;
