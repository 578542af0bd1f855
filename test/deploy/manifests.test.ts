// deploy/: every manifest validated offline against the Kubernetes OpenAPI schemas
// (kubernetes-models) with unknown fields rejected; each role's manifest says what issue 10
// asks of it; the Corefiles load with this project's plugins; and the RBAC covers — exactly —
// the API calls the code makes (from the API paths in src/, and from a real autoscaler run).
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { execFileSync, spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { basename, dirname, join, relative } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { Autoscaler } from '../../src/autoscale/autoscaler.js';
import { parseAutoscaleFlags } from '../../src/autoscale/flags.js';
import { parseTargets } from '../../src/autoscale/target.js';
import { endpointConnection } from '../../src/kube/connection.js';
import { KubeClient } from '../../src/kube/http.js';
import { isRecord } from '../../src/kube/types.js';
import { pluginOrder } from '../../src/plugins/order.js';
import { HttpServices } from '../../src/server/http.js';
import { ServerServices } from '../../src/server/services.js';
import { parseConfig, Runtime } from '../../src/server/runtime.js';
import { renderCorefile } from '../../src/nodecache/template.js';
import { KubeApiServer } from '../helpers/kubeapi.js';
import { waitFor } from '../helpers/kubeapi-fixtures.js';
import { deploymentObject, nodeObject } from '../autoscale/fixtures.js';
import { allowed, apiCallsInSource, callFromRequest, callKey, grants, type ApiCall, type Manifest } from './rbac.js';
import { unknownFields } from './schema-fields.js';

const ROOT = process.cwd();
const DEPLOY = join(ROOT, 'deploy');
const ROLES = ['cluster-dns', 'nodecache', 'autoscaler', 'remote-dev'] as const;
type Role = (typeof ROLES)[number];

interface Loaded {
  file: string;
  role: string;
  obj: Manifest;
}

function yamlFiles(dir: string, out: string[] = []): string[] {
  for (const e of readdirSync(dir).sort()) {
    const p = join(dir, e);
    if (statSync(p).isDirectory()) yamlFiles(p, out);
    else if (/\.ya?ml$/.test(e)) out.push(p);
  }
  return out;
}

function loadAll(): Loaded[] {
  const out: Loaded[] = [];
  for (const file of yamlFiles(DEPLOY)) {
    const rel = relative(ROOT, file);
    for (const doc of parseAllDocuments(readFileSync(file, 'utf8'), { uniqueKeys: true })) {
      if (doc.errors.length > 0) throw new Error(`${rel}: ${doc.errors.map((e) => e.message).join('; ')}`);
      const obj: unknown = doc.toJS();
      if (obj === null || obj === undefined) continue;
      assert.ok(isRecord(obj) && typeof obj.kind === 'string' && isRecord(obj.metadata) && typeof obj.metadata.name === 'string', `${rel}: a document without kind or metadata.name`);
      out.push({ file: rel, role: relative(DEPLOY, file).split('/')[0] ?? '', obj: obj as Manifest });
    }
  }
  return out;
}

const manifests = loadAll();
const docs = manifests.map((m) => m.obj);
const inRole = (role: Role) => manifests.filter((m) => m.role === role).map((m) => m.obj);

function find(role: Role, kind: string, name?: string): Manifest {
  const found = inRole(role).find((d) => d.kind === kind && (name === undefined || d.metadata.name === name));
  assert.ok(found, `deploy/${role}: no ${kind}${name ? ` ${name}` : ''}`);
  return found;
}

/** Walk a dotted path through records and arrays (numeric segments index arrays). */
function at(obj: unknown, path: string): unknown {
  let cur: unknown = obj;
  for (const seg of path.split('.')) {
    if (Array.isArray(cur)) cur = cur[Number(seg)];
    else if (isRecord(cur)) cur = cur[seg];
    else return undefined;
  }
  return cur;
}

function podSpec(workload: Manifest): Record<string, unknown> {
  const spec = at(workload, 'spec.template.spec');
  assert.ok(isRecord(spec), `${workload.kind} ${workload.metadata.name}: no pod template`);
  return spec;
}

function container(workload: Manifest): Record<string, unknown> {
  const c = at(podSpec(workload), 'containers.0');
  assert.ok(isRecord(c));
  return c;
}

function corefileOf(role: Role, configMap: string): string {
  const text = at(find(role, 'ConfigMap', configMap), 'data.Corefile');
  assert.equal(typeof text, 'string');
  return text as string;
}

/** Parse and set up a Corefile with this project's plugins (no sockets are opened). */
async function loadCorefile(text: string, file: string): Promise<Runtime> {
  const cfg = parseConfig({ file, text, builtin: false }, 53);
  return Runtime.create(cfg, {
    http: new HttpServices(),
    services: new ServerServices(),
    requestReload: () => {},
    shuttingDown: () => false,
  });
}

/** kubernetes-models class for apiVersion/kind (e.g. kubernetes-models/apps/v1 → Deployment). */
async function modelClass(apiVersion: string, kind: string): Promise<(new (data: unknown) => { validate(): void }) | undefined> {
  const mod: unknown = await import(`kubernetes-models/${apiVersion}`);
  const cls = isRecord(mod) ? mod[kind] : undefined;
  return typeof cls === 'function' ? (cls as new (data: unknown) => { validate(): void }) : undefined;
}

async function schemaErrors(obj: Manifest): Promise<string[]> {
  const cls = await modelClass(String(obj.apiVersion), obj.kind);
  if (!cls) return [`${String(obj.apiVersion)} ${obj.kind} is not a Kubernetes type`];
  const problems: string[] = [];
  try {
    new cls(structuredClone(obj)).validate();
  } catch (err) {
    problems.push(err instanceof Error ? err.message : String(err));
  }
  return [...problems, ...unknownFields(obj)];
}

describe('deploy/: offline validation against the Kubernetes OpenAPI schemas', () => {
  test('there is one folder per role, each with manifests', () => {
    for (const role of ROLES) assert.ok(inRole(role).length > 0, `deploy/${role} has no manifests`);
  });

  test('every manifest validates against its Kubernetes schema, with no unknown fields', async () => {
    const failures: string[] = [];
    for (const m of manifests) {
      for (const p of await schemaErrors(m.obj)) failures.push(`${m.file}: ${m.obj.kind} ${m.obj.metadata.name}: ${p}`);
    }
    assert.deepEqual(failures, []);
  });

  test('the validation is not vacuous: a wrong type, a missing required field and a misspelt field are caught', async () => {
    const dep = structuredClone(find('cluster-dns', 'Deployment', 'clusterdns'));
    (dep.spec as Record<string, unknown>).replicas = 'two';
    assert.match((await schemaErrors(dep)).join('\n'), /spec\/replicas must be integer/);
    const svc = structuredClone(find('cluster-dns', 'Service', 'kube-dns'));
    delete (at(svc, 'spec.ports.0') as Record<string, unknown>).port;
    assert.match((await schemaErrors(svc)).join('\n'), /must have required property '?port'?/);
    const typo = structuredClone(find('cluster-dns', 'Deployment', 'clusterdns'));
    const sc = at(typo, 'spec.template.spec.containers.0.securityContext') as Record<string, unknown>;
    sc.readOnlyRootFileSystem = sc.readOnlyRootFilesystem;
    assert.match((await schemaErrors(typo)).join('\n'), /containers\[0\]\.securityContext\.readOnlyRootFileSystem: unknown field/);
  });

  test('namespaced objects name their namespace; references inside a folder resolve', () => {
    const clusterScoped = new Set(['Namespace', 'ClusterRole', 'ClusterRoleBinding']);
    for (const m of manifests) {
      if (!clusterScoped.has(m.obj.kind)) assert.ok(m.obj.metadata.namespace, `${m.file}: ${m.obj.kind} ${m.obj.metadata.name} has no namespace`);
    }
    for (const role of ROLES) {
      for (const w of inRole(role).filter((d) => d.kind === 'Deployment' || d.kind === 'DaemonSet')) {
        const spec = podSpec(w);
        const sa = spec.serviceAccountName;
        if (typeof sa === 'string') assert.ok(inRole(role).some((d) => d.kind === 'ServiceAccount' && d.metadata.name === sa), `${role}: ServiceAccount ${sa} missing`);
        for (const v of (spec.volumes as unknown[]) ?? []) {
          const cm = at(v, 'configMap.name');
          if (typeof cm === 'string' && at(v, 'configMap.optional') !== true) {
            assert.ok(inRole(role).some((d) => d.kind === 'ConfigMap' && d.metadata.name === cm), `${role}: ConfigMap ${cm} missing`);
          }
        }
        const labels = at(w, 'spec.template.metadata.labels') as Record<string, string>;
        const selector = at(w, 'spec.selector.matchLabels') as Record<string, string>;
        for (const [k, v] of Object.entries(selector)) assert.equal(labels[k], v, `${w.metadata.name}: selector ${k}=${v} does not match its pods`);
      }
    }
  });

  test('`kubectl apply -f deploy/ROLE/` (files in name order) creates what each object needs before it', () => {
    const problems: string[] = [];
    for (const role of ROLES) {
      const seen = new Set<string>();
      const key = (kind: string, ns: string | undefined, name: string) => `${kind} ${ns ?? ''}/${name}`;
      const defined = new Set(inRole(role).map((d) => key(d.kind, d.metadata.namespace, d.metadata.name)));
      const need = (m: Loaded, kind: string, ns: string | undefined, name: string) => {
        const k = key(kind, ns, name);
        if (defined.has(k) && !seen.has(k)) problems.push(`${m.file}: ${m.obj.kind} ${m.obj.metadata.name} comes before the ${kind} ${name} it needs`);
      };
      // manifests are in the order kubectl applies them: files by name, documents in order.
      for (const m of manifests.filter((x) => x.role === role)) {
        const ns = m.obj.metadata.namespace;
        if (ns) need(m, 'Namespace', undefined, ns);
        if (m.obj.kind === 'Deployment' || m.obj.kind === 'DaemonSet') {
          const spec = podSpec(m.obj);
          if (typeof spec.serviceAccountName === 'string') need(m, 'ServiceAccount', ns, spec.serviceAccountName);
          for (const v of (spec.volumes as unknown[]) ?? []) {
            const cm = at(v, 'configMap.name');
            const secret = at(v, 'secret.secretName');
            if (typeof cm === 'string') need(m, 'ConfigMap', ns, cm);
            if (typeof secret === 'string') need(m, 'Secret', ns, secret);
          }
        }
        seen.add(key(m.obj.kind, ns, m.obj.metadata.name));
      }
    }
    assert.deepEqual(problems, []);
  });

  test('every Service selects the pods of some workload in deploy/', () => {
    const podLabels = docs.filter((d) => d.kind === 'Deployment' || d.kind === 'DaemonSet').map((w) => at(w, 'spec.template.metadata.labels') as Record<string, string>);
    for (const svc of docs.filter((d) => d.kind === 'Service')) {
      const sel = at(svc, 'spec.selector') as Record<string, string>;
      assert.ok(podLabels.some((l) => Object.entries(sel).every(([k, v]) => l[k] === v)), `Service ${svc.metadata.name} selects no pods`);
    }
  });
});

describe('deploy/cluster-dns', () => {
  const dep = find('cluster-dns', 'Deployment', 'clusterdns');
  const c = container(dep);

  test('Deployment: 2 replicas spread by pod anti-affinity over nodes', () => {
    assert.equal(at(dep, 'spec.replicas'), 2);
    const term = at(podSpec(dep), 'affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution.0.podAffinityTerm');
    assert.equal(at(term, 'topologyKey'), 'kubernetes.io/hostname');
    assert.deepEqual(at(term, 'labelSelector.matchLabels'), at(dep, 'spec.selector.matchLabels'));
  });

  test('probes: liveness GET /health :8080, readiness GET /ready :8181', () => {
    assert.deepEqual([at(c, 'livenessProbe.httpGet.path'), at(c, 'livenessProbe.httpGet.port')], ['/health', 8080]);
    assert.deepEqual([at(c, 'readinessProbe.httpGet.path'), at(c, 'readinessProbe.httpGet.port')], ['/ready', 8181]);
  });

  test('runs non-root on a read-only root filesystem with only NET_BIND_SERVICE, and /tmp writable', () => {
    assert.equal(at(c, 'securityContext.runAsNonRoot'), true);
    assert.equal(at(c, 'securityContext.readOnlyRootFilesystem'), true);
    assert.equal(at(c, 'securityContext.allowPrivilegeEscalation'), false);
    assert.deepEqual(at(c, 'securityContext.capabilities'), { add: ['NET_BIND_SERVICE'], drop: ['ALL'] });
    assert.ok(Number(at(podSpec(dep), 'securityContext.runAsUser')) > 0);
    assert.ok((c.volumeMounts as unknown[]).some((v) => at(v, 'mountPath') === '/tmp'));
    assert.ok(at(c, 'resources.requests.cpu') && at(c, 'resources.requests.memory') && at(c, 'resources.limits.memory'));
  });

  test('the Corefile the container is given is the mounted ConfigMap key', () => {
    const args = c.args as string[];
    const conf = args[args.indexOf('-conf') + 1];
    const mount = (c.volumeMounts as unknown[]).find((v) => at(v, 'name') === 'config-volume');
    const vol = (podSpec(dep).volumes as unknown[]).find((v) => at(v, 'name') === 'config-volume');
    assert.equal(conf, `${String(at(mount, 'mountPath'))}/${String(at(vol, 'configMap.items.0.path'))}`);
    assert.equal(at(vol, 'configMap.name'), 'clusterdns');
  });

  test('the kube-dns Service keeps 10.96.0.10 with dns/UDP, dns-tcp/TCP and metrics ports', () => {
    const svc = find('cluster-dns', 'Service', 'kube-dns');
    assert.equal(svc.metadata.namespace, 'kube-system');
    assert.equal(at(svc, 'spec.clusterIP'), '10.96.0.10');
    const ports = (at(svc, 'spec.ports') as Array<Record<string, unknown>>).map((p) => `${String(p.name)} ${String(p.protocol)} ${String(p.port)}`);
    assert.deepEqual(ports, ['dns UDP 53', 'dns-tcp TCP 53', 'metrics TCP 9153']);
    const labels = at(dep, 'spec.template.metadata.labels') as Record<string, string>;
    for (const [k, v] of Object.entries(at(svc, 'spec.selector') as Record<string, string>)) assert.equal(labels[k], v);
  });

  test('the Corefile is kubeadm’s (lameduck included) and loads with this project’s plugins', async () => {
    const text = corefileOf('cluster-dns', 'clusterdns');
    const directives = text.split('\n').map((l) => l.trim()).filter((l) => l && l !== '}');
    assert.deepEqual(directives, [
      '.:53 {',
      'errors',
      'health {',
      'lameduck 5s',
      'ready',
      'kubernetes cluster.local in-addr.arpa ip6.arpa {',
      'pods insecure',
      'fallthrough in-addr.arpa ip6.arpa',
      'ttl 30',
      'prometheus :9153',
      'forward . /etc/resolv.conf {',
      'max_concurrent 1000',
      'cache 30',
      'loop',
      'reload',
      'loadbalance',
    ]);
    const rt = await loadCorefile(text, 'deploy/cluster-dns/2-configmap.yaml');
    assert.equal(rt.blocks.length, 1);
  });

  test('a PodDisruptionBudget covers the DNS pods', () => {
    const pdb = find('cluster-dns', 'PodDisruptionBudget');
    assert.deepEqual(at(pdb, 'spec.selector.matchLabels'), at(dep, 'spec.selector.matchLabels'));
  });
});

describe('deploy/nodecache', () => {
  const ds = find('nodecache', 'DaemonSet', 'node-local-dns');
  const c = container(ds);

  test('DaemonSet: host network, NET_ADMIN, and the addon’s command line', () => {
    assert.equal(at(podSpec(ds), 'hostNetwork'), true);
    assert.equal(at(podSpec(ds), 'dnsPolicy'), 'Default');
    assert.deepEqual(at(c, 'securityContext.capabilities.add'), ['NET_ADMIN']);
    const args = (c.args as string[]).join(' ');
    assert.match(args, /^nodecache -localip 169\.254\.20\.10,10\.96\.0\.10 -conf \/etc\/Corefile -upstreamsvc kube-dns-upstream\b/);
    assert.equal(at(c, 'livenessProbe.httpGet.host'), '169.254.20.10');
    assert.equal(at(c, 'livenessProbe.httpGet.port'), 8080);
    assert.ok((podSpec(ds).volumes as unknown[]).some((v) => at(v, 'hostPath.path') === '/run/xtables.lock'));
  });

  test('the ConfigMap is the addon Corefile with its placeholders, mounted as /etc/coredns/Corefile.base', () => {
    const text = corefileOf('nodecache', 'node-local-dns');
    const zones = [...text.matchAll(/^(\S+) \{$/gm)].map((m) => m[1]);
    assert.deepEqual(zones, ['__PILLAR__DNS__DOMAIN__:53', 'in-addr.arpa:53', 'ip6.arpa:53', '.:53']);
    assert.equal((text.match(/bind __PILLAR__LOCAL__DNS__ __PILLAR__DNS__SERVER__/g) ?? []).length, 4);
    assert.equal((text.match(/forward \. __PILLAR__CLUSTER__DNS__ \{\n {12}force_tcp\n {4}\}/g) ?? []).length, 3, 'force_tcp blocks in the addon’s exact indentation');
    assert.match(text, /forward \. __PILLAR__UPSTREAM__SERVERS__\n/);
    assert.match(text, /success 9984 30\n\s+denial 9984 5/);
    assert.match(text, /health __PILLAR__LOCAL__DNS__:8080/);
    const mount = (c.volumeMounts as unknown[]).find((v) => at(v, 'name') === 'config-volume');
    const vol = (podSpec(ds).volumes as unknown[]).find((v) => at(v, 'name') === 'config-volume');
    assert.equal(`${String(at(mount, 'mountPath'))}/${String(at(vol, 'configMap.items.0.path'))}`, '/etc/coredns/Corefile.base');
  });

  test('filled in by the agent’s own template code, the Corefile loads with this project’s plugins', async () => {
    const text = renderCorefile(corefileOf('nodecache', 'node-local-dns'), {
      localIPs: ['169.254.20.10', '10.96.0.10'],
      clusterDns: '10.96.0.11',
      upstreamServers: ['192.0.2.53'],
      upstreamFromKubeDns: false,
      dnsDomain: 'cluster.local',
      stubDomains: new Map(),
      dnsPort: 53,
    });
    assert.doesNotMatch(text, /__PILLAR__/);
    assert.equal((await loadCorefile(text, 'deploy/nodecache/2-configmap.yaml')).blocks.length, 4);
  });

  test('kube-dns-upstream selects the cluster DNS pods, on port 53 UDP and TCP', () => {
    const svc = find('nodecache', 'Service', 'kube-dns-upstream');
    assert.deepEqual(at(svc, 'spec.selector'), { 'k8s-app': 'kube-dns' });
    assert.equal(at(find('cluster-dns', 'Deployment', 'clusterdns'), 'spec.template.metadata.labels.k8s-app'), 'kube-dns');
    assert.deepEqual((at(svc, 'spec.ports') as Array<Record<string, unknown>>).map((p) => `${String(p.protocol)} ${String(p.port)}`), ['UDP 53', 'TCP 53']);
  });
});

describe('deploy/autoscaler', () => {
  const dep = find('autoscaler', 'Deployment', 'clusterdns-autoscaler');
  const c = container(dep);
  const args = c.args as string[];

  test('runs `clusterdns autoscale` on the cluster DNS Deployment with the kube-dns addon’s params', () => {
    assert.equal(args[0], 'autoscale');
    const flags = parseAutoscaleFlags(args.slice(1), {});
    assert.deepEqual(parseTargets(flags.targetSpec, flags.namespace ?? ''), [{ kind: 'deployment', name: 'clusterdns', namespace: 'kube-system' }]);
    assert.equal(flags.configMap, 'clusterdns-autoscaler');
    assert.deepEqual(flags.defaultParams, {
      linear: '{"coresPerReplica":256,"includeUnschedulableNodes":true,"nodesPerReplica":16,"preventSinglePointFailure":true}',
    });
    const target = find('cluster-dns', 'Deployment', 'clusterdns');
    assert.equal(target.metadata.namespace, flags.namespace);
    assert.equal(at(c, 'livenessProbe.httpGet.port'), flags.healthPort);
    assert.equal(at(c, 'livenessProbe.httpGet.path'), '/healthz');
  });

  test('runs non-root on a read-only root filesystem with every capability dropped', () => {
    assert.equal(at(c, 'securityContext.readOnlyRootFilesystem'), true);
    assert.deepEqual(at(c, 'securityContext.capabilities'), { drop: ['ALL'] });
    assert.equal(at(podSpec(dep), 'securityContext.runAsNonRoot'), true);
  });
});

describe('deploy/remote-dev', () => {
  test('a Deployment and Service running the searchfan Corefile and the route stream on :9002', () => {
    const text = corefileOf('remote-dev', 'clusterdns-remote-dev');
    assert.deepEqual(
      text.split('\n').map((l) => l.trim()).filter(Boolean),
      ['.:53 {', 'errors', 'health', 'ready', 'searchfan /etc/resolv.conf', 'routes :9002 {', 'tokenfile /var/run/secrets/clusterdns/routes-token', '}', 'prometheus :9153', '}'],
    );
    const dep = find('remote-dev', 'Deployment', 'clusterdns-remote-dev');
    assert.equal(at(dep, 'spec.template.spec.volumes.0.configMap.name'), 'clusterdns-remote-dev');
    const svc = find('remote-dev', 'Service', 'clusterdns-remote-dev');
    assert.ok((at(svc, 'spec.ports') as unknown[]).some((p) => at(p, 'port') === 9002 && at(p, 'targetPort') === 9002 && at(p, 'protocol') === 'TCP'));
    assert.ok((container(dep).ports as unknown[]).some((p) => at(p, 'containerPort') === 9002));
  });

  test('the routes token is a Secret mounted where the tokenfile points, which the README has you create', () => {
    const tokenfile = /tokenfile (\S+)/.exec(corefileOf('remote-dev', 'clusterdns-remote-dev'))![1]!;
    const dep = find('remote-dev', 'Deployment', 'clusterdns-remote-dev');
    const mount = (container(dep).volumeMounts as unknown[]).find((m) => at(m, 'mountPath') === dirname(tokenfile));
    assert.ok(mount, `nothing is mounted at ${dirname(tokenfile)}`);
    const volume = (podSpec(dep).volumes as unknown[]).find((v) => at(v, 'name') === at(mount, 'name'));
    const secret = at(volume, 'secret.secretName') as string;
    assert.equal(typeof secret, 'string');
    assert.notEqual(at(volume, 'secret.optional'), true, 'the routes plugin does not start without its token');
    const readme = readFileSync(join(DEPLOY, 'README.md'), 'utf8');
    assert.match(readme, new RegExp(`kubectl -n clusterdns-remote-dev create secret generic ${secret} --from-literal=${basename(tokenfile)}=`));
    assert.match(readme, new RegExp(`clusterdns connect .*--routes http://[\\d.]+:9002/routes --token-file`));
  });

  test('its ServiceAccount may list and watch what the routes plugin\'s own watch reads', () => {
    const dep = find('remote-dev', 'Deployment', 'clusterdns-remote-dev');
    const sa = { namespace: 'clusterdns-remote-dev', name: podSpec(dep).serviceAccountName as string };
    find('remote-dev', 'ServiceAccount', sa.name);
    for (const resource of ['services', 'namespaces']) {
      for (const verb of ['list', 'watch']) assert.ok(allowed(sa, { group: '', resource, verb, origin: 'routes' }, docs, 'clusterdns-remote-dev'), `${resource} ${verb}`);
    }
    assert.ok(!allowed(sa, { group: '', resource: 'secrets', verb: 'list', origin: 'test' }, docs, 'clusterdns-remote-dev'), 'nothing more');
  });

  test('the Corefile loads with this build\'s plugins', async () => {
    const text = corefileOf('remote-dev', 'clusterdns-remote-dev');
    const known = new Set(pluginOrder.map(([name]) => name));
    const directives = text.split('\n').map((l) => l.trim()).filter((l) => l && l !== '}').map((l) => l.split(/\s+/)[0] ?? '');
    assert.ok(known.has('searchfan') && known.has('routes'));
    assert.deepEqual(directives.filter((d) => !known.has(d) && d !== 'tokenfile' && !d.startsWith('.:')), []);
    // The token file is the Secret the pod mounts; here a temporary one stands in for it.
    const token = join(mkdtempSync(join(tmpdir(), 'routes-token-')), 'routes-token');
    writeFileSync(token, 'test-token\n');
    const local = text.replace(/tokenfile \S+/, `tokenfile ${token}`);
    assert.equal((await loadCorefile(local, 'deploy/remote-dev/3-configmap.yaml')).blocks.length, 1);
  });
});

describe('docs of deploy/ and native/', () => {
  const readme = readFileSync(join(DEPLOY, 'README.md'), 'utf8');

  test('nothing still says searchfan is to come (it is in the build)', () => {
    for (const file of yamlFiles(DEPLOY).concat(join(DEPLOY, 'README.md'))) {
      assert.doesNotMatch(readFileSync(file, 'utf8'), /issue 8|does not load|fails to load/, relative(ROOT, file));
    }
  });

  test('native/README says what the Dockerfile does with the addon', () => {
    const dockerfile = readFileSync(join(DEPLOY, 'Dockerfile'), 'utf8');
    const native = readFileSync(join(ROOT, 'native/README.md'), 'utf8');
    // The image builds the addon itself and copies it to the runtime stage.
    assert.match(dockerfile, /node native\/build\.mjs/);
    assert.match(dockerfile, /COPY --from=build \/src\/native\/build\/Release/);
    assert.doesNotMatch(native, /image as it stands serves through\s+`node:dgram`/);
    assert.match(native, /`deploy\/Dockerfile`[^.]*builds the addon/);
  });

  test('every `kubectl apply -f deploy/...` in the guide names a file or folder that exists', () => {
    const paths = [...readme.matchAll(/-f (deploy\/[\w./-]+)/g)].map((m) => m[1]!);
    assert.ok(paths.length > 5);
    for (const p of paths) assert.ok(existsPath(join(ROOT, p)), p);
  });

  test('the offline Corefile check (-validate) binds nothing and reports FILE:LINE; -dns.port is not offered as a check', () => {
    assert.doesNotMatch(readme, /-dns\.port 1053\s+# optional/);
    assert.match(readme, /node dist\/src\/cli\.js -validate -conf Corefile/);
    const dir = mkdtempSync(join(tmpdir(), 'check-corefile-'));
    writeFileSync(join(dir, 'Corefile'), corefileOf('cluster-dns', 'clusterdns'));
    // Port 53 and the plugins' ports would be bound by a real start; the check returns at once.
    const ok = execFileSync(process.execPath, ['dist/src/cli.js', '-validate', '-conf', join(dir, 'Corefile')], { encoding: 'utf8', timeout: 20_000 });
    assert.match(ok, /Corefile: valid \(1 server block/);
    writeFileSync(join(dir, 'Bad'), '.:53 {\n    errors\n    forwardd . 1.1.1.1\n}\n');
    const bad = spawnSync(process.execPath, ['dist/src/cli.js', '-validate', '-conf', join(dir, 'Bad')], { encoding: 'utf8', timeout: 20_000 });
    assert.equal(bad.status, 1);
    assert.equal(bad.stderr.split('\n')[0], `${join(dir, 'Bad')}:3 - Error during parsing: Unknown directive 'forwardd' (did you mean 'forward'?)`);
  });

  test('the switch-over guide warns that kubeadm upgrade and add-on managers put CoreDNS back', () => {
    assert.match(readme, /kubeadm upgrade/);
    assert.match(readme, /addon-manager|add-on manager/i);
  });
});

function existsPath(p: string): boolean {
  try {
    statSync(p);
    return true;
  } catch {
    return false;
  }
}

/** Where each part of src/ runs, and under which ServiceAccount. */
const DEPLOYED_CODE: ReadonlyArray<{ src: string; role: Role; serviceAccount: string }> = [
  { src: 'src/autoscale', role: 'autoscaler', serviceAccount: 'clusterdns-autoscaler' },
  { src: 'src/nodecache', role: 'nodecache', serviceAccount: 'node-local-dns' },
];
/** The DNS server (plugins included) runs as the cluster-dns Deployment. */
const SERVER_ROLE = { role: 'cluster-dns' as Role, serviceAccount: 'clusterdns' };
/** Run by people with their own kubeconfig, or a library whose callers own the paths. */
const NOT_DEPLOYED = ['src/diagnose', 'src/connect', 'src/kube'];

function staticCalls(): Map<Role, ApiCall[]> {
  const byRole = new Map<Role, ApiCall[]>();
  for (const call of apiCallsInSource(join(ROOT, 'src'), ROOT)) {
    const file = call.origin.split(':')[0] ?? '';
    if (NOT_DEPLOYED.some((d) => file.startsWith(`${d}/`))) continue;
    const role = DEPLOYED_CODE.find((d) => file.startsWith(`${d.src}/`))?.role ?? SERVER_ROLE.role;
    byRole.set(role, [...(byRole.get(role) ?? []), call]);
  }
  return byRole;
}

function serviceAccountOf(role: Role): { namespace: string; name: string } {
  const name = role === SERVER_ROLE.role ? SERVER_ROLE.serviceAccount : DEPLOYED_CODE.find((d) => d.role === role)?.serviceAccount;
  const sa = find(role, 'ServiceAccount', name);
  return { namespace: sa.metadata.namespace ?? '', name: sa.metadata.name };
}

function rolesOf(role: Role): Manifest[] {
  return inRole(role).filter((d) => d.kind === 'Role' || d.kind === 'ClusterRole');
}

describe('RBAC in deploy/ covers what the code calls', () => {
  test('the API paths in src/ (grep) are allowed to the ServiceAccount of the role that runs them, and nothing more is granted', () => {
    const byRole = staticCalls();
    // The grep found what we know is there, so a silent regex failure cannot pass this test.
    const found = (role: Role) => (byRole.get(role) ?? []).map(callKey);
    for (const k of ['core services list', 'core services watch', 'discovery.k8s.io endpointslices watch', 'core namespaces list', 'core pods watch']) {
      assert.ok(found('cluster-dns').includes(k), `grep of src/plugins did not find "${k}"`);
    }
    assert.ok(found('autoscaler').includes('core nodes watch'));
    assert.ok(found('autoscaler').includes('apps deployments/scale update'));
    assert.ok(found('autoscaler').includes('core configmaps create'));

    const problems: string[] = [];
    for (const [role, calls] of byRole) {
      const sa = serviceAccountOf(role);
      for (const call of calls) {
        if (call.verb === '?') problems.push(`${call.origin}: cannot tell which call uses this path; use it in getJSON(...), request('VERB', ...) or a Reflector's path:`);
        // Scale paths of target kinds the deployed autoscaler does not target need no grant.
        else if (role === 'autoscaler' && call.subresource === 'scale' && call.resource !== 'deployments') continue;
        else if (!allowed(sa, call, docs, 'kube-system')) problems.push(`deploy/${role}: ${sa.namespace}/${sa.name} may not ${callKey(call)} (${call.origin})`);
      }
      const needed = new Set(calls.map(callKey));
      for (const g of grants(rolesOf(role))) if (!needed.has(g)) problems.push(`deploy/${role} grants "${g}" but no code in src/ calls it`);
    }
    assert.deepEqual(problems, []);
  });

  test('the autoscaler, run with its manifest’s own arguments, makes only calls its RBAC allows, and uses every grant', async () => {
    const dep = find('autoscaler', 'Deployment', 'clusterdns-autoscaler');
    const flags = parseAutoscaleFlags((container(dep).args as string[]).slice(1), {});
    const namespace = flags.namespace ?? '';
    const api = await KubeApiServer.create();
    const client = new KubeClient(await endpointConnection(api.url));
    const log = { debug: () => {}, info: () => {}, warn: () => {}, error: () => {}, fatal: () => {}, line: () => {} };
    const autoscaler = new Autoscaler({
      client,
      namespace,
      configMap: flags.configMap,
      targets: parseTargets(flags.targetSpec, namespace),
      defaultParams: flags.defaultParams,
      pollPeriodMs: 1000,
      nodeLabels: flags.nodeLabels,
      maxSyncFailures: 0,
      log,
    });
    try {
      for (let i = 0; i < 3; i++) api.apply(nodeObject(`node-${i}`, '4'));
      api.apply(deploymentObject('clusterdns', namespace, 1));
      autoscaler.nodes.start();
      const out = await autoscaler.pollOnce(); // creates the ConfigMap, scales 1 → 2
      assert.equal(out.results[0]?.changed, true);
      await autoscaler.pollOnce(); // reads the ConfigMap and the Scale again
      await waitFor(() => api.watchRequests > 0, 'the node watch');
    } finally {
      await autoscaler.stop();
      client.close();
      await api.close();
    }
    const sa = serviceAccountOf('autoscaler');
    const calls = api.requestLog.map((r) => callFromRequest(r.method, r.path, r.verb === 'watch')).filter((c): c is ApiCall => c !== undefined);
    const denied = calls.filter((c) => !allowed(sa, c, docs, namespace)).map((c) => c.origin);
    assert.deepEqual(denied, []);
    const used = new Set(calls.map(callKey));
    assert.deepEqual(grants(rolesOf('autoscaler')).filter((g) => !used.has(g)), [], 'granted but never called');
    assert.deepEqual([...used].sort(), ['apps deployments/scale get', 'apps deployments/scale update', 'core configmaps create', 'core configmaps get', 'core nodes list', 'core nodes watch']);
  });
});
