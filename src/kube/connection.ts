// How to reach the Kubernetes API: in-cluster service account, a kubeconfig file, or a bare
// endpoint (CoreDNS's `endpoint URL` + `tls CERT KEY CACERT`). The result is an ApiConnection;
// http.ts turns it into requests.
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { dirname, isAbsolute, resolve } from 'node:path';
import { contentFreeMessage } from '../text/redact.js';
import { isRecord } from './types.js';

export interface ApiConnection {
  server: URL;
  ca?: Buffer;
  cert?: Buffer;
  key?: Buffer;
  insecureSkipTLSVerify?: boolean;
  /** SNI and certificate name to expect when it differs from the server URL's host. */
  tlsServerName?: string;
  /** Bearer token for the next request; may re-read a file or run an exec plugin. */
  token(): Promise<string | undefined>;
  /** Client certificate from an exec plugin; overrides cert/key and may change over time. */
  clientCertificate?(): Promise<{ cert: Buffer; key: Buffer } | undefined>;
  /** Drop cached credentials (called after a 401) so the next request fetches fresh ones. */
  invalidate?(): void;
  /** Default namespace (kubeconfig context or the service account's), if known. */
  namespace?: string;
  /** Where the settings came from, for messages: `in-cluster`, `kubeconfig FILE (context X)`, `endpoint URL`. */
  source?: string;
}

/** A configuration problem the user must fix; the message names the file and field. */
export class KubeConfigError extends Error {
  readonly code = 'KUBE_ERR_CONFIG';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'KubeConfigError';
  }
}

const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';
const DEFAULT_TOKEN_REFRESH_MS = 60_000; // client-go re-reads the projected token file every minute

export interface InClusterOptions {
  env?: NodeJS.ProcessEnv;
  tokenFile?: string;
  caFile?: string;
  namespaceFile?: string;
  /** Re-read the token file at most this often (ms); the kubelet rotates it. Default 60 s. */
  tokenRefreshMs?: number;
}

/** The Pod's service account: KUBERNETES_SERVICE_HOST/PORT, the projected token and CA. */
export async function inClusterConnection(opts: InClusterOptions = {}): Promise<ApiConnection> {
  const env = opts.env ?? process.env;
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT;
  if (!host || !port) {
    throw new KubeConfigError(
      'in-cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set (not running in a Pod? use kubeconfig or endpoint)',
    );
  }
  const server = parseServerUrl(
    `https://${host.includes(':') ? `[${host}]` : host}:${port}`,
    'in-cluster: KUBERNETES_SERVICE_HOST/PORT',
  );
  const tokenFile = opts.tokenFile ?? `${SERVICE_ACCOUNT_DIR}/token`;
  const caFile = opts.caFile ?? `${SERVICE_ACCOUNT_DIR}/ca.crt`;
  const ca = await readConfigFile(caFile, 'in-cluster: service account CA');
  const tokens = new FileTokenSource(
    tokenFile,
    opts.tokenRefreshMs ?? DEFAULT_TOKEN_REFRESH_MS,
    'in-cluster: service account token',
  );
  await tokens.token(); // fail now, with a clear message, rather than on the first request
  let namespace: string | undefined;
  try {
    namespace = (await readFile(opts.namespaceFile ?? `${SERVICE_ACCOUNT_DIR}/namespace`, 'utf8')).trim() || undefined;
  } catch {
    namespace = undefined; // optional: only used as a default
  }
  return {
    server,
    ca,
    token: () => tokens.token(),
    invalidate: () => tokens.invalidate(),
    namespace,
    source: 'in-cluster',
  };
}

/** CoreDNS `endpoint URL` with optional `tls CERT KEY CACERT`; no bearer token. */
export async function endpointConnection(
  url: string,
  tls?: { cert: string; key: string; ca: string },
): Promise<ApiConnection> {
  const server = parseServerUrl(url, 'endpoint');
  const conn: ApiConnection = { server, token: async () => undefined, source: `endpoint ${url}` };
  if (tls) {
    conn.cert = await readConfigFile(tls.cert, 'tls: client certificate');
    conn.key = await readConfigFile(tls.key, 'tls: client key');
    conn.ca = await readConfigFile(tls.ca, 'tls: CA certificate');
  }
  return conn;
}

/** A kubeconfig file: the given context (or current-context), its cluster and user. */
export async function kubeconfigConnection(file: string, context?: string): Promise<ApiConnection> {
  const text = await readConfigFile(file, 'kubeconfig').then((b) => b.toString('utf8'));
  let doc: unknown;
  try {
    // Loaded on use: the YAML library adds to the RSS of every process that imports it.
    const { parse: parseYaml } = await import('yaml');
    doc = parseYaml(text);
  } catch (err) {
    throw new KubeConfigError(`kubeconfig ${file}: invalid YAML: ${contentFreeMessage(err)}`, { cause: err });
  }
  if (!isRecord(doc)) throw new KubeConfigError(`kubeconfig ${file}: not a mapping (is this a kubeconfig file?)`);
  const where = (field: string) => `kubeconfig ${file}: ${field}`;
  const baseDir = dirname(resolve(file));
  const rel = (p: string) => (isAbsolute(p) ? p : resolve(baseDir, p));

  const contextName = context ?? optString(doc, 'current-context', where('current-context'));
  if (!contextName) throw new KubeConfigError(where('no context given and current-context is not set'));
  const ctx = namedEntry(doc, 'contexts', 'context', contextName, where);
  const clusterName = reqString(ctx, 'cluster', where(`contexts[${contextName}].context.cluster`));
  const userName = optString(ctx, 'user', where(`contexts[${contextName}].context.user`));
  const namespace = optString(ctx, 'namespace', where(`contexts[${contextName}].context.namespace`));

  const cluster = namedEntry(doc, 'clusters', 'cluster', clusterName, where);
  const cf = (f: string) => where(`clusters[${clusterName}].cluster.${f}`);
  const server = parseServerUrl(reqString(cluster, 'server', cf('server')), cf('server'));
  const conn: ApiConnection = {
    server,
    token: async () => undefined,
    source: `kubeconfig ${file} (context ${contextName})`,
  };
  if (namespace) conn.namespace = namespace;
  const skip = cluster['insecure-skip-tls-verify'];
  if (skip !== undefined && typeof skip !== 'boolean')
    throw new KubeConfigError(`${cf('insecure-skip-tls-verify')}: must be true or false`);
  if (skip) conn.insecureSkipTLSVerify = true;
  const tlsServerName = optString(cluster, 'tls-server-name', cf('tls-server-name'));
  if (tlsServerName) conn.tlsServerName = tlsServerName;
  conn.ca = await dataOrFile(cluster, 'certificate-authority', cf, rel);

  if (!userName) return conn;
  const user = namedEntry(doc, 'users', 'user', userName, where);
  const uf = (f: string) => where(`users[${userName}].user.${f}`);
  conn.cert = await dataOrFile(user, 'client-certificate', uf, rel);
  conn.key = await dataOrFile(user, 'client-key', uf, rel);
  if ((conn.cert === undefined) !== (conn.key === undefined)) {
    throw new KubeConfigError(
      `${uf(conn.cert ? 'client-key' : 'client-certificate')}: missing (client certificate and key go together)`,
    );
  }
  if (user['auth-provider'] !== undefined) {
    throw new KubeConfigError(
      `${uf('auth-provider')}: auth-provider plugins are not supported; use an exec credential plugin`,
    );
  }
  if (user.username !== undefined || user.password !== undefined) {
    throw new KubeConfigError(
      `${uf('username')}: basic authentication is not supported by Kubernetes any more; use a token or client certificate`,
    );
  }

  const token = optString(user, 'token', uf('token'));
  const tokenFile = optString(user, 'tokenFile', uf('tokenFile'));
  const exec = user.exec;
  if (token) {
    conn.token = async () => token; // kubeconfig docs: token takes precedence over tokenFile
  } else if (tokenFile) {
    const source = new FileTokenSource(rel(tokenFile), DEFAULT_TOKEN_REFRESH_MS, uf('tokenFile'));
    conn.token = () => source.token();
    conn.invalidate = () => source.invalidate();
  } else if (exec !== undefined) {
    if (!isRecord(exec)) throw new KubeConfigError(`${uf('exec')}: must be a mapping`);
    const plugin = new ExecCredentialPlugin(parseExecConfig(exec, uf, baseDir), {
      server: server.href,
      'insecure-skip-tls-verify': conn.insecureSkipTLSVerify,
      'tls-server-name': conn.tlsServerName,
      'certificate-authority-data': conn.ca?.toString('base64'),
    });
    conn.token = async () => (await plugin.credential()).token;
    conn.invalidate = () => plugin.invalidate();
    if (!conn.cert) {
      conn.clientCertificate = async () => {
        const c = await plugin.credential();
        return c.cert && c.key ? { cert: c.cert, key: c.key } : undefined;
      };
    }
  }
  return conn;
}

// ---- token file ----

/** A bearer token file re-read at most every `refreshMs`; keeps the last good token if a re-read fails. */
export class FileTokenSource {
  #cached: string | undefined;
  #readAt = 0;
  #pending: Promise<string> | undefined;

  constructor(
    readonly file: string,
    readonly refreshMs: number,
    private readonly label: string,
  ) {}

  async token(): Promise<string> {
    if (this.#cached !== undefined && Date.now() - this.#readAt < this.refreshMs) return this.#cached;
    this.#pending ??= this.#read().finally(() => (this.#pending = undefined));
    return this.#pending;
  }

  invalidate(): void {
    this.#readAt = 0;
  }

  async #read(): Promise<string> {
    try {
      const token = (await readFile(this.file, 'utf8')).trim();
      if (!token) throw new Error('file is empty');
      this.#cached = token;
      this.#readAt = Date.now();
      return token;
    } catch (err) {
      // A rotation in progress can briefly remove the file; the old token is usually still valid.
      if (this.#cached !== undefined) return this.#cached;
      throw new KubeConfigError(`${this.label}: cannot read token file ${this.file}: ${errorMessage(err)}`, {
        cause: err,
      });
    }
  }
}

// ---- exec credential plugins ----

interface ExecConfig {
  command: string;
  args: string[];
  env: Record<string, string>;
  apiVersion: string;
  interactiveMode?: string;
  provideClusterInfo: boolean;
  label: string;
}

interface ExecCredential {
  token?: string;
  cert?: Buffer;
  key?: Buffer;
  /** ms since epoch; undefined = valid until a 401 says otherwise. */
  expiresAt?: number;
}

const EXEC_TIMEOUT_MS = 60_000;

function parseExecConfig(exec: Record<string, unknown>, uf: (f: string) => string, baseDir: string): ExecConfig {
  const command = reqString(exec, 'command', uf('exec.command'));
  const apiVersion = reqString(exec, 'apiVersion', uf('exec.apiVersion'));
  if (!apiVersion.startsWith('client.authentication.k8s.io/')) {
    throw new KubeConfigError(
      `${uf('exec.apiVersion')}: "${apiVersion}" is not a client.authentication.k8s.io version`,
    );
  }
  const argsRaw = exec.args ?? [];
  if (!Array.isArray(argsRaw) || !argsRaw.every((a): a is string => typeof a === 'string')) {
    throw new KubeConfigError(`${uf('exec.args')}: must be a list of strings`);
  }
  const env: Record<string, string> = {};
  const envRaw = exec.env ?? [];
  if (!Array.isArray(envRaw)) throw new KubeConfigError(`${uf('exec.env')}: must be a list of {name, value}`);
  for (const [i, e] of envRaw.entries()) {
    if (!isRecord(e) || typeof e.name !== 'string' || typeof e.value !== 'string') {
      throw new KubeConfigError(`${uf(`exec.env[${i}]`)}: must have string name and value`);
    }
    env[e.name] = e.value;
  }
  const interactiveMode = optString(exec, 'interactiveMode', uf('exec.interactiveMode'));
  if (interactiveMode === 'Always') {
    throw new KubeConfigError(
      `${uf('exec.interactiveMode')}: Always needs a terminal; clusterdns runs non-interactively`,
    );
  }
  // client-go: a command path with a separator is relative to the kubeconfig's directory.
  const resolved = !isAbsolute(command) && command.includes('/') ? resolve(baseDir, command) : command;
  return {
    command: resolved,
    args: argsRaw,
    env,
    apiVersion,
    interactiveMode,
    provideClusterInfo: exec.provideClusterInfo === true,
    label: uf('exec'),
  };
}

/** Runs the plugin on demand, caches its credential until expirationTimestamp, one run at a time. */
class ExecCredentialPlugin {
  #cached: ExecCredential | undefined;
  #pending: Promise<ExecCredential> | undefined;

  constructor(
    private readonly config: ExecConfig,
    private readonly cluster: Record<string, string | boolean | undefined>,
  ) {}

  async credential(): Promise<ExecCredential> {
    const c = this.#cached;
    if (c && (c.expiresAt === undefined || Date.now() < c.expiresAt)) return c;
    this.#pending ??= this.#run().finally(() => (this.#pending = undefined));
    return this.#pending;
  }

  invalidate(): void {
    this.#cached = undefined;
  }

  async #run(): Promise<ExecCredential> {
    const { command, args, label, apiVersion } = this.config;
    const spec: Record<string, unknown> = { interactive: false };
    if (this.config.provideClusterInfo) spec.cluster = this.cluster;
    const env = {
      ...process.env,
      ...this.config.env,
      KUBERNETES_EXEC_INFO: JSON.stringify({ apiVersion, kind: 'ExecCredential', spec }),
    };
    const stdout = await new Promise<string>((ok, fail) => {
      execFile(command, args, { env, timeout: EXEC_TIMEOUT_MS, maxBuffer: 4 << 20 }, (err, out, errOut) => {
        if (err) {
          const detail = errOut.trim().split('\n').slice(-3).join(' | ');
          fail(
            new KubeConfigError(
              `${label}: running "${command}" failed: ${err.message.split('\n')[0]}${detail ? `: ${detail}` : ''}`,
              { cause: err },
            ),
          );
        } else ok(out);
      });
    });
    let parsed: unknown;
    try {
      parsed = JSON.parse(stdout);
    } catch (err) {
      throw new KubeConfigError(
        `${label}: "${command}" did not print an ExecCredential JSON object: ${contentFreeMessage(err)}`,
        { cause: err },
      );
    }
    if (!isRecord(parsed) || parsed.kind !== 'ExecCredential') {
      throw new KubeConfigError(`${label}: "${command}" output is not kind ExecCredential`);
    }
    if (parsed.apiVersion !== apiVersion) {
      throw new KubeConfigError(
        `${label}: "${command}" answered apiVersion ${String(parsed.apiVersion)}, kubeconfig asked for ${apiVersion}`,
      );
    }
    const status = parsed.status;
    if (!isRecord(status)) throw new KubeConfigError(`${label}: ExecCredential from "${command}" has no status`);
    const cred: ExecCredential = {};
    if (typeof status.token === 'string' && status.token) cred.token = status.token;
    if (typeof status.clientCertificateData === 'string' && typeof status.clientKeyData === 'string') {
      cred.cert = Buffer.from(status.clientCertificateData);
      cred.key = Buffer.from(status.clientKeyData);
    }
    if (!cred.token && !cred.cert) {
      throw new KubeConfigError(
        `${label}: ExecCredential from "${command}" has neither status.token nor status.clientCertificateData+clientKeyData`,
      );
    }
    if (typeof status.expirationTimestamp === 'string') {
      const t = Date.parse(status.expirationTimestamp);
      if (Number.isNaN(t))
        throw new KubeConfigError(
          `${label}: status.expirationTimestamp "${status.expirationTimestamp}" is not a timestamp`,
        );
      cred.expiresAt = t;
    }
    this.#cached = cred;
    return cred;
  }
}

// ---- small readers that name the field on failure ----

function parseServerUrl(value: string, field: string): URL {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new KubeConfigError(`${field}: "${value}" is not a URL`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    throw new KubeConfigError(`${field}: "${value}" must start with https:// or http://`);
  }
  return url;
}

async function readConfigFile(path: string, what: string): Promise<Buffer> {
  try {
    return await readFile(path);
  } catch (err) {
    throw new KubeConfigError(`${what}: cannot read ${path}: ${errorMessage(err)}`, { cause: err });
  }
}

/** `<field>-data` (base64) wins over `<field>` (a path relative to the kubeconfig). */
async function dataOrFile(
  obj: Record<string, unknown>,
  field: string,
  where: (f: string) => string,
  rel: (p: string) => string,
): Promise<Buffer | undefined> {
  const data = optString(obj, `${field}-data`, where(`${field}-data`));
  if (data) {
    const buf = Buffer.from(data, 'base64');
    if (buf.length === 0) throw new KubeConfigError(`${where(`${field}-data`)}: not valid base64`);
    return buf;
  }
  const path = optString(obj, field, where(field));
  return path ? readConfigFile(rel(path), where(field)) : undefined;
}

function namedEntry(
  doc: Record<string, unknown>,
  list: 'clusters' | 'users' | 'contexts',
  field: 'cluster' | 'user' | 'context',
  name: string,
  where: (f: string) => string,
): Record<string, unknown> {
  const entries = doc[list] ?? [];
  if (!Array.isArray(entries)) throw new KubeConfigError(where(`${list}: must be a list`));
  for (const entry of entries) {
    if (isRecord(entry) && entry.name === name) {
      const body = entry[field];
      if (!isRecord(body)) throw new KubeConfigError(where(`${list}[${name}].${field}: missing or not a mapping`));
      return body;
    }
  }
  throw new KubeConfigError(where(`${field} "${name}" not found in ${list}`));
}

function optString(obj: Record<string, unknown>, key: string, field: string): string | undefined {
  const v = obj[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') throw new KubeConfigError(`${field}: must be a string`);
  return v;
}

function reqString(obj: Record<string, unknown>, key: string, field: string): string {
  const v = optString(obj, key, field);
  if (!v) throw new KubeConfigError(`${field}: missing`);
  return v;
}

function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
