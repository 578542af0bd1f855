// `routes [ADDRESS] { token TOKEN | tokenfile FILE; namespaces NS...; zone ZONE; bookmark DURATION;
// history N; endpoint URL | kubeconfig FILE [CONTEXT] | manifests PATH }`: the route stream
// `clusterdns connect` follows (KubeVPN's WatchNamespaceRoutes). Its Services come from the
// kubernetes plugin serving ZONE in this configuration (no second watch), or, when there is
// none or a source is named here, from a Services-only watch of its own.

import { readFileSync } from 'node:fs';
import { dirname, isAbsolute, resolve } from 'node:path';
import { CorefileError, directiveError } from '../../corefile/errors.js';
import type { Directive, Token } from '../../corefile/types.js';
import { canonicalZone } from '../../dns/name.js';
import { warnEachOnce, type Logger } from '../../log.js';
import { durationArg, intArg, once, unknownProperty } from '../../corefile/args.js';
import { ClusterIndex } from '../../cluster/clusterindex.js';
import type { KubeSource } from '../../cluster/events.js';
import { MANIFEST_POLL_MS, type SourceConfig } from '../../cluster/events.js';
import {
  relayed,
  RelayedSource,
  sourceFromSpec,
  WORKER_RELAY,
  type SourceSpec,
  type WorkerRelay,
} from '../../cluster/relay.js';
import { KUBE_CLIENT_METRICS, type KubeClientMetrics } from '../../cluster/metrics.js';
import type { ClusterView, PluginInstance, PluginSetup, SetupContext } from '../plugin.js';
import { RouteFeed } from './feed.js';
import { RouteStream } from './stream.js';

/** KubeVPN's TunConfigService port. */
export const DEFAULT_ADDRESS = ':9002';
export const PATH = '/routes';
export const DEFAULT_BOOKMARK_MS = 30_000;
export const DEFAULT_HISTORY = 1000;

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

export interface RoutesConfig {
  address: string;
  /** Literal token, or the file it is read from. */
  token: { kind: 'literal'; value: string } | { kind: 'file'; path: string };
  namespaces: Set<string>;
  /** The kubernetes plugin's zone to follow; null = this block's, else the first. */
  zone: string | null;
  bookmarkMs: number;
  history: number;
  /** A source of our own; null = the kubernetes plugin's index (in-cluster API when there is none). */
  source: SourceConfig | null;
}

function err(at: Directive | Token, what: string): CorefileError {
  return directiveError(at, `routes: ${what}`);
}

function args(p: Directive, min: number, max: number, usage: string): Token[] {
  if (p.args.length < min || p.args.length > max) throw err(p, `${p.name}: expected ${usage}`);
  return p.args;
}

function readToken(path: string): string {
  return readFileSync(path, 'utf8').trim();
}

export function parseRoutes(d: Directive, corefile: string): RoutesConfig {
  if (d.args.length > 1) throw err(d.args[1]!, 'takes at most one address');
  const rel = (p: string) => (isAbsolute(p) ? p : resolve(dirname(corefile), p));
  let token: RoutesConfig['token'] | null = null;
  let sourceAt: Directive | null = null;
  let zoneAt: Directive | null = null;
  const cfg: Omit<RoutesConfig, 'token'> = {
    address: d.args[0]?.text ?? DEFAULT_ADDRESS,
    namespaces: new Set(),
    zone: null,
    bookmarkMs: DEFAULT_BOOKMARK_MS,
    history: DEFAULT_HISTORY,
    source: null,
  };
  const setSource = (p: Directive, s: SourceConfig) => {
    if (sourceAt !== null) throw err(p, `${p.name} cannot be used with ${sourceAt.name}`);
    sourceAt = p;
    cfg.source = s;
  };
  for (const p of d.block ?? []) {
    switch (p.name) {
      case 'token': {
        const [t] = args(p, 1, 1, 'one token');
        if (token !== null) throw err(p, 'give one of token or tokenfile');
        if (t!.text === '') throw err(t!, 'the token is empty');
        token = { kind: 'literal', value: t!.text };
        break;
      }
      case 'tokenfile': {
        const [t] = args(p, 1, 1, 'one file');
        if (token !== null) throw err(p, 'give one of token or tokenfile');
        const path = rel(t!.text);
        let value: string;
        try {
          value = readToken(path);
        } catch (e) {
          throw err(t!, `tokenfile: cannot read ${path}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
        }
        if (value === '') throw err(t!, `tokenfile: ${path} is empty`);
        token = { kind: 'file', path };
        break;
      }
      case 'namespaces':
        for (const t of args(p, 1, Infinity, 'NAMESPACE...')) {
          if (!DNS_LABEL.test(t.text)) throw err(t, `namespaces: "${t.text}" is not a namespace name`);
          cfg.namespaces.add(t.text);
        }
        break;
      case 'zone':
        cfg.zone = canonicalZone(args(p, 1, 1, 'one zone')[0]!.text);
        zoneAt = p;
        break;
      case 'bookmark':
        args(p, 1, 1, 'a duration');
        cfg.bookmarkMs = durationArg(p.args[0], p, 'routes: bookmark');
        if (cfg.bookmarkMs < 10) throw err(p.args[0]!, 'bookmark must be at least 10ms');
        break;
      case 'history':
        cfg.history = intArg(args(p, 1, 1, 'a number of changes')[0], p, 'routes: history', 1, 1_000_000);
        break;
      case 'endpoint': {
        const [u] = args(p, 1, 1, 'a URL');
        let url: URL | null;
        try {
          url = new URL(u!.text);
        } catch {
          url = null;
        }
        if (url === null || (url.protocol !== 'http:' && url.protocol !== 'https:'))
          throw err(u!, `endpoint: "${u!.text}" is not an http(s) URL`);
        setSource(p, { kind: 'endpoint', url: u!.text, tls: null });
        break;
      }
      case 'kubeconfig': {
        const [f, c] = args(p, 1, 2, 'FILE [CONTEXT]');
        setSource(p, { kind: 'kubeconfig', file: rel(f!.text), context: c?.text });
        break;
      }
      case 'manifests':
        setSource(p, { kind: 'manifests', path: rel(args(p, 1, 1, 'a file or directory')[0]!.text) });
        break;
      default:
        unknownProperty(p, 'routes');
    }
  }
  if (token === null) throw err(d, 'a token or tokenfile is required (the stream is never served without one)');
  if (zoneAt !== null && sourceAt !== null)
    throw err(
      zoneAt,
      `zone chooses a kubernetes plugin to follow; it cannot be used with ${(sourceAt as Directive).name}`,
    );
  return { ...cfg, token };
}

/**
 * The cluster view (the kubernetes plugin's, published on its instance) to follow: the one
 * serving `zone`, else this block's, else the first.
 */
function findClusterView(ctx: SetupContext, zone: string | null): ClusterView | undefined {
  const all = ctx.instances().flatMap((i) => (i.clusterView === undefined ? [] : [i.clusterView]));
  if (zone !== null) return all.find((v) => v.zones.includes(zone));
  return ctx.blockInstances().find((i) => i.clusterView !== undefined)?.clusterView ?? all[0];
}

/** A Services-only watch of our own (relayed through the primary when running as a worker). */
function ownSource(
  source: SourceConfig,
  log: Logger,
  relay: () => WorkerRelay,
  metrics: () => KubeClientMetrics,
): KubeSource {
  const spec: SourceSpec = {
    source,
    labels: '',
    namespaceLabels: '',
    noEndpoints: true,
    watchPods: false,
    endpointPodNames: false,
    manifestPollMs: MANIFEST_POLL_MS,
  };
  const warn = warnEachOnce(log);
  return relayed()
    ? new RelayedSource(relay(), spec, `routes ${source.kind}`)
    : sourceFromSpec(spec, { endpointPodNames: false, warn }, log, metrics());
}

export const setup: PluginSetup = (ds, ctx): PluginInstance => {
  const d = once(ds, 'routes');
  const cfg = parseRoutes(d, ctx.corefile);
  let feed: RouteFeed | null = null;
  let stream: RouteStream | null = null;
  let source: KubeSource | null = null;
  let release: (() => Promise<void>) | null = null;
  let lastToken = cfg.token.kind === 'literal' ? cfg.token.value : '';
  const token = (): string => {
    if (cfg.token.kind === 'literal') return cfg.token.value;
    // Read on every request, so a rotated Secret takes effect; the last good token is kept.
    try {
      const t = readToken(cfg.token.path);
      if (t !== '') lastToken = t;
    } catch (e) {
      ctx.logger.warn(`tokenfile ${cfg.token.path}: ${(e as Error).message}; using the last token read`);
    }
    return lastToken;
  };
  return {
    name: 'routes',
    async startup() {
      if (cfg.token.kind === 'file') token();
      feed = new RouteFeed(cfg.namespaces, cfg.history);
      const view = cfg.source === null ? findClusterView(ctx, cfg.zone) : undefined;
      if (view !== undefined) {
        feed.attach(view.index);
      } else {
        if (cfg.zone !== null)
          throw new CorefileError(
            d.file,
            d.line,
            `routes: no kubernetes plugin in this configuration serves zone ${cfg.zone}`,
          );
        const index = new ClusterIndex();
        feed.attach(index);
        source = ownSource(
          cfg.source ?? { kind: 'in-cluster' },
          ctx.logger,
          () => ctx.services.get(WORKER_RELAY),
          () => ctx.services.get(KUBE_CLIENT_METRICS),
        );
        try {
          await source.start(index.apply);
        } catch (e) {
          throw new CorefileError(d.file, d.line, `routes: ${(e as Error).message}`);
        }
      }
      stream = new RouteStream(feed, { token, allowed: cfg.namespaces }, cfg.bookmarkMs);
      try {
        release = await ctx.http.route(cfg.address, PATH, stream.handle);
      } catch (e) {
        throw new CorefileError(d.file, d.line, `routes: ${(e as Error).message}`);
      }
    },
    async shutdown() {
      feed?.detach();
      stream?.stop();
      await release?.();
      release = null;
      await source?.stop();
      source = null;
    },
    ready: () => feed?.synced ?? false,
  };
};
