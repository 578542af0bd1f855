// Linux: split DNS through systemd-resolved (resolvectl). The cluster server and routing domains
// go on the link that reaches the server, with default-route off, so every other name stays with
// the host's own servers. /etc/resolv.conf is never written.
import type { Logger } from '../log.js';
import { formatCommand, type CommandRunner } from '../sys/exec.js';
import { clusterSearchDomains, fallbackText, type BackendContext, type DnsSetup } from './dns-setup.js';
import type { ServerAddress } from './flags.js';

/** The link `ip route get` says packets to `ip` leave by. */
export async function routeLink(runner: CommandRunner, ip: string): Promise<string | null> {
  const r = await runner('ip', ['route', 'get', ip]);
  if (r.code !== 0) return null;
  const m = /\bdev\s+(\S+)/.exec(r.stdout);
  return m ? m[1]! : null;
}

/** `resolvectl dns|domain LINK` prints `Link 3 (eth0): a b c`; the words after the colon. */
export function parseLinkValues(stdout: string): string[] {
  const line = stdout.split('\n').find((l) => /^Link \d+ \(/.test(l));
  if (!line) return [];
  const colon = line.indexOf('):');
  return colon === -1
    ? []
    : line
        .slice(colon + 2)
        .trim()
        .split(/\s+/)
        .filter((s) => s !== '');
}

function serverArg(s: ServerAddress): string {
  if (s.port === 53) return s.ip;
  return s.family === 6 ? `[${s.ip}]:${s.port}` : `${s.ip}:${s.port}`;
}

/** The resolvectl invocations that configure `link`, in order. */
export function resolvectlApplyArgs(
  link: string,
  setup: DnsSetup,
  search: readonly string[],
): [dns: string[], domain: string[], defaultRoute: string[]] {
  // Search entries (in search order) route and expand; a cluster domain not searched only routes.
  const domains = [...search, ...setup.domains.filter((d) => !search.includes(d)).map((d) => `~${d}`)];
  return [
    ['dns', link, serverArg(setup.server)],
    ['domain', link, ...domains],
    ['default-route', link, 'false'],
  ];
}

export function resolvectlRevertArgs(link: string): string[] {
  return ['revert', link];
}

function otherManagersWarning(present: string[], setup: DnsSetup): string {
  const found = present.length
    ? `; ${present.join(' and ')} ${present.length > 1 ? 'are' : 'is'} here, but would make the cluster server this machine's server for every name`
    : '';
  const rule = setup.domains
    .map((d) => `server=/${d}/${setup.server.ip}${setup.server.port === 53 ? '' : `#${setup.server.port}`}`)
    .join(' ');
  return (
    `no systemd-resolved on this machine (resolvectl not found), the only resolver manager connect can give per-domain servers${found}. ` +
    `The resolver is left unchanged: ${fallbackText(setup)}. ` +
    `For cluster DNS, give a split-DNS resolver the cluster domains yourself (dnsmasq: ${rule}), or run systemd-resolved`
  );
}

async function installed(runner: CommandRunner, file: string): Promise<boolean> {
  const r = await runner(file, ['--version']);
  return r.code !== 127;
}

export async function applyResolved(setup: DnsSetup, ctx: BackendContext): Promise<boolean> {
  const { runner, log } = ctx;
  let link = setup.interface ?? null;
  if (link === null) {
    link = await routeLink(runner, setup.server.ip);
    if (link === null) {
      log.warn(
        `cannot tell which link reaches ${setup.server.ip} (\`ip route get\` failed); resolver left unchanged, pass --interface`,
      );
      return false;
    }
  }
  if (link === 'lo') {
    log.warn(
      `${setup.server.ip} is reached over the loopback device, which systemd-resolved takes no per-link DNS on; resolver left unchanged, pass --interface with a link that reaches it`,
    );
    return false;
  }
  const dns = await runner('resolvectl', ['dns', link]);
  if (dns.code !== 0) {
    if (dns.code === 127) {
      const others: string[] = [];
      if (await installed(runner, 'nmcli')) others.push('NetworkManager');
      if (await installed(runner, 'resolvconf')) others.push('resolvconf');
      log.warn(otherManagersWarning(others, setup));
    } else {
      log.warn(
        `systemd-resolved did not answer for link ${link} (${firstLine(dns.stderr)}); resolver left unchanged: ${fallbackText(setup)}`,
      );
    }
    return false;
  }
  const domain = await runner('resolvectl', ['domain', link]);
  const search = clusterSearchDomains(setup, log);
  const plan = resolvectlApplyArgs(link, setup, search);
  const currentServers = parseLinkValues(dns.stdout);
  const currentDomains = domain.code === 0 ? parseLinkValues(domain.stdout) : [];
  const ours = sameSet(currentServers, [plan[0][2]!]) && sameSet(currentDomains, plan[1].slice(2));
  if ((currentServers.length > 0 || currentDomains.length > 0) && !ours) {
    log.warn(
      `link ${link} already has DNS settings from another manager (servers: ${currentServers.join(' ') || 'none'}; domains: ${currentDomains.join(' ') || 'none'}); ` +
        `replacing them could cut this machine off its own DNS, so the resolver is left unchanged. Pass --interface with a link that has no DNS of its own (a VPN or tun link)`,
    );
    return false;
  }
  const record: ResolvedRecord = { link, server: plan[0][2]!, domains: plan[1].slice(2) };
  ctx.record({ resolved: record });
  if (!(await runPlan(plan, runner, log))) {
    await revertResolved(record, runner, log);
    ctx.record({ resolved: undefined });
    return false;
  }
  log.info(
    `systemd-resolved: link ${link} sends ${record.domains.join(' ')} to ${record.server}; default route off, other names unchanged`,
  );
  return true;
}

export interface ResolvedRecord {
  link: string;
  /** The server as given to resolvectl, to recognise our settings on the link. */
  server: string;
  domains: string[];
}

async function runPlan(plan: string[][], runner: CommandRunner, log: Logger): Promise<boolean> {
  for (const args of plan) {
    const r = await runner('resolvectl', args);
    if (r.code !== 0) {
      log.error(`${formatCommand('resolvectl', args)} failed: ${firstLine(r.stderr)}; undoing`);
      return false;
    }
  }
  await runner('resolvectl', ['flush-caches']);
  return true;
}

/** What the link holds now: our settings, nothing (resolved restarted, link re-created), or someone else's. */
export async function linkStatus(
  record: ResolvedRecord,
  runner: CommandRunner,
): Promise<'ours' | 'empty' | 'foreign' | 'unknown'> {
  const dns = await runner('resolvectl', ['dns', record.link]);
  if (dns.code !== 0) return 'unknown';
  const servers = parseLinkValues(dns.stdout);
  if (servers.length === 0) return 'empty';
  return servers.includes(record.server) ? 'ours' : 'foreign';
}

/**
 * Re-applies our settings when the link lost them (systemd-resolved restarted: per-link settings
 * made over D-Bus do not survive it). Returns false once another manager has taken the link over.
 */
export async function reapplyResolved(record: ResolvedRecord, runner: CommandRunner, log: Logger): Promise<boolean> {
  const status = await linkStatus(record, runner);
  if (status === 'foreign') {
    log.warn(`link ${record.link} now has DNS settings from another manager; leaving them and no longer watching it`);
    return false;
  }
  if (status !== 'empty') return true;
  const plan = [
    ['dns', record.link, record.server],
    ['domain', record.link, ...record.domains],
    ['default-route', record.link, 'false'],
  ];
  if (await runPlan(plan, runner, log))
    log.info(`systemd-resolved lost the settings of link ${record.link} (restarted?); applied them again`);
  return true;
}

export async function revertResolved(record: ResolvedRecord, runner: CommandRunner, log: Logger): Promise<void> {
  const { link } = record;
  if ((await linkStatus(record, runner)) === 'foreign') {
    log.warn(`link ${link} has DNS settings from another manager now; not reverting it`);
    return;
  }
  const r = await runner('resolvectl', resolvectlRevertArgs(link));
  if (r.code !== 0 && !/no such device|failed to resolve interface|unknown interface/i.test(r.stderr)) {
    log.warn(`resolvectl revert ${link} failed: ${firstLine(r.stderr)}`);
    return;
  }
  await runner('resolvectl', ['flush-caches']);
  log.info(`systemd-resolved: link ${link} reverted`);
}

function sameSet(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((x) => b.includes(x));
}

function firstLine(s: string): string {
  return s.trim().split('\n')[0] || 'no message';
}
