// The interface that holds the local IPs, so the kernel delivers packets for them to us.
// Upstream makes a `dummy` link; kernels built without the dummy driver refuse that, so we
// fall back to an empty bridge of the same name, which holds addresses just as well.

import { isRecord } from '../kube/types.js';
import type { CommandResult, CommandRunner, SyncCommandRunner } from '../sys/exec.js';
import { runSteps, runStepsSync, type Step, type Steps } from './steps.js';

export type InterfaceErrorType = 'interface_add' | 'interface_check';

export class InterfaceError extends Error {
  readonly code = 'NODECACHE_ERR_INTERFACE';
  constructor(
    message: string,
    readonly errorType: InterfaceErrorType,
  ) {
    super(message);
    this.name = 'InterfaceError';
  }
}

export type LinkKind = 'dummy' | 'bridge';

export interface EnsureResult {
  /** The link was missing and was made (dummy, or bridge when dummy is not available). */
  created: LinkKind | null;
  /** Why the fallback was taken (the kernel's answer to `type dummy`). */
  dummyRefused?: string;
  /** Local IPs that were missing from the link and were added. */
  addedAddresses: string[];
  broughtUp: boolean;
}

export type RemoveResult = 'deleted' | 'absent' | { kept: string };

interface LinkState {
  kind: string;
  up: boolean;
}

const IP = 'ip';

/** `ip -j` prints a JSON array; anything else is null. */
function jsonArray(stdout: string): unknown[] | null {
  try {
    const parsed: unknown = JSON.parse(stdout);
    return Array.isArray(parsed) ? parsed : null;
  } catch {
    return null;
  }
}

function parseLink(stdout: string): LinkState | null {
  const link = jsonArray(stdout)?.[0];
  if (!isRecord(link)) return null;
  const info = isRecord(link.linkinfo) ? link.linkinfo : {};
  const flags = Array.isArray(link.flags) ? link.flags : [];
  return { kind: typeof info.info_kind === 'string' ? info.info_kind : '', up: flags.includes('UP') };
}

function parseAddresses(stdout: string): Set<string> {
  const out = new Set<string>();
  for (const link of jsonArray(stdout) ?? []) {
    if (!isRecord(link) || !Array.isArray(link.addr_info)) continue;
    for (const a of link.addr_info) if (isRecord(a) && typeof a.local === 'string') out.add(a.local);
  }
  return out;
}

const missingLink = (r: CommandResult): boolean => /does not exist|Cannot find device/i.test(r.stderr);
const oneLine = (s: string): string => s.trim().replace(/\s+/g, ' ');

export class NodeInterface {
  constructor(
    readonly name: string,
    private readonly localIPs: readonly string[],
    private readonly run: CommandRunner,
    private readonly runSync: SyncCommandRunner,
  ) {}

  private ip(...args: string[]): Step {
    return { file: IP, args };
  }

  /** The link exists, holds every local IP as a host address, and is up. */
  *ensureSteps(): Steps<EnsureResult> {
    const result: EnsureResult = { created: null, addedAddresses: [], broughtUp: false };
    const show = yield this.ip('-j', '-d', 'link', 'show', 'dev', this.name);
    let link: LinkState | null = null;
    if (show.code === 0) {
      link = parseLink(show.stdout);
      if (!link) throw new InterfaceError(`ip link show ${this.name}: unreadable output`, 'interface_check');
    } else if (!missingLink(show)) {
      throw new InterfaceError(`ip link show ${this.name}: ${oneLine(show.stderr)}`, 'interface_check');
    }
    if (!link) {
      const dummy = yield this.ip('link', 'add', this.name, 'type', 'dummy');
      if (dummy.code === 0) result.created = 'dummy';
      else {
        result.dummyRefused = oneLine(dummy.stderr);
        const bridge = yield this.ip('link', 'add', this.name, 'type', 'bridge');
        if (bridge.code !== 0) {
          throw new InterfaceError(
            `cannot create ${this.name}: type dummy: ${result.dummyRefused}; type bridge: ${oneLine(bridge.stderr)}`,
            'interface_add',
          );
        }
        result.created = 'bridge';
      }
      link = { kind: result.created, up: false };
    }
    const addrs = yield this.ip('-j', 'addr', 'show', 'dev', this.name);
    if (addrs.code !== 0)
      throw new InterfaceError(`ip addr show ${this.name}: ${oneLine(addrs.stderr)}`, 'interface_check');
    const present = parseAddresses(addrs.stdout);
    for (const ip of this.localIPs) {
      if (present.has(ip)) continue;
      // nodad: an IPv6 address must be usable at once, not "tentative" for a second or two.
      const add = yield ip.includes(':')
        ? this.ip('addr', 'add', `${ip}/128`, 'dev', this.name, 'nodad')
        : this.ip('addr', 'add', `${ip}/32`, 'dev', this.name);
      if (add.code !== 0 && !/File exists|already assigned/i.test(add.stderr)) {
        throw new InterfaceError(`cannot add ${ip} to ${this.name}: ${oneLine(add.stderr)}`, 'interface_add');
      }
      result.addedAddresses.push(ip);
    }
    if (!link.up) {
      const up = yield this.ip('link', 'set', 'dev', this.name, 'up');
      if (up.code !== 0)
        throw new InterfaceError(`cannot bring ${this.name} up: ${oneLine(up.stderr)}`, 'interface_add');
      result.broughtUp = true;
    }
    return result;
  }

  /** Deletes the link if it is ours to delete: a dummy, or a bridge with no ports. */
  *removeSteps(): Steps<RemoveResult> {
    const show = yield this.ip('-j', '-d', 'link', 'show', 'dev', this.name);
    if (show.code !== 0) {
      if (missingLink(show)) return 'absent';
      throw new InterfaceError(`ip link show ${this.name}: ${oneLine(show.stderr)}`, 'interface_check');
    }
    const link = parseLink(show.stdout);
    if (link?.kind === 'bridge') {
      const ports = yield this.ip('-j', 'link', 'show', 'master', this.name);
      const list = ports.code === 0 ? jsonArray(ports.stdout || '[]') : null;
      if (!list || list.length > 0) return { kept: `${this.name} is a bridge with ports, not one we made` };
    } else if (link?.kind !== 'dummy') {
      return { kept: `${this.name} is a ${link?.kind || 'physical'} link, not one we made` };
    }
    const del = yield this.ip('link', 'del', 'dev', this.name);
    if (del.code !== 0 && !missingLink(del))
      throw new InterfaceError(`cannot delete ${this.name}: ${oneLine(del.stderr)}`, 'interface_check');
    return 'deleted';
  }

  /** Takes addresses we added off a link we did not make (a failed start on someone else's link). */
  *removeAddressesSteps(ips: readonly string[]): Steps<void> {
    for (const ip of ips) {
      const del = yield this.ip('addr', 'del', ip.includes(':') ? `${ip}/128` : `${ip}/32`, 'dev', this.name);
      if (del.code !== 0 && !/Cannot assign|not found|does not exist|Cannot find device/i.test(del.stderr)) {
        throw new InterfaceError(`cannot remove ${ip} from ${this.name}: ${oneLine(del.stderr)}`, 'interface_check');
      }
    }
  }

  removeAddressesSync(ips: readonly string[]): void {
    runStepsSync(this.removeAddressesSteps(ips), this.runSync);
  }

  ensure(): Promise<EnsureResult> {
    return runSteps(this.ensureSteps(), this.run);
  }

  remove(): Promise<RemoveResult> {
    return runSteps(this.removeSteps(), this.run);
  }

  removeSync(): RemoveResult {
    return runStepsSync(this.removeSteps(), this.runSync);
  }
}
