// Reaching the API: in-cluster service account, kubeconfig (certs, tokens, exec plugins),
// CoreDNS-style endpoint + tls, over HTTPS with a CA generated for the test.
import assert from 'node:assert/strict';
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import {
  endpointConnection,
  inClusterConnection,
  KubeConfigError,
  kubeconfigConnection,
} from '../../src/kube/connection.js';
import { KubeApiError, KubeClient } from '../../src/kube/http.js';
import { isList } from '../../src/kube/types.js';
import { KubeApiServer } from '../helpers/kubeapi.js';
import { delay, service, serviceReflector, waitFor } from '../helpers/kubeapi-fixtures.js';

describe('connections over HTTPS', () => {
  let server: KubeApiServer;
  let dir: string;
  before(async () => {
    server = await KubeApiServer.create({ tls: true, clientCertAuth: true, token: 'token-1' });
    server.apply(service('web', '10.0.0.1'));
    dir = await mkdtemp(join(tmpdir(), 'clusterdns-kube-'));
  });
  after(async () => {
    await server.close();
    await rm(dir, { recursive: true, force: true });
  });

  // Kubernetes docs, Managing Service Accounts › Bound service account token volume: the kubelet
  // rotates the projected token file, and clients must re-read it (client-go: at most once a minute).
  it('in-cluster: uses the service-account CA and token, and picks up a rotated token', async () => {
    const tokenFile = join(dir, 'token');
    await writeFile(tokenFile, 'token-1\n');
    const conn = await inClusterConnection({
      env: { KUBERNETES_SERVICE_HOST: '127.0.0.1', KUBERNETES_SERVICE_PORT: String(server.port) },
      tokenFile,
      caFile: server.pki?.caFile,
      namespaceFile: join(dir, 'no-such-namespace-file'),
      tokenRefreshMs: 100,
    });
    assert.equal(conn.server.href, `https://127.0.0.1:${server.port}/`);
    const t = await serviceReflector(server, {}, conn);
    try {
      await t.reflector.waitForSync();
      assert.equal(server.requestLog.at(-1)?.authorization, 'Bearer token-1');
      // The kubelet rotates the projected token; the old one stops working.
      await writeFile(tokenFile, 'token-2\n');
      server.token = 'token-2';
      await delay(150);
      await waitFor(() => server.activeWatches === 1, 'watch open');
      server.closeAllWatches();
      server.apply(service('after-rotation', '10.0.0.2'));
      await waitFor(() => t.reflector.store.has('default/after-rotation'), 'event after rotation', 1000);
      const rewatch = server.requestLog.filter((r) => r.verb === 'watch').at(-1);
      assert.equal(rewatch?.authorization, 'Bearer token-2');
      assert.equal(t.rec.errors.length, 0, t.rec.errors.map((e) => e.message).join('; '));
    } finally {
      await t.close();
      server.token = 'token-1';
    }
  });

  it('in-cluster: a 401 makes the client re-read the token file at once', async () => {
    const tokenFile = join(dir, 'token-401');
    await writeFile(tokenFile, 'token-1');
    const conn = await inClusterConnection({
      env: { KUBERNETES_SERVICE_HOST: '127.0.0.1', KUBERNETES_SERVICE_PORT: String(server.port) },
      tokenFile,
      caFile: server.pki?.caFile,
      tokenRefreshMs: 3_600_000,
    });
    const client = new KubeClient(conn);
    try {
      await client.getJSON('/api/v1/services');
      await writeFile(tokenFile, 'token-3');
      server.token = 'token-3';
      await assert.rejects(client.getJSON('/api/v1/services'), (e) => e instanceof KubeApiError && e.status === 401);
      const list = await client.getJSON('/api/v1/services');
      assert.ok(list && typeof list === 'object');
    } finally {
      client.close();
      server.token = 'token-1';
    }
  });

  it('in-cluster: explains what is missing outside a Pod', async () => {
    await assert.rejects(
      inClusterConnection({ env: {} }),
      (e) => e instanceof KubeConfigError && /KUBERNETES_SERVICE_HOST/.test(e.message),
    );
    await assert.rejects(
      inClusterConnection({
        env: { KUBERNETES_SERVICE_HOST: '127.0.0.1', KUBERNETES_SERVICE_PORT: '1' },
        caFile: server.pki?.caFile,
        tokenFile: join(dir, 'absent'),
      }),
      (e) => e instanceof KubeConfigError && e.message.includes(join(dir, 'absent')),
    );
  });

  it('endpoint + tls CERT KEY CACERT authenticates with the client certificate', async () => {
    const pki = server.pki;
    assert.ok(pki);
    const conn = await endpointConnection(server.url, {
      cert: pki.clientCertFile,
      key: pki.clientKeyFile,
      ca: pki.caFile,
    });
    const t = await serviceReflector(server, {}, conn);
    try {
      await t.reflector.waitForSync();
      assert.ok(t.reflector.store.has('default/web'));
      assert.equal(server.requestLog.at(-1)?.authorization, undefined);
    } finally {
      await t.close();
    }
  });

  it('endpoint without the CA: TLS errors are reported and retried, never fatal', async () => {
    const conn = await endpointConnection(server.url);
    const t = await serviceReflector(server, {}, conn);
    try {
      await waitFor(() => t.rec.errors.length >= 2, 'TLS failures');
      assert.match(t.rec.errors[0]!.message, /certificate/i);
      assert.equal(t.reflector.hasSynced, false);
    } finally {
      await t.close();
    }
  });

  // Kubernetes docs, Authenticating › X509 client certificates; Organizing Cluster Access Using
  // kubeconfig Files › File references (relative to the kubeconfig's directory).
  it('kubeconfig: client certificate and CA files relative to the kubeconfig, chosen context', async () => {
    const pki = server.pki;
    assert.ok(pki);
    const sub = join(dir, 'certs');
    await rm(sub, { recursive: true, force: true });
    await mkdir(sub);
    await writeFile(join(sub, 'ca.crt'), pki.ca);
    await writeFile(join(sub, 'me.crt'), pki.clientCert);
    await writeFile(join(sub, 'me.key'), pki.clientKey);
    const file = join(dir, 'kubeconfig-cert.yaml');
    await writeFile(
      file,
      `apiVersion: v1
kind: Config
current-context: broken
clusters:
- name: test
  cluster:
    server: ${server.url}
    certificate-authority: certs/ca.crt
- name: nowhere
  cluster:
    server: https://127.0.0.1:1
contexts:
- name: broken
  context: {cluster: nowhere, user: me}
- name: good
  context: {cluster: test, user: me, namespace: kube-system}
users:
- name: me
  user:
    client-certificate: certs/me.crt
    client-key: certs/me.key
`,
    );
    const conn = await kubeconfigConnection(file, 'good');
    assert.equal(conn.namespace, 'kube-system');
    const t = await serviceReflector(server, {}, conn);
    try {
      await t.reflector.waitForSync();
      assert.ok(t.reflector.store.has('default/web'));
    } finally {
      await t.close();
    }
  });

  it('kubeconfig: an exec plugin may supply the client certificate instead of a token', async () => {
    const pki = server.pki;
    assert.ok(pki);
    const script = join(dir, 'cert-plugin.mjs');
    await writeFile(
      script,
      `import { readFileSync } from 'node:fs';
const [cert, key] = process.argv.slice(2);
console.log(JSON.stringify({ apiVersion: 'client.authentication.k8s.io/v1beta1', kind: 'ExecCredential',
  status: { clientCertificateData: readFileSync(cert, 'utf8'), clientKeyData: readFileSync(key, 'utf8') } }));
`,
    );
    const file = join(dir, 'kubeconfig-exec-cert.yaml');
    await writeFile(
      file,
      `apiVersion: v1
kind: Config
current-context: c
clusters:
- name: k
  cluster: {server: "${server.url}", certificate-authority: "${pki.caFile}"}
contexts:
- name: c
  context: {cluster: k, user: u}
users:
- name: u
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      command: "${process.execPath}"
      args: ["${script}", "${pki.clientCertFile}", "${pki.clientKeyFile}"]
`,
    );
    const client = new KubeClient(await kubeconfigConnection(file));
    try {
      const list = await client.getJSON('/api/v1/services');
      assert.ok(isList(list) && list.items.length >= 1);
      assert.equal(server.requestLog.at(-1)?.authorization, undefined);
    } finally {
      client.close();
    }
  });

  it('kubeconfig: bearer token with inline certificate-authority-data and current-context', async () => {
    const file = join(dir, 'kubeconfig-token.yaml');
    await writeFile(
      file,
      `apiVersion: v1
kind: Config
current-context: ctx
clusters:
- name: c
  cluster: {server: "${server.url}", certificate-authority-data: ${server.pki?.ca.toString('base64')}}
contexts:
- name: ctx
  context: {cluster: c, user: u}
users:
- name: u
  user: {token: token-1}
`,
    );
    const client = new KubeClient(await kubeconfigConnection(file));
    try {
      const list = await client.getJSON('/api/v1/namespaces/default/services');
      assert.ok(
        list && typeof list === 'object' && 'items' in list && Array.isArray(list.items) && list.items.length >= 1,
      );
      assert.equal(server.requestLog.at(-1)?.authorization, 'Bearer token-1');
    } finally {
      client.close();
    }
  });

  it('kubeconfig: errors name the file and the field', async () => {
    const cases: Array<[string, RegExp]> = [
      ['clusters: [}', /invalid YAML/],
      ['apiVersion: v1\nclusters: []\ncontexts: []\n', /current-context/],
      ['current-context: x\ncontexts:\n- name: y\n  context: {cluster: c}\n', /context "x" not found in contexts/],
      [
        'current-context: x\ncontexts:\n- name: x\n  context: {cluster: c}\nclusters:\n- name: c\n  cluster: {}\n',
        /clusters\[c\]\.cluster\.server: missing/,
      ],
      [
        'current-context: x\ncontexts:\n- name: x\n  context: {cluster: c}\nclusters:\n- name: c\n  cluster: {server: "ftp://x"}\n',
        /must start with https:\/\/ or http:\/\//,
      ],
      [
        'current-context: x\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\nclusters:\n- name: c\n  cluster: {server: "https://x", certificate-authority: nope.crt}\nusers:\n- name: u\n  user: {}\n',
        /certificate-authority: cannot read .*nope\.crt/,
      ],
    ];
    for (const [i, [text, re]] of cases.entries()) {
      const file = join(dir, `bad-${i}.yaml`);
      await writeFile(file, text);
      await assert.rejects(
        kubeconfigConnection(file),
        (e) => e instanceof KubeConfigError && e.message.includes(file) && re.test(e.message),
        `case ${i}`,
      );
    }
  });
});

describe('kubeconfig exec credential plugins', () => {
  let server: KubeApiServer;
  let dir: string;
  before(async () => {
    server = await KubeApiServer.create({ token: 'exec-token' });
    server.apply(service('web', '10.0.0.1'));
    dir = await mkdtemp(join(tmpdir(), 'clusterdns-exec-'));
    // The plugin: records each run and the KUBERNETES_EXEC_INFO it saw, prints an ExecCredential.
    await writeFile(
      join(dir, 'cred.mjs'),
      `import { appendFileSync } from 'node:fs';
const [log, expiry] = process.argv.slice(2);
appendFileSync(log, process.env.KUBERNETES_EXEC_INFO + '\\n');
if (process.env.FAIL_PLUGIN) { console.error('login required: run "cloud auth login"'); process.exit(3); }
const status = { token: process.env.PLUGIN_TOKEN };
if (expiry !== 'none') status.expirationTimestamp = new Date(Date.now() + Number(expiry)).toISOString();
console.log(JSON.stringify({ apiVersion: 'client.authentication.k8s.io/v1', kind: 'ExecCredential', status }));
`,
    );
    await writeFile(join(dir, 'cred.sh'), `#!/bin/sh\nexec "${process.execPath}" "$(dirname "$0")/cred.mjs" "$@"\n`);
    await chmod(join(dir, 'cred.sh'), 0o755);
  });
  after(async () => {
    await server.close();
    await rm(dir, { recursive: true, force: true });
  });

  async function kubeconfig(
    name: string,
    expiry: string,
    env: Record<string, string>,
  ): Promise<{ file: string; log: string }> {
    const file = join(dir, `${name}.yaml`);
    const log = join(dir, `${name}.log`);
    await writeFile(log, '');
    const envYaml = Object.entries(env)
      .map(([k, v]) => `      - {name: ${k}, value: "${v}"}`)
      .join('\n');
    await writeFile(
      file,
      `apiVersion: v1
kind: Config
current-context: c
clusters:
- name: k
  cluster: {server: "${server.url}"}
contexts:
- name: c
  context: {cluster: k, user: plugin}
users:
- name: plugin
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: ./cred.sh
      args: ["${log}", "${expiry}"]
      interactiveMode: Never
      provideClusterInfo: true
      env:
${envYaml}
`,
    );
    return { file, log };
  }

  const runs = async (log: string) => (await readFile(log, 'utf8')).split('\n').filter(Boolean);

  it('runs the plugin once, caches its token until expiry, and passes KUBERNETES_EXEC_INFO', async () => {
    const { file, log } = await kubeconfig('cached', '3600000', { PLUGIN_TOKEN: 'exec-token' });
    const t = await serviceReflector(server, {}, await kubeconfigConnection(file));
    try {
      await t.reflector.waitForSync();
      assert.ok(t.reflector.store.has('default/web'));
      await waitFor(() => server.activeWatches === 1, 'watch open');
      server.closeAllWatches();
      await waitFor(() => server.watchRequests >= 2, 're-watch');
      const seen = await runs(log);
      assert.equal(seen.length, 1, 'token cached across requests');
      const info: unknown = JSON.parse(seen[0]!);
      assert.deepEqual(info, {
        apiVersion: 'client.authentication.k8s.io/v1',
        kind: 'ExecCredential',
        spec: { interactive: false, cluster: { server: `${server.url}/` } },
      });
    } finally {
      await t.close();
    }
  });

  it('runs the plugin again once the credential has expired', async () => {
    const { file, log } = await kubeconfig('expired', '-1000', { PLUGIN_TOKEN: 'exec-token' });
    const conn = await kubeconfigConnection(file);
    assert.equal(await conn.token(), 'exec-token');
    assert.equal(await conn.token(), 'exec-token');
    assert.equal((await runs(log)).length, 2);
  });

  it('concurrent requests share one plugin run', async () => {
    const { file, log } = await kubeconfig('concurrent', 'none', { PLUGIN_TOKEN: 'exec-token' });
    const conn = await kubeconfigConnection(file);
    const tokens = await Promise.all([conn.token(), conn.token(), conn.token()]);
    assert.deepEqual(tokens, ['exec-token', 'exec-token', 'exec-token']);
    assert.equal((await runs(log)).length, 1);
  });

  it('a failing plugin is a KubeConfigError carrying its stderr', async () => {
    const { file } = await kubeconfig('failing', 'none', { FAIL_PLUGIN: '1' });
    const conn = await kubeconfigConnection(file);
    await assert.rejects(
      conn.token(),
      (e) =>
        e instanceof KubeConfigError &&
        e.message.includes('login required') &&
        e.message.includes('users[plugin].user.exec'),
    );
  });
});
