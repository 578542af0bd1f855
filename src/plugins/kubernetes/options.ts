// The kubernetes plugin's settings, as parsed from its Corefile block (setup.ts).

export type PodMode = 'disabled' | 'insecure' | 'verified';

/** Where the cluster state comes from. */
export type SourceConfig =
  | { kind: 'in-cluster' }
  | { kind: 'endpoint'; url: string; tls: { cert: string; key: string; ca: string } | null }
  | { kind: 'kubeconfig'; file: string; context: string | undefined }
  | { kind: 'manifests'; path: string };

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
export const MANIFEST_POLL_MS = 2000;
