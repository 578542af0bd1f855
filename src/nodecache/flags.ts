// k8s-dns-node-cache's command line, parsed the way Go's `flag` package does (`-name value`,
// `-name=value`, `--name`, booleans only as `-name` or `-name=false`), validated up front.

import { isIP } from 'node:net';
import { parseDurationMs } from '../corefile/args.js';

export class NodeCacheFlagError extends Error {
  readonly code = 'NODECACHE_ERR_FLAG';
  constructor(message: string) {
    super(message);
    this.name = 'NodeCacheFlagError';
  }
}

export interface NodeCacheFlags {
  /** `-localip`, in order: the first is the link-local address (health, IPVS mode). */
  localIPs: string[];
  family: 4 | 6;
  setupInterface: boolean;
  interfaceName: string;
  setupIptables: boolean;
  syncIntervalMs: number;
  /** Set when `-syncinterval` used upstream's nanosecond spelling ("30ns" meaning 30 s). */
  syncIntervalNote?: string;
  /** `host:port` of the setup-error metrics; '' turns the listener off. */
  metricsListenAddress: string;
  baseCorefile: string;
  /** True when `-basecorefile` was given (a missing file is then an error, not the built-in). */
  baseCorefileExplicit: boolean;
  /** The generated Corefile (`-conf`, else `-corefile`). */
  corefile: string;
  /** kube-dns ConfigMap directory (stubDomains, upstreamNameservers); '' when not used. */
  kubeDnsConfigDir: string;
  kubeDnsConfigDirExplicit: boolean;
  upstreamService: string;
  healthPort: number;
  dnsPort: number;
  skipTeardown: boolean;
  reloadWithSignal: boolean;
  pidfile?: string;
  /** Ours: the node's resolv.conf, whose nameservers fill `__PILLAR__UPSTREAM__SERVERS__`. */
  resolvConf: string;
  /** Ours: fills `__PILLAR__DNS__DOMAIN__` (upstream leaves it to the installer's sed). */
  clusterDomain: string;
  /** Ours: kubeconfig for looking up the upstream Service when its env variable is missing. */
  kubeconfig?: string;
  quiet: boolean;
  version: boolean;
  help: boolean;
}

export const USAGE = `Usage of clusterdns nodecache (k8s-dns-node-cache's flags):
  -localip string
        comma-separated IPs to listen on and intercept, all of one family (required),
        e.g. 169.254.20.10,10.96.0.10 (iptables kube-proxy) or 169.254.20.10 (IPVS)
  -setupinterface
        create the interface holding the local IPs (default true)
  -interfacename string
        name of that interface (default "nodelocaldns")
  -setupiptables
        install the NOTRACK/ACCEPT rules for the local IPs (default true)
  -syncinterval duration
        how often the interface and rules are re-checked: a duration ("60s", "1m") or
        plain seconds ("60") (default 60s)
  -metrics-listen-address string
        address of the setup-error metrics (default "0.0.0.0:9353"; "" turns it off)
  -basecorefile string
        template Corefile (default "/etc/coredns/Corefile.base"; the addon's built-in
        template when that default path does not exist)
  -conf string
        where the generated Corefile is written (default "/etc/Corefile"; alias -corefile)
  -kubednscm string
        kube-dns ConfigMap directory (stubDomains, upstreamNameservers)
        (default: /etc/kube-dns when it exists)
  -upstreamsvc string
        Service whose ClusterIP is the cluster DNS (__PILLAR__CLUSTER__DNS__), read from
        $<NAME>_SERVICE_HOST, else the API; NAMESPACE/NAME is accepted (default "kube-dns")
  -health-port int
        health port opened in the NOTRACK rules (default 8080)
  -dns.port int
        DNS port in the rules and for zones without one (default 53)
  -skipteardown
        leave the interface and rules in place on exit
  -reloadwithsignal
        accepted for compatibility (clusterdns always reloads in-process)
  -pidfile string
        write the process id here once the rules are installed
  -resolvconf string
        resolv.conf whose nameservers fill __PILLAR__UPSTREAM__SERVERS__ (default "/etc/resolv.conf")
  -clusterdomain string
        fills __PILLAR__DNS__DOMAIN__ (default "cluster.local")
  -kubeconfig string
        kubeconfig for the upstream Service lookup outside a Pod
  -quiet
        no start-up banner
  -version
        print the version
`;

type FlagKind = 'bool' | 'string';

const FLAGS: Record<string, FlagKind> = {
  localip: 'string',
  setupinterface: 'bool',
  interfacename: 'string',
  setupiptables: 'bool',
  syncinterval: 'string',
  'metrics-listen-address': 'string',
  basecorefile: 'string',
  corefile: 'string',
  conf: 'string',
  kubednscm: 'string',
  upstreamsvc: 'string',
  'health-port': 'string',
  'dns.port': 'string',
  skipteardown: 'bool',
  reloadwithsignal: 'bool',
  pidfile: 'string',
  resolvconf: 'string',
  clusterdomain: 'string',
  kubeconfig: 'string',
  quiet: 'bool',
  version: 'bool',
  help: 'bool',
  h: 'bool',
};

function parseBool(name: string, text: string): boolean {
  // strconv.ParseBool's spellings.
  if (['1', 't', 'T', 'true', 'TRUE', 'True'].includes(text)) return true;
  if (['0', 'f', 'F', 'false', 'FALSE', 'False'].includes(text)) return false;
  throw new NodeCacheFlagError(`invalid boolean value "${text}" for -${name}`);
}

/** Go `flag` syntax into name → value (booleans as 'true'/'false'). */
function scan(argv: readonly string[]): Map<string, string> {
  const out = new Map<string, string>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--') {
      if (i + 1 < argv.length) throw new NodeCacheFlagError(`unexpected argument "${argv[i + 1]}"`);
      break;
    }
    const m = /^--?([^=-][^=]*)(?:=(.*))?$/s.exec(arg);
    if (!m) throw new NodeCacheFlagError(`unexpected argument "${arg}" (flags start with -)`);
    const name = m[1]!;
    const kind = FLAGS[name];
    if (!kind) throw new NodeCacheFlagError(`flag provided but not defined: -${name}`);
    if (kind === 'bool') {
      out.set(name, m[2] === undefined ? 'true' : String(parseBool(name, m[2])));
      continue;
    }
    if (m[2] !== undefined) {
      out.set(name, m[2]);
      continue;
    }
    if (i + 1 >= argv.length) throw new NodeCacheFlagError(`flag needs an argument: -${name}`);
    out.set(name, argv[++i]!);
  }
  return out;
}

/**
 * `-syncinterval`: a Go duration ("60s", "1m30s") or plain seconds ("60"). Upstream multiplies
 * the parsed duration by a second again, so there only "60ns" meant 60 s; that spelling is
 * read the same way here (with a note) so existing manifests keep their meaning.
 */
export function parseSyncInterval(text: string): { ms: number; note?: string } {
  const t = text.trim();
  let ms: number | null;
  let note: string | undefined;
  if (/^\d+(\.\d+)?$/.test(t)) ms = Number(t) * 1000;
  else if (/^\d+ns$/.test(t)) {
    ms = Number(t.slice(0, -2)) * 1000;
    note = `-syncinterval ${t} read as ${t.slice(0, -2)}s, as k8s-dns-node-cache does (write "${t.slice(0, -2)}s")`;
  } else ms = parseDurationMs(t);
  if (ms === null || !Number.isFinite(ms))
    throw new NodeCacheFlagError(
      `invalid value "${text}" for -syncinterval: want a duration such as 60s or 1m, or plain seconds`,
    );
  if (ms < 1000) throw new NodeCacheFlagError(`-syncinterval ${text} is too short: at least 1s`);
  if (ms > 24 * 3_600_000) throw new NodeCacheFlagError(`-syncinterval ${text} is too long: at most 24h`);
  return { ms, note };
}

function parsePort(name: string, text: string): number {
  const n = /^\d+$/.test(text.trim()) ? Number(text.trim()) : NaN;
  if (!Number.isInteger(n) || n < 1 || n > 65535)
    throw new NodeCacheFlagError(`invalid value "${text}" for -${name}: want a port number 1-65535`);
  return n;
}

/** `-localip`: comma-separated, each a literal IP, all one family, no repeats. */
export function parseLocalIPs(text: string): { ips: string[]; family: 4 | 6 } {
  const ips = text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  if (ips.length === 0)
    throw new NodeCacheFlagError('-localip is required: the IPs to listen on, e.g. -localip 169.254.20.10,10.96.0.10');
  let family: 4 | 6 | 0 = 0;
  const seen = new Set<string>();
  for (const ip of ips) {
    const f = isIP(ip);
    if (f === 0) throw new NodeCacheFlagError(`-localip: "${ip}" is not an IP address`);
    if (family !== 0 && f !== family)
      throw new NodeCacheFlagError(`-localip: ${ips.join(',')} mixes IPv4 and IPv6; all local IPs must be one family`);
    family = f as 4 | 6;
    if (seen.has(ip)) throw new NodeCacheFlagError(`-localip: ${ip} is given twice`);
    seen.add(ip);
  }
  return { ips, family: family as 4 | 6 };
}

const IFNAME = /^[A-Za-z0-9_.-]{1,15}$/;

export function parseNodeCacheFlags(argv: readonly string[], exists: (path: string) => boolean): NodeCacheFlags {
  const v = scan(argv);
  const help = v.get('help') === 'true' || v.get('h') === 'true';
  const version = v.get('version') === 'true';
  const base = {
    quiet: v.get('quiet') === 'true',
    version,
    help,
  };
  if (help || version) {
    return {
      ...base,
      localIPs: [],
      family: 4,
      setupInterface: false,
      interfaceName: 'nodelocaldns',
      setupIptables: false,
      syncIntervalMs: 60_000,
      metricsListenAddress: '',
      baseCorefile: '',
      baseCorefileExplicit: false,
      corefile: '',
      kubeDnsConfigDir: '',
      kubeDnsConfigDirExplicit: false,
      upstreamService: 'kube-dns',
      healthPort: 8080,
      dnsPort: 53,
      skipTeardown: false,
      reloadWithSignal: false,
      resolvConf: '/etc/resolv.conf',
      clusterDomain: 'cluster.local',
    };
  }
  const { ips, family } = parseLocalIPs(v.get('localip') ?? '');
  const sync = parseSyncInterval(v.get('syncinterval') ?? '60s');
  const interfaceName = v.get('interfacename') ?? 'nodelocaldns';
  // The name goes to `ip` as an argument; still, refuse anything the kernel would not take.
  if (!IFNAME.test(interfaceName))
    throw new NodeCacheFlagError(`-interfacename "${interfaceName}": want 1-15 letters, digits, "_", "." or "-"`);
  const upstreamService = v.get('upstreamsvc') ?? 'kube-dns';
  if (!/^([a-z0-9]([-a-z0-9]*[a-z0-9])?\/)?[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(upstreamService)) {
    throw new NodeCacheFlagError(`-upstreamsvc "${upstreamService}" is not a Service name (NAME or NAMESPACE/NAME)`);
  }
  const clusterDomain = (v.get('clusterdomain') ?? 'cluster.local').replace(/\.$/, '');
  if (!/^[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?(\.[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?)*$/.test(clusterDomain)) {
    throw new NodeCacheFlagError(`-clusterdomain "${clusterDomain}" is not a domain name`);
  }
  const metrics = v.get('metrics-listen-address') ?? '0.0.0.0:9353';
  if (metrics !== '' && !/^(\[[0-9A-Fa-f:.]+\]|[^:\s]*):\d+$/.test(metrics)) {
    throw new NodeCacheFlagError(`-metrics-listen-address "${metrics}": want HOST:PORT`);
  }
  const explicitCm = v.get('kubednscm');
  const kubeDnsConfigDir = explicitCm ?? (exists('/etc/kube-dns') ? '/etc/kube-dns' : '');
  return {
    ...base,
    localIPs: ips,
    family,
    setupInterface: v.get('setupinterface') !== 'false',
    interfaceName,
    setupIptables: v.get('setupiptables') !== 'false',
    syncIntervalMs: sync.ms,
    syncIntervalNote: sync.note,
    metricsListenAddress: metrics,
    baseCorefile: v.get('basecorefile') ?? '/etc/coredns/Corefile.base',
    baseCorefileExplicit: v.has('basecorefile'),
    corefile: v.get('conf') ?? v.get('corefile') ?? '/etc/Corefile',
    kubeDnsConfigDir,
    kubeDnsConfigDirExplicit: explicitCm !== undefined && explicitCm !== '',
    upstreamService,
    healthPort: parsePort('health-port', v.get('health-port') ?? '8080'),
    dnsPort: parsePort('dns.port', v.get('dns.port') ?? '53'),
    skipTeardown: v.get('skipteardown') === 'true',
    reloadWithSignal: v.get('reloadwithsignal') === 'true',
    pidfile: v.get('pidfile') || undefined,
    resolvConf: v.get('resolvconf') ?? '/etc/resolv.conf',
    clusterDomain,
    kubeconfig: v.get('kubeconfig') || undefined,
  };
}
