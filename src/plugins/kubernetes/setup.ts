// `kubernetes [ZONES...] { ... }`: parses the block (every option of CoreDNS's plugin, plus
// `manifests`), then wires a KubeSource (API or files) to a ClusterIndex and the handler.

import { existsSync } from 'node:fs';
import { networkInterfaces } from 'node:os';
import { dirname, isAbsolute, resolve } from 'node:path';
import { CorefileError, directiveError } from '../../corefile/errors.js';
import type { Directive } from '../../corefile/types.js';
import { canonicalIP } from '../../dns/ip.js';
import { canonicalZone } from '../../dns/name.js';
import { cidrToReverseZones, isReverseZone } from '../../dns/reverse.js';
import { warnEachOnce, type Logger } from '../../log.js';
import { durationArg, intArg, once, unknownProperty } from '../../corefile/args.js';
import type { PluginSetup, SetupContext } from '../plugin.js';
import type { ClusterIndex, IndexListener } from '../../cluster/clusterindex.js';
import { KUBE_FEEDS, type FeedHold } from './feed.js';
import { KubernetesHandler } from './handler.js';
import type { KubernetesInstance } from './instance.js';
import { RelayedSource, relayed, sourceFromSpec, WORKER_RELAY, type SourceSpec } from '../../cluster/relay.js';
import { API_STATES, KUBE_CLIENT_METRICS } from '../../cluster/metrics.js';
import type { ProjectionOptions } from '../../cluster/objects.js';
import { DEFAULT_STARTUP_TIMEOUT_MS, DEFAULT_TTL, type KubernetesOptions, type PodMode } from './options.js';
import { MANIFEST_POLL_MS, type SourceConfig } from '../../cluster/events.js';
import { parseLabelSelector, SelectorError } from '../../cluster/selector.js';
import type { ApiSyncSource } from '../../status/sources.js';
import { clusterTransfer } from './transfer.js';
import { clusterView } from './clusterview.js';
import { publishMetadata } from './metadata.js';

const REMOVED: Record<string, string> = {
  upstream: "'upstream' was removed in CoreDNS 1.7.0: ExternalName targets are always resolved through the server",
  resyncperiod: "'resyncperiod' was removed in CoreDNS 1.7.0: watches keep the data current",
  transfer: "'transfer' was removed in CoreDNS 1.8.0: use the transfer plugin",
};

const UNSUPPORTED: Record<string, string> = {
  multicluster: "'multicluster' (MCS-API ServiceImports) is not supported by clusterdns",
  zonal: "'zonal' (topology-zone names) is not supported by clusterdns",
};

/** Accepted for Corefile compatibility; clusterdns's client has no rate limiter to tune. */
const CLIENT_TUNING = new Set(['apiserver_qps', 'apiserver_burst', 'apiserver_max_inflight']);

/** A file option, relative to the Corefile, that must exist now (so the error names its line). */
function fileArg(p: Directive, i: number, ctx: SetupContext): string {
  const t = p.args[i]!;
  const path = isAbsolute(t.text) ? t.text : resolve(dirname(ctx.corefile), t.text);
  if (!existsSync(path)) throw directiveError(t, `kubernetes: ${p.name}: ${path}: no such file or directory`);
  return path;
}

function argCount(p: Directive, min: number, max: number, usage: string): void {
  if (p.args.length < min || p.args.length > max) throw directiveError(p, `kubernetes: ${p.name}: expected ${usage}`);
}

function selectorArg(p: Directive): string {
  argCount(p, 1, Infinity, 'a label selector');
  const sel = p.args.map((t) => t.text).join(' ');
  try {
    parseLabelSelector(sel);
  } catch (e) {
    if (e instanceof SelectorError) throw directiveError(p, `kubernetes: ${p.name}: ${e.message}`);
    throw e;
  }
  return sel;
}

export function parseOptions(d: Directive, ctx: SetupContext): KubernetesOptions {
  const zones: string[] = [];
  for (const t of d.args) {
    if (t.text.includes('/')) {
      try {
        for (const z of cidrToReverseZones(t.text)) if (!zones.includes(z)) zones.push(z);
      } catch {
        throw directiveError(t, `kubernetes: "${t.text}" is not a zone or CIDR`);
      }
    } else {
      const z = canonicalZone(t.text);
      if (!zones.includes(z)) zones.push(z);
    }
  }
  if (zones.length === 0) zones.push(...ctx.block.zones);
  const primaryZone = zones.find((z) => !isReverseZone(z));
  if (primaryZone === undefined) throw directiveError(d, 'kubernetes: non-reverse zone name must be used');

  let endpoint: string | undefined;
  let tls: { cert: string; key: string; ca: string } | null = null;
  let kubeconfig: { file: string; context: string | undefined } | undefined;
  let manifests: string | undefined;
  let sourceAt: Directive | undefined;
  let kubeconfigAt: Directive | undefined;
  let endpointAt: Directive | undefined;
  const o: KubernetesOptions = {
    zones,
    primaryZone,
    source: { kind: 'in-cluster' },
    namespaces: new Set(),
    namespaceLabels: '',
    labels: '',
    pods: 'disabled',
    endpointPodNames: false,
    ttl: DEFAULT_TTL,
    noEndpoints: false,
    fallthrough: null,
    ignoreEmptyService: false,
    startupTimeoutMs: DEFAULT_STARTUP_TIMEOUT_MS,
    manifestPollMs: MANIFEST_POLL_MS,
  };
  let namespacesAt: Directive | undefined;
  let namespaceLabelsAt: Directive | undefined;
  for (const p of d.block ?? []) {
    switch (p.name) {
      case 'endpoint': {
        argCount(p, 1, Infinity, 'a URL');
        const url = p.args[0]!.text;
        let parsed: URL | null;
        try {
          parsed = new URL(url);
        } catch {
          parsed = null;
        }
        if (parsed === null || (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')) {
          throw directiveError(p.args[0]!, `kubernetes: endpoint: "${url}" is not an http(s) URL`);
        }
        if (p.args.length > 1) ctx.logger.warn(`${p.file}:${p.line}: only the first endpoint (${url}) is used`);
        endpoint = url;
        endpointAt = p;
        sourceAt ??= p;
        break;
      }
      case 'tls':
        argCount(p, 3, 3, 'CERT KEY CACERT');
        tls = { cert: fileArg(p, 0, ctx), key: fileArg(p, 1, ctx), ca: fileArg(p, 2, ctx) };
        break;
      case 'kubeconfig':
        argCount(p, 1, 2, 'FILE [CONTEXT]');
        kubeconfig = { file: fileArg(p, 0, ctx), context: p.args[1]?.text };
        kubeconfigAt = p;
        sourceAt ??= p;
        break;
      case 'manifests':
        argCount(p, 1, 1, 'PATH (a file or a directory)');
        manifests = fileArg(p, 0, ctx);
        break;
      case 'namespaces':
        argCount(p, 1, Infinity, 'NAMESPACE...');
        o.namespaces = new Set(p.args.map((t) => t.text.toLowerCase()));
        namespacesAt = p;
        break;
      case 'namespace_labels':
        o.namespaceLabels = selectorArg(p);
        namespaceLabelsAt = p;
        break;
      case 'labels':
        o.labels = selectorArg(p);
        break;
      case 'pods': {
        argCount(p, 1, 1, 'disabled|insecure|verified');
        const mode = p.args[0]!.text;
        if (mode !== 'disabled' && mode !== 'insecure' && mode !== 'verified') {
          throw directiveError(p.args[0]!, `kubernetes: pods: "${mode}" is not disabled, insecure or verified`);
        }
        o.pods = mode satisfies PodMode;
        break;
      }
      case 'endpoint_pod_names':
        argCount(p, 0, 0, 'no arguments');
        o.endpointPodNames = true;
        break;
      case 'ttl':
        argCount(p, 1, 1, 'one number of seconds');
        o.ttl = intArg(p.args[0], p, 'kubernetes: ttl', 0, 3600);
        break;
      case 'noendpoints':
        argCount(p, 0, 0, 'no arguments');
        o.noEndpoints = true;
        break;
      case 'fallthrough':
        o.fallthrough = p.args.length ? p.args.map((t) => canonicalZone(t.text)) : ['.'];
        break;
      case 'ignore':
        if (p.args.length !== 1 || p.args[0]!.text !== 'empty_service')
          throw directiveError(p, 'kubernetes: ignore: expected empty_service');
        o.ignoreEmptyService = true;
        break;
      case 'startup_timeout':
        argCount(p, 1, 1, 'a duration, e.g. 5s');
        o.startupTimeoutMs = durationArg(p.args[0], p, 'kubernetes: startup_timeout');
        break;
      default:
        if (REMOVED[p.name] !== undefined) throw directiveError(p, `kubernetes: ${REMOVED[p.name]}`);
        if (UNSUPPORTED[p.name] !== undefined) throw directiveError(p, `kubernetes: ${UNSUPPORTED[p.name]}`);
        if (CLIENT_TUNING.has(p.name)) {
          argCount(p, 1, 1, 'one number');
          intArg(p.args[0], p, `kubernetes: ${p.name}`, 0, 1_000_000);
          break;
        }
        unknownProperty(p, 'kubernetes');
    }
  }
  if (namespacesAt !== undefined && namespaceLabelsAt !== undefined) {
    throw directiveError(namespaceLabelsAt, 'kubernetes: namespaces and namespace_labels cannot both be set');
  }
  let source: SourceConfig;
  if (manifests !== undefined) {
    if (sourceAt !== undefined)
      throw directiveError(sourceAt, `kubernetes: ${sourceAt.name} cannot be used with manifests`);
    source = { kind: 'manifests', path: manifests };
  } else if (kubeconfig !== undefined) {
    // CoreDNS: kubeconfig takes precedence over endpoint.
    source = { kind: 'kubeconfig', file: kubeconfig.file, context: kubeconfig.context };
  } else if (endpoint !== undefined) {
    source = { kind: 'endpoint', url: endpoint, tls };
  } else {
    source = { kind: 'in-cluster' };
  }
  o.source = source;
  const chosenAt = source.kind === 'kubeconfig' ? kubeconfigAt : source.kind === 'endpoint' ? endpointAt : undefined;
  if (chosenAt) o.sourceLine = { file: chosenAt.file, line: chosenAt.line };
  return o;
}

/** Addresses we answer on: the `bind` addresses, else every non-loopback interface address (CoreDNS's boundIPs). */
function localAddresses(ctx: SetupContext): string[] {
  const bound = ctx.block.bindAddresses.map((a) => canonicalIP(a)).filter((a): a is string => a !== null);
  if (bound.length > 0) return bound;
  const out: string[] = [];
  for (const list of Object.values(networkInterfaces())) {
    for (const a of list ?? []) {
      if (a.internal) continue;
      const ip = canonicalIP(a.address);
      if (ip !== null && !out.includes(ip)) out.push(ip);
    }
  }
  return out;
}

function describeSource(c: SourceConfig): string {
  switch (c.kind) {
    case 'manifests':
      return `manifests ${c.path}`;
    case 'endpoint':
      return `endpoint ${c.url}`;
    case 'kubeconfig':
      return `kubeconfig ${c.file}`;
    default:
      return 'in-cluster API';
  }
}

/** Blocks server start until the first sync or `startup_timeout`, as CoreDNS does. */
function waitForSync(index: ClusterIndex, timeoutMs: number, log: Logger): Promise<void> {
  if (index.synced) return Promise.resolve();
  return new Promise((done) => {
    let finished = false;
    const finish = () => {
      if (finished) return;
      finished = true;
      clearInterval(tick);
      clearTimeout(deadline);
      unlisten?.();
      done();
    };
    const tick = setInterval(() => log.info('waiting for Kubernetes API before starting server'), 500);
    const deadline = setTimeout(() => {
      log.warn('starting server with unsynced Kubernetes API');
      finish();
    }, timeoutMs);
    const unlisten: (() => void) | undefined = index.listen({ onSynced: finish });
  });
}

export function createInstance(
  o: KubernetesOptions,
  ctx: SetupContext,
  at: Directive,
): KubernetesInstance & ApiSyncSource {
  const log = ctx.logger;
  const projection: ProjectionOptions = { endpointPodNames: o.endpointPodNames, warn: warnEachOnce(log) };
  const spec: SourceSpec = {
    source: o.source,
    labels: o.labels,
    namespaceLabels: o.namespaceLabels,
    noEndpoints: o.noEndpoints,
    watchPods: o.pods === 'verified',
    endpointPodNames: o.endpointPodNames,
    manifestPollMs: o.manifestPollMs,
  };
  // In a worker the primary runs the one watcher and relays its events (relay.ts). The
  // index and its source outlive a reload that keeps the same source (feed.ts).
  const clientMetrics = ctx.services.get(KUBE_CLIENT_METRICS);
  const feed = ctx.services
    .get(KUBE_FEEDS)
    .feedFor(spec, () =>
      relayed()
        ? new RelayedSource(ctx.services.get(WORKER_RELAY), spec, describeSource(o.source))
        : sourceFromSpec(spec, projection, log, clientMetrics),
    );
  const { index, source } = feed;
  const apiStates = ctx.services.get(API_STATES);
  let local: string[] | null = null;
  const handler = new KubernetesHandler(
    o,
    index,
    (req) => ctx.resolve(req),
    () => (local ??= localAddresses(ctx)),
    ctx.invalidation,
  );
  const listener: IndexListener = {
    onChange: (c) => {
      // The handler drops what the change made wrong (handler.ts forget).
      if (!index.synced) return;
      // With workers the primary observes each event once (relay.ts), not every worker again.
      if (c.slice !== null && !(source instanceof RelayedSource))
        clientMetrics.observeProgramming(c.slice.record, c.slice.service);
    },
    onSynced: () => {
      log.info(`${source.description}: synced (${index.services.size} services, ${index.namespaces.size} namespaces)`);
    },
    onConnection: (up, detail) => {
      // With workers the primary says it once for all of them (relay.ts).
      if (source instanceof RelayedSource) return;
      if (up) log.info(`${detail}: reachable again`);
      else log.warn(`${detail}: unreachable; serving the last known state`);
    },
  };
  let hold: FeedHold | null = null;
  let unlisten: (() => void) | null = null;
  let untrack: (() => void) | null = null;
  return {
    name: 'kubernetes',
    handler,
    index,
    options: o,
    transfer: clusterTransfer(index, o, handler.lookup),
    clusterView: clusterView(index, handler.lookup, o),
    async startup() {
      // Up once synced and while connected: an instance still waiting for its first list is not up.
      untrack = apiStates.track({
        get connected() {
          return index.synced && index.connected;
        },
      });
      hold = feed.hold();
      unlisten = index.listen(listener);
      handler.open();
      try {
        await hold.start();
      } catch (e) {
        untrack();
        untrack = null;
        // Point at the line that names the kubeconfig (its context) or endpoint, not the block.
        const where = o.sourceLine ?? at;
        throw new CorefileError(where.file, where.line, `kubernetes: ${(e as Error).message}`);
      }
      await waitForSync(index, o.startupTimeoutMs, log);
    },
    async shutdown() {
      untrack?.();
      untrack = null;
      unlisten?.();
      unlisten = null;
      handler.close();
      await hold?.release();
      hold = null;
    },
    ready: () => index.synced,
    readyDetail: () => (index.synced ? undefined : index.problem),
    metadata: (req, md) => publishMetadata(o, index, req, md),
    // For the status page: where this instance's view of the cluster stands.
    apiSync: () => ({
      zones: o.zones,
      source: source.description,
      synced: index.synced,
      connected: index.connected,
      services: index.services.size,
      endpointSlices: index.slices.size,
      namespaces: index.namespaces.size,
      pods: index.pods.size,
      lastChange: index.serial,
    }),
  };
}

export const setup: PluginSetup = (ds, ctx) => {
  const d = once(ds, 'kubernetes');
  return createInstance(parseOptions(d, ctx), ctx, d);
};
