// The cluster DNS server role: validate the Corefile, then serve in this process or in
// worker processes that share the sockets. Loaded only when the server role runs, so the
// other subcommands start without loading every plugin.

import cluster from 'node:cluster';
import { writeFileSync, rmSync } from 'node:fs';
import { CorefileError } from './corefile/errors.js';
import { pluginOrder, primaryServices } from './plugins/order.js';
import { DnsServer } from './server/server.js';
import { parseConfig, readConfigSource, Runtime, type ConfigSource } from './server/runtime.js';
import { HttpServices } from './server/http.js';
import { VERSION } from './version.js';
import { coreLog } from './log.js';
import { servingStarted } from './heap.js';
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

function banner(server: DnsServer | null, cfgKeys: string[], quiet: boolean): void {
  if (quiet) return;
  process.stdout.write(cfgKeys.join('\n') + '\n' + versionText());
  void server;
}

function blockKeys(rt: Runtime): string[] {
  const out: string[] = [];
  for (const b of rt.config.blocks) out.push(b.keys.map((k) => `${k.zone}:${k.port}`).join(' '));
  return out;
}

export async function runServer(flags: ServerFlags): Promise<void> {
  // Validate everything before binding anything: a config error exits 1 with FILE:LINE.
  let cfg;
  let listenAddresses: Array<{ host: string; port: number }> = [];
  try {
    // A replacement worker starts with what the others run, not with a Corefile that may have broken since.
    const running = cluster.isWorker ? process.env.CLUSTERDNS_RUNNING_CONFIG : undefined;
    cfg = parseConfig(running ? (JSON.parse(running) as ConfigSource) : readConfigSource(flags.conf), flags.port);
    listenAddresses = (await Runtime.create(cfg, { http: new HttpServices(), requestReload: () => {}, shuttingDown: () => false })).listenAddresses();
  } catch (e) {
    if (e instanceof CorefileError) fail(e.message);
    fail(`clusterdns: ${(e as Error).message}`);
  }

  if (flags.workers > 1 && cluster.isPrimary) {
    runPrimary(flags, cfg.blocks.map((b) => b.keys.map((k) => `${k.zone}:${k.port}`).join(' ')), listenAddresses);
    return;
  }

  if (cluster.isWorker) setupWorkerMetrics();
  const server = new DnsServer({ conf: flags.conf, defaultPort: flags.port });
  try {
    await server.start(cfg);
  } catch (e) {
    if (cluster.isWorker) process.send?.({ type: 'fatal', message: (e as Error).message });
    fail(`clusterdns: ${(e as Error).message}`);
  }
  servingStarted();
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
  process.on('SIGUSR1', () => void server.reload('SIGUSR1'));
  if (cluster.isWorker) {
    process.on('message', (m: { type?: string }) => {
      if (m?.type === 'shutdown') void stop();
      else if (m?.type === 'reload') void server.reload('SIGUSR1');
      else if (m?.type === 'running-config?') process.send?.({ type: 'running-config', source: server.runtime?.config.source });
    });
    process.send?.({ type: 'ready' });
    return;
  }
  if (flags.pidfile) writeFileSync(flags.pidfile, `${process.pid}\n`);
  banner(server, blockKeys(server.runtime!), flags.quiet);
}

function runPrimary(flags: ServerFlags, keys: string[], listenAddresses: Array<{ host: string; port: number }>): void {
  cluster.schedulingPolicy = cluster.SCHED_NONE;
  // One UDP socket per worker and listener, held here so a worker's replacement gets the same one.
  const steered = SteeredSockets.open(listenAddresses, flags.workers);
  servePrimaryMetrics();
  for (const start of primaryServices) start();
  let stopping = false;
  let started = 0;
  const shardOfWorker = new Map<number, number>();
  const fork = (running: ConfigSource | undefined, shard: number) => {
    const sockets = steered?.forWorker(shard);
    if (sockets) cluster.setupPrimary({ stdio: sockets.stdio });
    const w = cluster.fork({ CLUSTERDNS_WORKER: '1', CLUSTERDNS_WORKERS: String(flags.workers), CLUSTERDNS_WORKER_INDEX: String(shard), ...sockets?.env, ...(running ? { CLUSTERDNS_RUNNING_CONFIG: JSON.stringify(running) } : {}) });
    shardOfWorker.set(w.id, shard);
    w.on('message', (m: { type?: string; message?: string }) => {
      if (m?.type === 'fatal') {
        stopping = true;
        fail(`clusterdns: ${m.message ?? 'worker failed to start'}`);
      }
      if (m?.type === 'ready') {
        steered?.workerReady(shard);
        started++;
        if (started === flags.workers) {
          servingStarted();
          if (flags.pidfile) writeFileSync(flags.pidfile, `${process.pid}\n`);
          banner(null, keys, flags.quiet);
        }
      }
    });
  };
  for (let i = 0; i < flags.workers; i++) fork(undefined, i);
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
    setTimeout(() => void runningConfig().then((running) => fork(running, shard)), 500);
  });
  const stopAll = () => {
    if (stopping) return;
    stopping = true;
    // A signal, not a message: a worker still starting has no message handler yet.
    for (const w of Object.values(cluster.workers ?? {})) w?.process.kill('SIGTERM');
    if (Object.keys(cluster.workers ?? {}).length === 0) process.exit(0);
  };
  process.on('SIGTERM', stopAll);
  process.on('SIGINT', stopAll);
  process.on('SIGUSR1', () => {
    for (const w of Object.values(cluster.workers ?? {})) w?.send({ type: 'reload' });
  });
}

/** The configuration a live worker runs (undefined when none answers within a second). */
function runningConfig(): Promise<ConfigSource | undefined> {
  const w = Object.values(cluster.workers ?? {}).find((x) => x?.isConnected());
  if (!w) return Promise.resolve(undefined);
  return new Promise((resolve) => {
    const done = (source: ConfigSource | undefined) => {
      clearTimeout(t);
      w.off('message', onMessage);
      resolve(source);
    };
    const onMessage = (m: { type?: string; source?: ConfigSource }) => {
      if (m?.type === 'running-config') done(m.source);
    };
    const t = setTimeout(() => done(undefined), 1000);
    w.on('message', onMessage);
    w.send({ type: 'running-config?' });
  });
}
