// The cluster DNS server role: validate the Corefile, then serve in this process or in
// worker processes that share the sockets. Loaded only when the server role runs, so the
// other subcommands start without loading every plugin.

import cluster, { type Worker } from 'node:cluster';
import { writeFileSync, rmSync } from 'node:fs';
import { CorefileError } from './corefile/errors.js';
import { pluginOrder, primaryServices } from './plugins/order.js';
import { DnsServer, type PreparedConfig } from './server/server.js';
import { parseConfig, readConfigSource, Runtime, type ConfigSource, type LoadedConfig } from './server/runtime.js';
import {
  sendTo,
  type ConfigAck,
  type ConfigMessage,
  type ConfigRequest,
  type ReloadRequest,
  type WorkerFatal,
  type WorkerMessage,
  type WorkerState,
} from './server/ipc.js';
import type { PluginInstance } from './plugins/plugin.js';
import { HttpServices } from './server/http.js';
import { ServerServices } from './server/services.js';
import { VERSION } from './version.js';
import { coreLog, logger } from './log.js';
import { servePrimaryMetrics, setupWorkerMetrics } from './metrics/cluster.js';
import { SteeredSockets } from './server/shards.js';

export interface ServerFlags {
  conf?: string;
  port: number;
  quiet: boolean;
  pidfile?: string;
  workers: number;
}

export function versionText(): string {
  return `clusterdns-${VERSION}\n${process.platform}/${process.arch}, node ${process.version}\n`;
}

export function pluginsText(): string {
  const names = pluginOrder.map(([n]) => `  dns.${n}`).sort();
  return `Server types:\n  dns\n\nCaddyfile loaders:\n  flag\n  default\n\nOther plugins:\n${names.join('\n')}\n`;
}

function fail(msg: string): never {
  process.stderr.write(msg.endsWith('\n') ? msg : msg + '\n');
  process.exit(1);
}

/** A start-up error; every worker fails the same way, so a worker hands it to the primary, which prints it once. */
function failStart(e: unknown): void {
  const message = e instanceof CorefileError ? e.message : `clusterdns: ${(e as Error).message}`;
  if (cluster.isWorker && process.send) {
    process.send({ type: 'fatal', message } satisfies WorkerFatal, () => process.exit(1));
    return;
  }
  fail(message);
}

function banner(server: DnsServer | null, cfgKeys: string[], quiet: boolean): void {
  if (quiet) return;
  process.stdout.write(cfgKeys.join('\n') + '\n' + versionText());
  void server;
}

/** CoreDNS's start-up lines: `ZONE:PORT` per zone, with ` on ADDRESS` for a block that `bind`s. */
function blockKeys(rt: Runtime): string[] {
  const out: string[] = [];
  for (const b of rt.blocks) {
    const hosts = b.info.bindAddresses.length ? b.info.bindAddresses : [''];
    for (const h of hosts) for (const k of b.info.keys) out.push(`${k.zone}:${k.port}${h ? ` on ${h}` : ''}`);
  }
  return out;
}

/** A worker's fatal message as the primary prints it once: FILE:LINE errors as they are, others after `clusterdns:`. */
function fatalText(message: string | undefined): string {
  if (message === undefined) return 'clusterdns: worker failed to start';
  return /^\S+:\d+ - /.test(message) || message.startsWith('clusterdns:') ? message : `clusterdns: ${message}`;
}

/** The configuration a worker starts with: asked of the primary, which alone reads the Corefile. */
function configFromPrimary(): Promise<{ source: ConfigSource; gen: number }> {
  return new Promise((resolve) => {
    const onMessage = (m: ConfigMessage) => {
      if (m?.type !== 'clusterdns:config' || m.op !== 'start' || !m.source) return;
      process.off('message', onMessage);
      resolve({ source: m.source, gen: m.gen });
    };
    process.on('message', onMessage);
    process.send!({ type: 'clusterdns:config-request' } satisfies ConfigRequest);
  });
}

export async function runServer(flags: ServerFlags): Promise<void> {
  // Validate everything before binding anything: a config error exits 1 with FILE:LINE.
  let cfg;
  let gen = 0;
  let keys: string[] = [];
  let listenAddresses: Array<{ host: string; port: number }> = [];
  try {
    if (cluster.isWorker) {
      // The primary read and validated it; a replacement worker gets what the others run.
      const given = await configFromPrimary();
      gen = given.gen;
      cfg = parseConfig(given.source, flags.port);
    } else {
      // The primary (or the only process) says what is wrong with the files; workers never read them.
      cfg = parseConfig(readConfigSource(flags.conf), flags.port, (m: string) => coreLog.warn(m));
      const validated = await Runtime.create(cfg, {
        http: new HttpServices(),
        services: new ServerServices(),
        requestReload: () => {},
        shuttingDown: () => false,
      });
      keys = blockKeys(validated);
      listenAddresses = validated.listenAddresses();
    }
  } catch (e) {
    failStart(e);
    return;
  }

  if (flags.workers > 1 && cluster.isPrimary) {
    runPrimary(flags, cfg, keys, listenAddresses);
    return;
  }

  if (cluster.isWorker) setupWorkerMetrics();
  const toPrimary = (reason: string) =>
    process.send?.({ type: 'clusterdns:reload-request', reason } satisfies ReloadRequest);
  const server = new DnsServer({
    conf: flags.conf,
    defaultPort: flags.port,
    requestReload: cluster.isWorker ? toPrimary : undefined,
  });
  try {
    await server.start(cfg);
  } catch (e) {
    failStart(e);
    return;
  }
  let stopping: Promise<void> | null = null;
  const stop = () => {
    stopping ??= (async () => {
      await server.shutdown();
      if (flags.pidfile && !cluster.isWorker) rmSync(flags.pidfile, { force: true });
      process.exit(0);
    })();
    return stopping;
  };
  process.on('SIGTERM', () => void stop());
  process.on('SIGINT', () => void stop());
  process.on('SIGUSR1', () => (cluster.isWorker ? toPrimary('SIGUSR1') : void server.reload('SIGUSR1')));
  if (cluster.isWorker) {
    const steps = workerConfigSteps(server, flags.port);
    process.on('message', (m: { type?: string }) => {
      if (m?.type === 'shutdown') void stop();
      else if (m?.type === 'clusterdns:config') void steps(m as ConfigMessage);
    });
    process.send?.({ type: 'clusterdns:worker', state: 'ready', gen } satisfies WorkerState);
    return;
  }
  if (flags.pidfile) writeFileSync(flags.pidfile, `${process.pid}\n`);
  banner(server, blockKeys(server.runtime!), flags.quiet);
}

/**
 * CLUSTERDNS_TEST_FAIL_PREPARE=ID:TEXT, for tests only: the worker with cluster id ID fails
 * to prepare any configuration containing TEXT, as a worker that cannot start it would.
 */
function testPrepareFailure(source: ConfigSource): void {
  const hook = process.env['CLUSTERDNS_TEST_FAIL_PREPARE'];
  if (!hook) return;
  const colon = hook.indexOf(':');
  if (String(cluster.worker?.id) === hook.slice(0, colon) && source.text.includes(hook.slice(colon + 1))) {
    throw new Error(`test hook: worker ${cluster.worker?.id} refuses this configuration`);
  }
}

/** In a worker: carries out the primary's configuration steps on `server`. */
function workerConfigSteps(server: DnsServer, defaultPort: number): (m: ConfigMessage) => Promise<void> {
  const prepared = new Map<number, PreparedConfig>();
  const ack = (op: ConfigAck['op'], gen: number, error?: string) => {
    if (process.connected) process.send!({ type: 'clusterdns:config-ack', op, gen, error } satisfies ConfigAck);
  };
  const open = async (gen: number) => {
    const p = prepared.get(gen);
    if (!p) return;
    prepared.delete(gen);
    p.gate?.open();
    await server.retire();
  };
  return async (m) => {
    switch (m.op) {
      case 'prepare':
        try {
          testPrepareFailure(m.source!);
          prepared.set(m.gen, await server.prepare(parseConfig(m.source!, defaultPort), true));
          ack('prepare', m.gen);
        } catch (e) {
          ack('prepare', m.gen, e instanceof Error ? e.message : String(e));
        }
        return;
      case 'abort': {
        const p = prepared.get(m.gen);
        prepared.delete(m.gen);
        if (p) await server.abort(p);
        return;
      }
      case 'commit': {
        const p = prepared.get(m.gen);
        if (!p) return ack('commit', m.gen, 'nothing prepared');
        await server.commit(p);
        // Queries the replaced configuration took are answered before this worker says so.
        const end = Date.now() + 5000;
        while (p.gate && server.inflightOutside(p.gate) > 0 && Date.now() < end)
          await new Promise((r) => setTimeout(r, 2));
        ack('commit', m.gen);
        // Should the primary be gone before it says open, do not hold queries for ever.
        setTimeout(() => void open(m.gen), 10_000).unref();
        return;
      }
      case 'open':
        await open(m.gen);
        return;
    }
  };
}

const reloadLog = logger('reload');

/**
 * The primary with several workers: it alone reads and validates the Corefile (at start, on
 * SIGUSR1, when the `reload` plugin, which runs only here, sees a change) and changes every
 * worker's configuration in one transaction:
 *   prepare: each worker builds and starts the new configuration beside the running one;
 *            if any cannot, all drop it and the error is logged once, here;
 *   commit:  each worker routes new queries to it but holds them (ConfigGate) and, once the
 *            queries the old configuration took are answered, acknowledges;
 *   open:    only after every worker acknowledged the commit are the held queries answered.
 * So every answer from the old configuration is sent before the first from the new one.
 * Workers are started, replaced and reconfigured one step at a time (one queue), and a
 * replacement starts with the configuration the others run.
 */
function runPrimary(
  flags: ServerFlags,
  first: LoadedConfig,
  keys: string[],
  listenAddresses: Array<{ host: string; port: number }>,
): void {
  cluster.schedulingPolicy = cluster.SCHED_NONE;
  // One UDP socket per worker and listener, held here so a worker's replacement gets the same one.
  const steered = SteeredSockets.open(listenAddresses, flags.workers);
  // The primary's own services: its workers each have theirs (DnsServer). Its cluster watch
  // counts here, and /metrics adds these families to the workers' sum.
  const services = new ServerServices();
  servePrimaryMetrics(() => services.metrics());
  for (const start of primaryServices) start(services);
  let running = first;
  let gen = 1;
  let stopping = false;
  let queue: Promise<void> = Promise.resolve();
  const enqueue = (task: () => Promise<void>) => {
    queue = queue.then(task).catch((e: Error) => coreLog.error(`workers: ${e.message}`));
    return queue;
  };

  // The reload plugin polls here only; its requests (and SIGUSR1, and workers') reload all.
  let reloadQueued = false;
  const reload = (reason: string) => {
    if (stopping || reloadQueued) return;
    reloadQueued = true;
    void enqueue(() => {
      reloadQueued = false;
      return transact(reason);
    });
  };
  const env = {
    http: new HttpServices(),
    services,
    requestReload: reload,
    shuttingDown: () => stopping,
  };
  let watcher: PluginInstance[] = [];
  const watch = async (cfg: LoadedConfig) => {
    const rt = await Runtime.create(cfg, env);
    for (const i of watcher) await i.shutdown?.();
    watcher = rt.instances.filter((i) => i.name === 'reload');
    for (const i of watcher) await i.startup?.();
  };

  const waiting = new Set<(w: Worker, m: WorkerMessage) => void>();
  cluster.on('message', (w: Worker, m: WorkerMessage) => {
    if (!m || typeof m.type !== 'string') return;
    if (m.type === 'fatal') {
      // A worker that cannot start, or a plugin that must end the server (loop): all stop. The
      // others are failing the same way (or would serve alone): end them before they see the primary go.
      stopping = true;
      for (const other of Object.values(cluster.workers ?? {})) other?.process.kill('SIGKILL');
      fail(fatalText(m.message));
    }
    if (m.type === 'clusterdns:config-request')
      sendTo(w, { type: 'clusterdns:config', op: 'start', gen, source: running.source });
    else if (m.type === 'clusterdns:reload-request') reload(m.reason);
    else for (const f of waiting) f(w, m);
  });

  /** Sends `m` to `w`; resolves with the worker's ack (error text on failure, exit or timeout). */
  const ask = (w: Worker, m: ConfigMessage, op: ConfigAck['op'], timeoutMs: number): Promise<string | undefined> =>
    new Promise((resolve) => {
      const done = (error: string | undefined) => {
        clearTimeout(t);
        waiting.delete(onAck);
        w.off('exit', onExit);
        resolve(error);
      };
      const onAck = (from: Worker, a: WorkerMessage) => {
        if (from === w && a.type === 'clusterdns:config-ack' && a.op === op && a.gen === m.gen) done(a.error);
      };
      const onExit = () => done(`worker ${w.process.pid} exited`);
      const t = setTimeout(() => done(`worker ${w.process.pid} did not answer within ${timeoutMs / 1000}s`), timeoutMs);
      waiting.add(onAck);
      w.on('exit', onExit);
      sendTo(w, m);
    });

  const transact = async (reason: string): Promise<void> => {
    let cfg: LoadedConfig;
    try {
      cfg = parseConfig(
        readConfigSource(running.source.builtin ? undefined : (flags.conf ?? running.source.file)),
        flags.port,
      );
    } catch (e) {
      coreLog.info('Reloading');
      reloadLog.error(`Corefile changed but reload failed: ${(e as Error).message}; keeping the running configuration`);
      return;
    }
    if (cfg.hash === running.hash && reason !== 'SIGUSR1') return;
    // CoreDNS's lines, which operators grep for; the new SHA512 comes from the reload plugin as it starts.
    coreLog.info('Reloading');
    try {
      // Validated here first: a Corefile that cannot be set up never reaches a worker.
      await Runtime.create(cfg, env);
    } catch (e) {
      reloadLog.error(`reload failed: ${(e as Error).message}; keeping the running configuration`);
      return;
    }
    const workers = Object.values(cluster.workers ?? {}).filter((w): w is Worker => !!w && w.isConnected());
    const next = gen + 1;
    const prepared = await Promise.all(
      workers.map((w) =>
        ask(w, { type: 'clusterdns:config', op: 'prepare', gen: next, source: cfg.source }, 'prepare', 60_000),
      ),
    );
    const failure = prepared.find((e) => e !== undefined);
    if (failure !== undefined) {
      for (const w of workers) sendTo(w, { type: 'clusterdns:config', op: 'abort', gen: next });
      reloadLog.error(`reload failed: ${failure}; keeping the running configuration`);
      return;
    }
    // Decided: a worker replaced from now on starts with this configuration.
    running = cfg;
    gen = next;
    await Promise.all(
      workers.map((w) => ask(w, { type: 'clusterdns:config', op: 'commit', gen: next }, 'commit', 10_000)),
    );
    for (const w of workers) sendTo(w, { type: 'clusterdns:config', op: 'open', gen: next });
    await watch(cfg).catch((e: Error) => reloadLog.error(`reload: ${e.message}`));
    coreLog.info('Reloading complete');
  };

  const shardOfWorker = new Map<number, number>();
  /** Starts the worker of `shard` (its steered sockets, its share of the names); resolves once it serves (or is gone). */
  const fork = (shard: number): Promise<void> =>
    new Promise((resolve) => {
      const sockets = steered?.forWorker(shard);
      if (sockets) cluster.setupPrimary({ stdio: sockets.stdio });
      const w = cluster.fork({
        CLUSTERDNS_WORKER: '1',
        CLUSTERDNS_WORKERS: String(flags.workers),
        CLUSTERDNS_WORKER_INDEX: String(shard),
        ...sockets?.env,
      });
      shardOfWorker.set(w.id, shard);
      // A worker killed a moment ago still counts as connected until the primary reads its pipe's
      // end; a message sent to it then (a metrics gather, a config step) fails with EPIPE as an
      // 'error' event on the Worker, which unhandled would end the primary and every other worker.
      // Its 'exit' follows and starts the replacement.
      let said = false;
      w.on('error', (e: Error) => {
        if (said) return;
        said = true;
        coreLog.warn(`worker ${w.process.pid}: ${e.message}; it is going away`);
      });
      const done = () => {
        clearTimeout(t);
        waiting.delete(onState);
        resolve();
      };
      const onState = (from: Worker, m: WorkerMessage) => {
        if (from !== w || m.type !== 'clusterdns:worker') return;
        steered?.workerReady(shard);
        done();
      };
      // A worker that hangs while starting must not hold up reloads and replacements for ever.
      const t = setTimeout(done, 120_000);
      waiting.add(onState);
      w.once('exit', done);
    });

  void enqueue(async () => {
    await Promise.all(Array.from({ length: flags.workers }, (_, shard) => fork(shard)));
    if (stopping) return;
    if (flags.pidfile) writeFileSync(flags.pidfile, `${process.pid}\n`);
    banner(null, keys, flags.quiet);
    await watch(first).catch((e: Error) => reloadLog.error(`reload: ${e.message}`));
  });
  cluster.on('exit', (w, code, signal) => {
    if (stopping) {
      if (Object.keys(cluster.workers ?? {}).length === 0) {
        if (flags.pidfile) rmSync(flags.pidfile, { force: true });
        process.exit(0);
      }
      return;
    }
    coreLog.error(`worker ${w.process.pid} exited (${signal ?? code}); starting another`);
    const shard = shardOfWorker.get(w.id) ?? 0;
    shardOfWorker.delete(w.id);
    steered?.workerGone(shard);
    setTimeout(() => void enqueue(() => fork(shard)), 500);
  });
  const stopAll = () => {
    if (stopping) return;
    stopping = true;
    for (const i of watcher) void i.shutdown?.();
    // A signal, not a message: a worker still starting has no message handler yet.
    for (const w of Object.values(cluster.workers ?? {})) w?.process.kill('SIGTERM');
    if (Object.keys(cluster.workers ?? {}).length === 0) process.exit(0);
  };
  process.on('SIGTERM', stopAll);
  process.on('SIGINT', stopAll);
  process.on('SIGUSR1', () => reload('SIGUSR1'));
}
