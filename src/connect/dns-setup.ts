// What every OS backend is given, and what it may use while changing the machine's resolver.
import type { Logger } from '../log.js';
import type { CommandRunner } from '../sys/exec.js';
import type { ServerAddress } from './flags.js';
import type { ConnectState } from './state.js';

export interface DnsSetup {
  server: ServerAddress;
  /** Cluster domains: only names under these go to the cluster server. */
  domains: readonly string[];
  search: readonly string[];
  /** Linux: the link to configure instead of the one the route to the server uses. */
  interface?: string;
  /** A route stream keeps an /etc/hosts block (--routes): what still resolves cluster names when the resolver cannot be set up. */
  hostsBlock?: boolean;
}

/** What still resolves cluster names when the resolver was left unchanged, for the warnings. */
export function fallbackText(setup: DnsSetup): string {
  return setup.hostsBlock
    ? 'cluster Service names resolve only through the /etc/hosts block kept from --routes'
    : 'without --routes (the /etc/hosts block of cluster Services) nothing on this machine resolves cluster names';
}

export interface BackendContext {
  runner: CommandRunner;
  log: Logger;
  /** Merges an undo record into the state file; called before the change it undoes. */
  record(patch: Partial<ConnectState>): void;
}

/**
 * Search domains that lie inside a cluster domain. Any other suffix would send names that are
 * not the cluster's to the cluster server, so it is left out with a warning.
 */
export function clusterSearchDomains(setup: DnsSetup, log: Logger): string[] {
  const out: string[] = [];
  for (const s of setup.search) {
    if (setup.domains.some((d) => s === d || s.endsWith(`.${d}`))) out.push(s);
    else
      log.warn(
        `search domain ${s} is not inside ${setup.domains.join(', ')}; not adding it, so that other names stay with this machine's resolver`,
      );
  }
  return out;
}
