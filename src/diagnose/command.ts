// `clusterdns diagnose NAME`: a lookup walked the way a pod's resolver (glibc) does it, the
// cluster DNS checked the way people do it with kubectl, and a verdict with what to check
// next. Exit 0 only when the name resolves, 1 when it does not, 2 on a usage error.

import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { QType, typeFromString, typeToString } from '../dns/constants.js';
import { canonicalIP } from '../dns/ip.js';
import { nameToLabels, NameError } from '../dns/name.js';
import { inClusterConnection, kubeconfigConnection, type ApiConnection } from '../kube/connection.js';
import { KubeClient } from '../kube/http.js';
import { parseDurationMs } from '../corefile/args.js';
import { planCandidates } from '../dns/search.js';
import { brokenStep, checkClusterDns, listServices } from './cluster.js';
import { candidatesJson, REPORT_VERSION, roundMs, type ClusterJson, type DiagnoseReport } from './report.js';
import { renderText, wantColour } from './render.js';
import { optionsText, parseResolvConf } from '../sys/resolvconf.js';
import { looksExternal, parseServiceQuery, suggestServices, type Suggestion } from './suggest.js';
import { serverAddress, type ServerAddress } from './transport.js';
import { buildVerdict } from './verdict.js';
import { VERSION } from '../version.js';
import { normalizeArgv, unknownFlagMessage } from '../cli-flags.js';
import { walkCandidates } from './walk.js';

export const USAGE = `Usage: clusterdns diagnose NAME [flags]

Walks the lookup of NAME the way a pod's resolver (glibc) does: the search list and ndots
of resolv.conf, A and AAAA, timeouts and attempts, then says what failed and what to check.

Flags:
  --type TYPE           ask for one type only (A, AAAA, SRV, TXT, ...); default A and AAAA
  --resolv-conf FILE    resolver configuration (default /etc/resolv.conf)
  --server IP[:PORT]    ask this server instead of resolv.conf's nameservers (repeatable)
  --timeout DURATION    first try's timeout instead of resolv.conf's timeout (e.g. 500ms, 2s)
  --kubeconfig FILE     check kube-dns (Service, EndpointSlices, pods) and suggest Service
                        names through this cluster; in a pod, in-cluster credentials are used
  --context NAME        kubeconfig context (default: current-context)
  --json                print the report as JSON (see src/diagnose/README.md)
  --version             print the version
  -h, --help            this text

Exit status: 0 resolved, 1 not resolved, 2 usage error.
`;

class UsageError extends Error {
  readonly code = 'DIAGNOSE_ERR_USAGE';
}

export interface DiagnoseOptions {
  name: string;
  qtypes: number[] | null;
  resolvConf: string;
  servers: ServerAddress[] | null;
  timeoutMs: number | null;
  kubeconfig: string | null;
  context: string | null;
  json: boolean;
}

/** `IP`, `IP:PORT`, `[IPv6]:PORT` or a bare IPv6 address; port 53 by default. */
export function parseServerFlag(text: string): ServerAddress {
  let host = text;
  let port = 53;
  const bracket = /^\[([^\]]+)\](?::(\d+))?$/.exec(text);
  if (bracket) {
    host = bracket[1]!;
    if (bracket[2] !== undefined) port = Number(bracket[2]);
  } else if ((text.match(/:/g) ?? []).length === 1) {
    const i = text.indexOf(':');
    host = text.slice(0, i);
    port = Number(text.slice(i + 1));
  }
  const zone = host.indexOf('%');
  const ip = canonicalIP(zone >= 0 ? host.slice(0, zone) : host);
  if (ip === null) throw new UsageError(`--server "${text}": not an IP address (IP, IP:PORT or [IPv6]:PORT)`);
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new UsageError(`--server "${text}": invalid port`);
  return serverAddress(zone >= 0 ? ip + host.slice(zone) : ip, port);
}

const OPTIONS = {
  type: { type: 'string' },
  'resolv-conf': { type: 'string' },
  server: { type: 'string', multiple: true },
  timeout: { type: 'string' },
  kubeconfig: { type: 'string' },
  context: { type: 'string' },
  json: { type: 'boolean' },
  version: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

export function parseDiagnoseArgs(argv: string[]): DiagnoseOptions | 'help' | 'version' {
  let parsed;
  try {
    parsed = parseArgs({
      args: normalizeArgv(argv),
      options: OPTIONS,
      allowPositionals: true,
      strict: true,
    });
  } catch (e) {
    throw new UsageError(unknownFlagMessage(e as Error, Object.keys(OPTIONS)));
  }
  const { values, positionals } = parsed;
  if (values.help) return 'help';
  if (values.version) return 'version';
  if (positionals.length !== 1)
    throw new UsageError(positionals.length === 0 ? 'NAME is missing' : `one NAME only (got ${positionals.join(' ')})`);
  const name = positionals[0]!;
  if (name === '' || name === '.' || name.startsWith('.') || name.includes('..'))
    throw new UsageError(`"${name}" is not a host name`);
  try {
    nameToLabels(name.endsWith('.') ? name : `${name}.`);
  } catch (e) {
    if (e instanceof NameError) throw new UsageError(`"${name}": ${e.message}`);
    throw e;
  }
  let qtypes: number[] | null = null;
  if (values.type !== undefined) {
    const t = typeFromString(values.type);
    if (t === undefined || t === QType.OPT || t === QType.AXFR || t === QType.IXFR)
      throw new UsageError(`--type "${values.type}": not a query type`);
    qtypes = [t];
  }
  let timeoutMs: number | null = null;
  if (values.timeout !== undefined) {
    timeoutMs = parseDurationMs(values.timeout);
    if (timeoutMs === null || timeoutMs <= 0 || timeoutMs > 300_000)
      throw new UsageError(`--timeout "${values.timeout}": a duration such as 500ms or 2s (at most 5m)`);
  }
  if (values.context !== undefined && values.kubeconfig === undefined)
    throw new UsageError('--context needs --kubeconfig');
  return {
    name,
    qtypes,
    resolvConf: values['resolv-conf'] ?? '/etc/resolv.conf',
    servers: values.server ? values.server.map(parseServerFlag) : null,
    timeoutMs,
    kubeconfig: values.kubeconfig ?? null,
    context: values.context ?? null,
    json: values.json === true,
  };
}

/** The API connection to use: --kubeconfig, or the pod's service account when in a pod. */
async function clusterConnection(
  o: DiagnoseOptions,
  env: NodeJS.ProcessEnv,
): Promise<{ conn: ApiConnection | null; source: string; error: string | null } | null> {
  if (o.kubeconfig) {
    const source = `kubeconfig ${o.kubeconfig}${o.context ? ` (context ${o.context})` : ''}`;
    try {
      const conn = await kubeconfigConnection(o.kubeconfig, o.context ?? undefined);
      return { conn, source: conn.source ?? source, error: null };
    } catch (e) {
      return { conn: null, source, error: (e as Error).message };
    }
  }
  if (env.KUBERNETES_SERVICE_HOST && env.KUBERNETES_SERVICE_PORT) {
    try {
      return { conn: await inClusterConnection({ env }), source: 'in-cluster', error: null };
    } catch (e) {
      return { conn: null, source: 'in-cluster', error: (e as Error).message };
    }
  }
  return null;
}

export async function diagnose(o: DiagnoseOptions, env: NodeJS.ProcessEnv = process.env): Promise<DiagnoseReport> {
  const started = performance.now();
  let text: string;
  try {
    text = readFileSync(o.resolvConf, 'utf8');
  } catch (e) {
    throw new UsageError(
      `cannot read ${o.resolvConf}: ${(e as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (e as Error).message}`,
    );
  }
  const conf = parseResolvConf(text, o.resolvConf, { hostname: hostname() });
  const servers = o.servers ?? conf.nameservers.map((ns) => serverAddress(ns, 53));
  const qtypes = o.qtypes ?? (conf.noAaaa ? [QType.A] : [QType.A, QType.AAAA]);
  const timeoutMs = o.timeoutMs ?? conf.timeout * 1000;
  const apiTimeoutMs = Math.max(5000, o.timeoutMs ?? 0);
  const plan = planCandidates(o.name, conf);

  const target = await clusterConnection(o, env);
  const client = target?.conn ? new KubeClient(target.conn, { requestTimeoutMs: apiTimeoutMs }) : null;
  try {
    const checksP = client ? checkClusterDns(client, conf.nameservers, apiTimeoutMs) : Promise.resolve(null);
    const walk = await walkCandidates(
      plan,
      qtypes,
      {
        servers,
        timeoutMs,
        attempts: conf.attempts,
        rotate: conf.rotate,
        udpMode: conf.singleRequestReopen ? 'reopen' : conf.singleRequest ? 'sequential' : 'parallel',
        useVc: conf.useVc,
        edns0: conf.edns0,
        trustAd: conf.trustAd,
      },
      o.timeoutMs === null ? 1000 : 1,
    );
    const checks = await checksP;
    let cluster: ClusterJson | null = null;
    if (target) {
      cluster = {
        source: target.source,
        error: target.error,
        checks: checks ?? [],
        broken: checks ? (brokenStep(checks)?.step ?? null) : null,
      };
    }

    const serviceQuery = looksExternal(o.name, conf.search) ? null : parseServiceQuery(o.name, conf.search);
    let suggestions: Suggestion[] | null = null;
    let namespaces: string[] | null = null;
    // Suggest names when the cluster said "no such name" for a candidate in its domain.
    const clusterSuffix = serviceQuery ? `.${serviceQuery.clusterDomain}.` : null;
    const clusterNxdomain =
      clusterSuffix !== null &&
      walk.steps.some(
        (s) => s.result?.outcome === 'nxdomain' && s.candidate.name.toLowerCase().endsWith(clusterSuffix),
      );
    if (client && cluster && serviceQuery && walk.final !== 'answered' && clusterNxdomain) {
      try {
        const listed = await listServices(client, apiTimeoutMs);
        // Only a real namespace list can say a namespace is missing (a Service-less one still exists).
        namespaces = listed.namespaces && listed.namespaces.length > 0 ? listed.namespaces : null;
        suggestions = suggestServices(serviceQuery, listed.services);
      } catch (e) {
        cluster.error ??= `could not list Services for suggestions: ${(e as Error).message}`;
      }
    }

    const verdict = buildVerdict({
      name: o.name,
      qtypes,
      walk,
      conf,
      servers: servers.map((s) => s.label),
      serversFrom: o.servers ? '--server' : 'resolv.conf',
      cluster,
      suggestions,
      serviceQuery,
      namespaces,
    });
    return {
      version: REPORT_VERSION,
      name: o.name,
      types: qtypes.map(typeToString),
      resolvConf: {
        file: conf.file,
        nameservers: conf.nameservers,
        search: conf.search,
        searchSource: conf.searchSource,
        ndots: conf.ndots,
        timeout: conf.timeout,
        attempts: conf.attempts,
        options: optionsText(conf).split(' '),
        problems: conf.problems,
      },
      servers: servers.map((s) => s.label),
      serversFrom: o.servers ? '--server' : 'resolv.conf',
      timeoutMs,
      rule: plan.rule,
      candidates: candidatesJson(walk),
      verdict,
      cluster,
      durationMs: roundMs(performance.now() - started),
    };
  } finally {
    client?.close();
  }
}

export async function run(argv: string[]): Promise<void> {
  let opts: DiagnoseOptions | 'help' | 'version';
  try {
    opts = parseDiagnoseArgs(argv);
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    process.stderr.write(`clusterdns diagnose: ${e.message}\n\n${USAGE}`);
    process.exitCode = 2;
    return;
  }
  if (opts === 'help') {
    process.stdout.write(USAGE);
    return;
  }
  if (opts === 'version') {
    process.stdout.write(`clusterdns-${VERSION} diagnose\n`);
    return;
  }
  let report: DiagnoseReport;
  try {
    report = await diagnose(opts);
  } catch (e) {
    if (!(e instanceof UsageError)) throw e;
    process.stderr.write(`clusterdns diagnose: ${e.message}\n`);
    process.exitCode = 2;
    return;
  }
  process.stdout.write(
    opts.json
      ? JSON.stringify(report, null, 2) + '\n'
      : renderText(report, wantColour(process.stdout.isTTY, process.env)),
  );
  const code = report.verdict.status === 'resolved' ? 0 : 1;
  process.exitCode = code;
  // Everything is closed by now; this only guards against a handle someone else left open.
  setTimeout(() => process.exit(code), 2000).unref();
}
