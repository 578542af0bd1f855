// The control loop: a node reflector (list + watch, like CPA's informer) keeps the cluster
// status current; every poll period the ConfigMap is read (or re-created from the defaults),
// the expected replicas computed, and each target scaled through /scale when it differs.
// Any error fails the poll and changes nothing; --max-sync-failures bounds a failing streak.
import { setTimeout as sleep } from 'node:timers/promises';
import type { KubeClient } from '../kube/http.js';
import { Reflector, type BackoffOptions } from '../kube/reflector.js';
import type { Logger } from '../log.js';
import { clusterStatus, describeStatus, projectNode, type ClusterStatus, type NodeRecord } from './cluster.js';
import { fetchOrCreateConfigMap } from './configmap.js';
import { expectedReplicas, parseScalingParams, ParamsError, type ParsedParams, type ScalingParams } from './params.js';
import { describeTarget, scaleTarget, type ScaleResult, type ScaleTarget } from './target.js';

export interface AutoscalerOptions {
  client: KubeClient;
  namespace: string;
  configMap: string;
  targets: readonly ScaleTarget[];
  /** ConfigMap data to create the ConfigMap with when it is missing. */
  defaultParams?: Record<string, string>;
  pollPeriodMs: number;
  /** Label selector for the node list and watch (`--nodelabels`). */
  nodeLabels?: string;
  /** Stop after this many consecutive failed polls; 0 = never. */
  maxSyncFailures: number;
  log: Logger;
  /** How long a poll waits for the first node list before failing (ms). Default 5000, as CPA; run() also bounds it by the poll period. */
  nodeSyncWaitMs?: number;
  /** Node reflector retry backoff (tests shorten it). */
  backoff?: BackoffOptions;
}

export interface PollOutcome {
  status: ClusterStatus;
  mode: ScalingParams['mode'];
  replicas: number;
  results: ScaleResult[];
}

export type LastPoll = { ok: true; time: number } | { ok: false; time: number; error: string } | undefined;

export class Autoscaler {
  readonly nodes: Reflector<NodeRecord>;
  /** The outcome of the most recent poll, for /last-poll. */
  lastPoll: LastPoll;
  consecutiveFailures = 0;
  readonly #o: AutoscalerOptions;
  readonly #log: Logger;
  #params: { resourceVersion: string; scaling: ScalingParams } | undefined;
  #lastNodeError = '';

  constructor(opts: AutoscalerOptions) {
    this.#o = opts;
    this.#log = opts.log;
    this.nodes = new Reflector<NodeRecord>({
      client: opts.client,
      path: '/api/v1/nodes',
      labelSelector: opts.nodeLabels || undefined,
      project: (obj) => projectNode(obj, (msg) => this.#log.warn(msg)),
      backoff: opts.backoff,
      onError: (err) => {
        if (err.message !== this.#lastNodeError) this.#log.warn(`node watch: ${err.message}; retrying`);
        this.#lastNodeError = err.message;
      },
      onSynced: () =>
        this.#log.info(`listed ${this.nodes.store.size} nodes${opts.nodeLabels ? ` matching ${opts.nodeLabels}` : ''}`),
      onConnectionChange: (up) => {
        if (up) this.#lastNodeError = '';
      },
      warn: (msg) => this.#log.warn(msg),
    });
  }

  /** One poll; throws (and changes nothing more) on the first error. */
  async pollOnce(signal?: AbortSignal, nodeSyncWaitMs = this.#o.nodeSyncWaitMs ?? 5000): Promise<PollOutcome> {
    const o = this.#o;
    if (!this.nodes.hasSynced) {
      // Stopping aborts the reflector, which ends this wait too.
      await this.nodes.waitForSync(AbortSignal.timeout(nodeSyncWaitMs)).catch(() => {
        throw new Error(`nodes not listed yet${this.#lastNodeError ? `: ${this.#lastNodeError}` : ''}`);
      });
    }
    const status = clusterStatus(this.nodes.store.values());
    const cm = await fetchOrCreateConfigMap(
      o.client,
      { namespace: o.namespace, name: o.configMap },
      o.defaultParams,
      signal,
    );
    if (cm.created) this.#log.info(`created ConfigMap ${o.namespace}/${o.configMap} from --default-params`);
    const scaling = this.#syncParams(cm.data, cm.resourceVersion);
    const replicas = expectedReplicas(scaling, status);
    const results: ScaleResult[] = [];
    for (const target of o.targets) {
      const r = await scaleTarget(o.client, target, replicas, signal);
      if (r.changed) {
        this.#log.info(`cluster status: ${describeStatus(status)}; ${scaling.mode} params want ${replicas}`);
        this.#log.info(`updating ${describeTarget(target)} from ${r.previous} to ${r.replicas} replicas`);
      }
      results.push(r);
    }
    return { status, mode: scaling.mode, replicas, results };
  }

  /** Poll now and then every period until `signal` aborts or the failure limit is reached. */
  async run(signal: AbortSignal): Promise<'stopped' | 'too-many-failures'> {
    this.nodes.start();
    const o = this.#o;
    while (!signal.aborted) {
      const started = Date.now();
      try {
        // A dead API fails each poll within its period, so --max-sync-failures=N ends after N periods.
        const out = await this.pollOnce(signal, Math.min(o.nodeSyncWaitMs ?? 5000, o.pollPeriodMs));
        if (this.consecutiveFailures > 0) this.#log.info(`poll succeeded after ${this.consecutiveFailures} failed`);
        if (this.lastPoll === undefined && out.results.every((r) => !r.changed)) {
          this.#log.info(
            `cluster status: ${describeStatus(out.status)}; ${out.mode} params want ${out.replicas}; targets already there`,
          );
        }
        this.consecutiveFailures = 0;
        this.lastPoll = { ok: true, time: Date.now() };
      } catch (err) {
        if (signal.aborted) break;
        const message = err instanceof Error ? err.message : String(err);
        this.consecutiveFailures++;
        this.lastPoll = { ok: false, time: Date.now(), error: message };
        const limit = o.maxSyncFailures > 0 ? ` (${this.consecutiveFailures}/${o.maxSyncFailures} consecutive)` : '';
        this.#log.error(`poll failed, nothing changed${limit}: ${message}`);
        if (o.maxSyncFailures > 0 && this.consecutiveFailures >= o.maxSyncFailures) return 'too-many-failures';
      }
      try {
        await sleep(Math.max(0, o.pollPeriodMs - (Date.now() - started)), undefined, { signal });
      } catch {
        break;
      }
    }
    return 'stopped';
  }

  async stop(): Promise<void> {
    await this.nodes.stop();
  }

  /** Params for this ConfigMap version: re-parsed only when its resourceVersion changes. */
  #syncParams(data: Record<string, string>, resourceVersion: string): ScalingParams {
    if (this.#params && this.#params.resourceVersion === resourceVersion && resourceVersion !== '')
      return this.#params.scaling;
    const where = `ConfigMap ${this.#o.namespace}/${this.#o.configMap}`;
    let parsed: ParsedParams;
    try {
      parsed = parseScalingParams(data);
    } catch (err) {
      if (err instanceof ParamsError) throw new ParamsError(`${where}: ${err.message}`);
      throw err;
    }
    const old = this.#params?.resourceVersion;
    this.#log.info(
      `${where} (resourceVersion ${resourceVersion}${old ? `, was ${old}` : ''}): ${parsed.scaling.mode} params ${JSON.stringify(parsed.scaling.params)}`,
    );
    if (parsed.unknownKeys.length > 0) {
      this.#log.warn(
        `${where}: ignoring unknown ${parsed.scaling.mode} params ${parsed.unknownKeys.map((k) => `"${k}"`).join(', ')}`,
      );
    }
    this.#params = { resourceVersion, scaling: parsed.scaling };
    return parsed.scaling;
  }
}
