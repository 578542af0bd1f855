// Flags of `clusterdns connect` and `clusterdns disconnect`, validated before anything changes.
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { resolve } from 'node:path';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { normalizeArgv, unknownFlagMessage } from '../cli-flags.js';

export type TargetOs = 'linux' | 'darwin' | 'windows';

export interface ServerAddress {
  ip: string;
  port: number;
  family: 4 | 6;
}

export interface ConnectFlags {
  server: ServerAddress;
  domains: string[];
  search: string[];
  routesUrl?: URL;
  token?: string;
  namespaces: string[];
  root?: string;
  interface?: string;
  caFile?: string;
  os: TargetOs;
  streamIdleMs: number;
  help: boolean;
  version: boolean;
}

export interface DisconnectFlags {
  root?: string;
  cleanup: boolean;
  timeoutMs: number;
  os: TargetOs;
  help: boolean;
  version: boolean;
}

export class ConnectFlagError extends Error {
  readonly code = 'CONNECT_ERR_FLAG';
  constructor(message: string) {
    super(message);
    this.name = 'ConnectFlagError';
  }
}

export const CONNECT_USAGE = `Usage: clusterdns connect --server IP[:PORT] [flags]

Points this machine's resolver at a cluster DNS server for the cluster domains only, and keeps
/etc/hosts entries for the cluster's Services in sync from a route stream. Runs until Ctrl-C,
SIGTERM or \`clusterdns disconnect\`, then undoes everything.

  --server IP[:PORT]      the cluster DNS server, e.g. 10.96.0.10 or [fd00::10]:5353 (port 53)
  --domains LIST          cluster domains routed to it (default cluster.local)
  --search LIST           search domains (default <first namespace>.svc.<domain>,svc.<domain>,<domain>)
  --routes URL            route stream, e.g. http://10.96.0.11:9002/routes (optional; needs a token)
  --token TOKEN           bearer token for the route stream (or --token-file, $CLUSTERDNS_ROUTES_TOKEN)
  --token-file FILE       read the token from FILE (keeps it out of the process list)
  --namespaces LIST       namespaces to stream routes for (default: the server's choice)
  --ca FILE               CA bundle for an https route stream
  --interface NAME        link to configure on Linux (default: the one \`ip route get\` names)
  --stream-idle-timeout S reconnect when the stream is silent this long (default 120)
  --root DIR              treat DIR as / for the files it writes (etc/hosts, etc/resolver,
                          var/lib/clusterdns); for tests and containers
  --os linux|darwin|windows  configure as for that OS (default: this one); another OS's
                          commands are printed, not run
  --version               print the version
  -h, --help              this text

Flags take one or two dashes (-server or --server).
`;

export const DISCONNECT_USAGE = `Usage: clusterdns disconnect [--cleanup] [--root DIR] [--timeout S]

Stops a running \`clusterdns connect\` (it undoes its own changes), or, when none is running,
undoes what a crashed one left from its state file.

  --cleanup     do not signal anything: only restore from the state file after a crash
                (refused while the recorded process is still running)
  --root DIR    the --root the connect ran with
  --timeout S   how long to wait for the running connect to exit (default 15)
  --version     print the version
`;

const LABEL = /^[a-z0-9_]([-a-z0-9_]{0,61}[a-z0-9_])?$/;

/** A domain as connect writes it into resolver files and commands: lowercase, no trailing dot. */
export function parseDomain(raw: string, flag: string): string {
  const d = raw.trim().toLowerCase().replace(/\.$/, '');
  if (d === '' || d.length > 253 || !d.split('.').every((l) => LABEL.test(l))) {
    throw new ConnectFlagError(`${flag}: "${raw}" is not a domain name`);
  }
  return d;
}

function list(raw: string | undefined): string[] {
  if (raw === undefined) return [];
  return raw
    .split(/[,\s]+/)
    .map((s) => s.trim())
    .filter((s) => s !== '');
}

export function parseServer(raw: string): ServerAddress {
  let host = raw.trim();
  let port = 53;
  const bracketed = /^\[([^\]]+)\](?::(\d+))?$/.exec(host);
  if (bracketed) {
    host = bracketed[1]!;
    if (bracketed[2] !== undefined) port = Number(bracketed[2]);
  } else {
    const v4 = /^([^:]+):(\d+)$/.exec(host);
    if (v4) {
      host = v4[1]!;
      port = Number(v4[2]);
    }
  }
  const family = isIP(host);
  if (family === 0)
    throw new ConnectFlagError(`--server: "${raw}" is not IP[:PORT] (an IPv6 address with a port is [IP]:PORT)`);
  if (!Number.isInteger(port) || port < 1 || port > 65535)
    throw new ConnectFlagError(`--server: port ${port} is out of range`);
  return { ip: host, port, family: family === 6 ? 6 : 4 };
}

export function formatServer(s: ServerAddress): string {
  return s.family === 6 ? `[${s.ip}]:${s.port}` : `${s.ip}:${s.port}`;
}

function parseOs(raw: string | undefined): TargetOs {
  if (raw === undefined)
    return process.platform === 'darwin' ? 'darwin' : process.platform === 'win32' ? 'windows' : 'linux';
  if (raw === 'linux' || raw === 'darwin' || raw === 'windows') return raw;
  throw new ConnectFlagError(`--os: "${raw}" is not linux, darwin or windows`);
}

function parseSeconds(raw: string | undefined, flag: string, dflt: number): number {
  if (raw === undefined) return dflt * 1000;
  const n = Number(raw);
  if (!Number.isFinite(n) || n <= 0 || n > 86_400)
    throw new ConnectFlagError(`${flag}: "${raw}" is not a number of seconds`);
  return Math.round(n * 1000);
}

function parse(
  argv: string[],
  options: NonNullable<ParseArgsConfig['options']>,
): Record<string, string | boolean | undefined> {
  try {
    const { values } = parseArgs({
      args: normalizeArgv(argv),
      options: { ...options, version: { type: 'boolean' } },
      strict: true,
      allowPositionals: false,
    });
    return values;
  } catch (err) {
    throw new ConnectFlagError(unknownFlagMessage(err as Error, [...Object.keys(options), 'version']));
  }
}

/** `--root` as an absolute path: the state file must name files any later cwd can find. */
function rootOf(v: string | boolean | undefined): string | undefined {
  return typeof v === 'string' ? resolve(v) : undefined;
}

function str(v: string | boolean | undefined): string | undefined {
  return typeof v === 'string' ? v : undefined;
}

export function parseConnectFlags(argv: string[], env: NodeJS.ProcessEnv = process.env): ConnectFlags {
  const v = parse(argv, {
    server: { type: 'string' },
    domains: { type: 'string' },
    search: { type: 'string' },
    routes: { type: 'string' },
    token: { type: 'string' },
    'token-file': { type: 'string' },
    namespaces: { type: 'string' },
    ca: { type: 'string' },
    interface: { type: 'string' },
    'stream-idle-timeout': { type: 'string' },
    root: { type: 'string' },
    os: { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  });
  const os = parseOs(str(v['os']));
  const help = v['help'] === true;
  const version = v['version'] === true;
  const serverRaw = str(v['server']);
  if (serverRaw === undefined) {
    if (help || version)
      return {
        server: { ip: '0.0.0.0', port: 53, family: 4 },
        domains: [],
        search: [],
        namespaces: [],
        os,
        streamIdleMs: 0,
        help,
        version,
      };
    throw new ConnectFlagError('--server is required');
  }
  const server = parseServer(serverRaw);
  const domains = list(str(v['domains']) ?? 'cluster.local').map((d) => parseDomain(d, '--domains'));
  if (domains.length === 0) throw new ConnectFlagError('--domains: give at least one cluster domain');
  const namespaces = list(str(v['namespaces']));
  for (const ns of namespaces) {
    if (!/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(ns))
      throw new ConnectFlagError(`--namespaces: "${ns}" is not a namespace name`);
  }
  const searchRaw = str(v['search']);
  const firstNs = namespaces[0] ?? 'default';
  const search =
    searchRaw === undefined
      ? [`${firstNs}.svc.${domains[0]}`, `svc.${domains[0]}`, domains[0]!]
      : list(searchRaw).map((d) => parseDomain(d, '--search'));

  let routesUrl: URL | undefined;
  const routesRaw = str(v['routes']);
  if (routesRaw !== undefined) {
    try {
      routesUrl = new URL(routesRaw);
    } catch {
      throw new ConnectFlagError(`--routes: "${routesRaw}" is not a URL`);
    }
    if (routesUrl.protocol !== 'http:' && routesUrl.protocol !== 'https:')
      throw new ConnectFlagError('--routes: only http and https URLs');
  }
  let token = str(v['token']);
  const tokenFile = str(v['token-file']);
  if (token === undefined && tokenFile !== undefined) {
    try {
      token = readFileSync(tokenFile, 'utf8').trim();
    } catch (err) {
      throw new ConnectFlagError(`--token-file: ${(err as Error).message}`);
    }
  }
  token ??= env['CLUSTERDNS_ROUTES_TOKEN'];
  if (token !== undefined && !/^[\x21-\x7e]+$/.test(token))
    throw new ConnectFlagError('--token: must be printable ASCII without spaces');
  // The routes plugin always asks for a bearer token; without one every request would get 401.
  if (routesUrl !== undefined && (token === undefined || token === '')) {
    throw new ConnectFlagError(
      "--routes needs the stream's bearer token: --token-file FILE, --token TOKEN or $CLUSTERDNS_ROUTES_TOKEN (the routes plugin's token or tokenfile)",
    );
  }
  const iface = str(v['interface']);
  if (iface !== undefined && !/^[\w.:@-]{1,64}$/.test(iface))
    throw new ConnectFlagError(`--interface: "${iface}" is not an interface name`);
  return {
    server,
    domains: [...new Set(domains)],
    search: [...new Set(search)],
    routesUrl,
    token,
    namespaces,
    root: rootOf(v['root']),
    interface: iface,
    caFile: str(v['ca']),
    os,
    streamIdleMs: parseSeconds(str(v['stream-idle-timeout']), '--stream-idle-timeout', 120),
    help,
    version,
  };
}

export function parseDisconnectFlags(argv: string[]): DisconnectFlags {
  const v = parse(argv, {
    cleanup: { type: 'boolean' },
    root: { type: 'string' },
    timeout: { type: 'string' },
    os: { type: 'string' },
    help: { type: 'boolean', short: 'h' },
  });
  return {
    root: rootOf(v['root']),
    cleanup: v['cleanup'] === true,
    timeoutMs: parseSeconds(str(v['timeout']), '--timeout', 15),
    os: parseOs(str(v['os'])),
    help: v['help'] === true,
    version: v['version'] === true,
  };
}
