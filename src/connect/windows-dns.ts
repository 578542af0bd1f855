// Windows: NRPT rules send the cluster domains to the cluster server (the split); the link that
// reaches it gets the server too when it has no DNS servers of its own (a VPN/tun adapter), and
// the cluster search suffixes go first in the global search list. All through PowerShell.
//
// Scripts go in -EncodedCommand (base64 UTF-16LE), so no command line is ever re-parsed, and every
// value inside a script is a single-quoted literal (quotes doubled), never interpolated.
import type { Logger } from '../log.js';
import { clusterSearchDomains, type BackendContext, type DnsSetup } from './dns-setup.js';
import type { CommandRunner } from '../sys/exec.js';
import type { WindowsRecord } from './state.js';

export const NRPT_COMMENT = 'clusterdns';
export const POWERSHELL = 'powershell.exe';

/** A PowerShell single-quoted string literal. PowerShell also ends such strings at the typographic quotes U+2018–U+201B, so those are doubled too. */
export function psQuote(value: string): string {
  return `'${value.replace(/['\u2018\u2019\u201a\u201b]/g, (c) => c + c)}'`;
}

export function psArray(values: readonly string[]): string {
  return `@(${values.map(psQuote).join(', ')})`;
}

export function powershellArgs(script: string): string[] {
  return [
    '-NoProfile',
    '-NonInteractive',
    '-ExecutionPolicy',
    'Bypass',
    '-EncodedCommand',
    Buffer.from(script, 'utf16le').toString('base64'),
  ];
}

/** The script inside powershellArgs(), for logs and tests. */
export function scriptOf(args: readonly string[]): string {
  const i = args.indexOf('-EncodedCommand');
  return i === -1 ? '' : Buffer.from(args[i + 1] ?? '', 'base64').toString('utf16le');
}

/** Prints the interface that reaches `ip`, its DNS servers (both families) and the global suffix list, as JSON. */
export function inspectScript(ip: string): string {
  return [
    "$ErrorActionPreference = 'Stop'",
    "$ProgressPreference = 'SilentlyContinue'",
    `$route = Find-NetRoute -RemoteIPAddress ${psQuote(ip)} | Where-Object { $_.InterfaceIndex } | Select-Object -First 1`,
    '$index = if ($route) { [int]$route.InterfaceIndex } else { 0 }',
    '$servers = @()',
    'if ($index -gt 0) { $servers = @(Get-DnsClientServerAddress -InterfaceIndex $index | ForEach-Object { $_.ServerAddresses }) }',
    '$suffixes = @((Get-DnsClientGlobalSetting).SuffixSearchList)',
    '[pscustomobject]@{ interfaceIndex = $index; servers = @($servers); suffixSearchList = @($suffixes) } | ConvertTo-Json -Compress',
  ].join('\n');
}

export interface WindowsPlan {
  domains: readonly string[];
  serverIp: string;
  interfaceIndex: number | null;
  /** The whole new global suffix list (ours first, then what was there). */
  suffixSearchList: readonly string[] | null;
}

const removeOurRules = `Get-DnsClientNrptRule | Where-Object { $_.Comment -eq ${psQuote(NRPT_COMMENT)} } | Remove-DnsClientNrptRule -Force`;

export function applyScript(plan: WindowsPlan): string {
  const lines = ["$ErrorActionPreference = 'Stop'", removeOurRules];
  for (const d of plan.domains) {
    lines.push(
      `Add-DnsClientNrptRule -Namespace ${psQuote('.' + d)} -NameServers ${psQuote(plan.serverIp)} -Comment ${psQuote(NRPT_COMMENT)}`,
    );
  }
  if (plan.interfaceIndex !== null) {
    lines.push(
      `Set-DnsClientServerAddress -InterfaceIndex ${Math.trunc(plan.interfaceIndex)} -ServerAddresses ${psArray([plan.serverIp])}`,
    );
  }
  if (plan.suffixSearchList !== null)
    lines.push(`Set-DnsClientGlobalSetting -SuffixSearchList ${psArray(plan.suffixSearchList)}`);
  lines.push('Clear-DnsClientCache');
  return lines.join('\n');
}

export function revertScript(record: WindowsRecord): string {
  const lines = ["$ErrorActionPreference = 'Continue'", removeOurRules];
  if (record.interfaceDns) {
    const { interfaceIndex, previous } = record.interfaceDns;
    lines.push(
      previous.length === 0
        ? `Set-DnsClientServerAddress -InterfaceIndex ${Math.trunc(interfaceIndex)} -ResetServerAddresses`
        : `Set-DnsClientServerAddress -InterfaceIndex ${Math.trunc(interfaceIndex)} -ServerAddresses ${psArray(previous)}`,
    );
  }
  if (record.addedSuffixes.length > 0) {
    lines.push(`$ours = ${psArray(record.addedSuffixes)}`);
    lines.push(
      'Set-DnsClientGlobalSetting -SuffixSearchList @(@((Get-DnsClientGlobalSetting).SuffixSearchList) | Where-Object { $ours -notcontains $_ })',
    );
  }
  lines.push('Clear-DnsClientCache');
  return lines.join('\n');
}

interface Inspection {
  interfaceIndex: number;
  servers: string[];
  suffixSearchList: string[];
}

function strings(v: unknown): string[] {
  if (typeof v === 'string') return [v];
  return Array.isArray(v) ? v.filter((s): s is string => typeof s === 'string' && s !== '') : [];
}

export function parseInspection(stdout: string): Inspection {
  const empty: Inspection = { interfaceIndex: 0, servers: [], suffixSearchList: [] };
  const text = stdout.trim();
  if (text === '') return empty;
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return empty;
  }
  if (typeof v !== 'object' || v === null) return empty;
  const o = v as Record<string, unknown>;
  const idx =
    typeof o['interfaceIndex'] === 'number' && Number.isInteger(o['interfaceIndex']) ? o['interfaceIndex'] : 0;
  return { interfaceIndex: idx, servers: strings(o['servers']), suffixSearchList: strings(o['suffixSearchList']) };
}

/** Turns what the machine has into the plan and the undo record. */
export function planWindows(
  setup: DnsSetup,
  search: readonly string[],
  found: Inspection,
): { plan: WindowsPlan; record: WindowsRecord } {
  const added = search.filter((s) => !found.suffixSearchList.includes(s));
  const useInterface = found.interfaceIndex > 0 && found.servers.length === 0;
  return {
    plan: {
      domains: setup.domains,
      serverIp: setup.server.ip,
      interfaceIndex: useInterface ? found.interfaceIndex : null,
      suffixSearchList: added.length ? [...added, ...found.suffixSearchList] : null,
    },
    record: {
      nrptComment: NRPT_COMMENT,
      interfaceDns: useInterface ? { interfaceIndex: found.interfaceIndex, previous: [] } : null,
      addedSuffixes: added,
    },
  };
}

export async function applyWindows(setup: DnsSetup, ctx: BackendContext): Promise<boolean> {
  const { runner, log } = ctx;
  if (setup.server.port !== 53) {
    log.warn(
      `Windows' DNS client only uses port 53, not ${setup.server.port}; resolver left unchanged: cluster names resolve only through the hosts block`,
    );
    return false;
  }
  const inspected = await runner(POWERSHELL, powershellArgs(inspectScript(setup.server.ip)));
  if (inspected.code !== 0) {
    log.warn(
      `PowerShell could not read the DNS client settings (${inspected.stderr.trim().split('\n')[0]}); resolver left unchanged`,
    );
    return false;
  }
  const found = parseInspection(inspected.stdout);
  const { plan, record } = planWindows(setup, clusterSearchDomains(setup, log), found);
  if (found.interfaceIndex > 0 && plan.interfaceIndex === null) {
    log.info(
      `interface ${found.interfaceIndex} has DNS servers of its own; leaving them, the NRPT rules route the cluster domains`,
    );
  }
  ctx.record({ windows: record });
  const r = await runner(POWERSHELL, powershellArgs(applyScript(plan)));
  if (r.code !== 0) {
    log.error(`PowerShell failed to add the NRPT rules (${r.stderr.trim().split('\n')[0]}); undoing`);
    await revertWindows(record, runner, log);
    ctx.record({ windows: undefined });
    return false;
  }
  log.info(`NRPT rules send ${setup.domains.map((d) => '.' + d).join(' ')} to ${setup.server.ip}`);
  return true;
}

export async function revertWindows(record: WindowsRecord, runner: CommandRunner, log: Logger): Promise<void> {
  const r = await runner(POWERSHELL, powershellArgs(revertScript(record)));
  if (r.code !== 0) log.warn(`PowerShell revert reported: ${r.stderr.trim().split('\n')[0]}`);
  else log.info(`NRPT rules with comment "${record.nrptComment}" removed`);
}
