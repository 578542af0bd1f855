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

/** CoreDNS's start-up lines: `ZONE:PORT` per zone, with ` on ADDRESS` for a block that `bind`s. */
function blockKeys(rt: Runtime): string[] {
  const out: string[] = [];
  for (const b of rt.blocks) {
    const hosts = b.info.bindAddresses.length ? b.info.bindAddresses : [''];
    for (const h of hosts) for (const k of b.info.keys) out.push(`${k.zone}:${k.port}${h ? ` on ${h}` : ''}`);
  }
  return out;
}

export async function runServer(flags: ServerFlags): Promise<void> {
  // Validate everything before binding anything: a config error exits 1 with FILE:LINE.
  let cfg;
  let validated: Runtime;
  try {
    // A replacement worker starts with what the others run, not with a Corefile that may have broken since.
    const running = cluster.isWorker ? process.env.CLUSTERDNS_RUNNING_CONFIG : undefined;
    // The primary (or the only process) has said what is wrong with the file; workers need not repeat it.
    const warn = cluster.isWorker ? undefined : (m: string) => coreLog.warn(m);
    cfg = parseConfig(running ? (JSON.parse(running) as ConfigSource) : readConfigSource(flags.conf), flags.port, warn);
    validated = await Runtime.create(cfg, { http: new HttpServices(), requestReload: () => {}, shuttingDown: () => false });
  } catch (e) {
    if (e instanceof CorefileError) fail(e.message);
    fail(`clusterdns: ${(e as Error).message}`);
  }

  if (flags.workers > 1 && cluster.isPrimary) {
    runPrimary(flags, blockKeys(validated));
    return;
  }

  if (cluster.isWorker) setupWorkerMetrics();
  const server = new DnsServer({ conf: flags.conf, defaultPort: flags.port });
  try {
    await server.start(cfg);
  } catch (e) {
    const message = e instanceof CorefileError ? e.message : `clusterdns: ${(e as Error).message}`;
    // Every worker fails the same way: the primary prints it once.
    if (cluster.isWorker && process.send) process.send({ type: 'fatal', message }, () => process.exit(1));
    else fail(message);
    return;
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

function runPrimary(flags: ServerFlags, keys: string[]): void {
  cluster.schedulingPolicy = cluster.SCHED_NONE;
  servePrimaryMetrics();
  for (const start of primaryServices) start();
  let stopping = false;
  let started = 0;
  const fork = (running?: ConfigSource) => {
    const w = cluster.fork({ CLUSTERDNS_WORKER: '1', CLUSTERDNS_WORKERS: String(flags.workers), ...(running ? { CLUSTERDNS_RUNNING_CONFIG: JSON.stringify(running) } : {}) });
    w.on('message', (m: { type?: string; message?: string }) => {
      if (m?.type === 'fatal') {
        stopping = true;
        // The others are failing the same way (or would serve alone): end them before they see the primary go.
        for (const other of Object.values(cluster.workers ?? {})) other?.process.kill('SIGKILL');
        fail(m.message ?? 'clusterdns: worker failed to start');
      }
      if (m?.type === 'ready') {
        started++;
        if (started === flags.workers) {
          servingStarted();
          if (flags.pidfile) writeFileSync(flags.pidfile, `${process.pid}\n`);
          banner(null, keys, flags.quiet);
        }
      }
    });
  };
  for (let i = 0; i < flags.workers; i++) fork();
  cluster.on('exit', (w, code, signal) => {
    if (stopping) {
      if (Object.keys(cluster.workers ?? {}).length === 0) {
        if (flags.pidfile) rmSync(flags.pidfile, { force: true });
        process.exit(0);
      }
      return;
    }
    coreLog.error(`worker ${w.process.pid} exited (${signal ?? code}); starting another`);
    setTimeout(() => void runningConfig().then(fork), 500);
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
