// The process-level server: listeners that outlive configurations, the switch from one
// Runtime to the next on reload (queries in flight finish on the old chain), and shutdown.

import { Dispatcher, DnsListener, listenerKey } from './listeners.js';
import { HttpServices } from './http.js';
import { parseConfig, readConfigSource, Runtime, type LoadedConfig } from './runtime.js';
import { logger } from '../log.js';

const log = logger('');
const reloadLog = logger('reload');

export interface ServerOptions {
  conf: string | undefined;
  defaultPort: number;
}

export class DnsServer {
  readonly dispatcher = new Dispatcher();
  readonly http = new HttpServices();
  private readonly listeners = new Map<string, DnsListener[]>();
  runtime: Runtime | null = null;
  private stopping = false;
  private reloading: Promise<void> | null = null;
  private reloadAgain = false;

  constructor(private readonly opts: ServerOptions) {}

  private env() {
    return {
      http: this.http,
      requestReload: (reason: string) => {
        void this.reload(reason);
      },
      shuttingDown: () => this.stopping,
    };
  }

  /** Loads the configuration (throws CorefileError), starts plugins, binds listeners. */
  async start(config?: LoadedConfig, prepared?: Runtime): Promise<void> {
    const cfg = config ?? parseConfig(readConfigSource(this.opts.conf), this.opts.defaultPort);
    const rt = prepared ?? (await Runtime.create(cfg, this.env()));
    await this.switchTo(rt);
  }

  /** Sets the plugins up without starting them (throws CorefileError): a check before start(config, prepared). */
  prepare(config: LoadedConfig): Promise<Runtime> {
    return Runtime.create(config, this.env());
  }

  private async switchTo(rt: Runtime): Promise<void> {
    const wanted = rt.listenAddresses();
    const routers = rt.routers();
    const opened: string[] = [];
    try {
      // Inside the try: a plugin that fails to start (a port in use) must not leave the others running.
      await rt.startup();
      for (const { host, port } of wanted) {
        const key = listenerKey(host, port);
        if (this.listeners.has(key)) continue;
        // A new listener answers from its first datagram (a worker joining a shared socket
        // gets queries at once): its router must be there before it reads. No listener used
        // this key before, so this changes nothing that is serving.
        const router = routers.get(key);
        if (router) this.dispatcher.routers.set(key, router);
        opened.push(key);
        const ls: DnsListener[] = [];
        if (host === '') {
          // Every address: IPv4 and, where the host has it, IPv6.
          const v4 = new DnsListener({ host: '0.0.0.0', port, routerKey: key }, this.dispatcher);
          await v4.start();
          ls.push(v4);
          const v6 = new DnsListener({ host: '::', port: port || v4.boundPort, routerKey: key, ipv6Only: true }, this.dispatcher);
          try {
            await v6.start();
            ls.push(v6);
          } catch {
            // No IPv6 here; IPv4 alone serves.
          }
        } else {
          const l = new DnsListener({ host, port, routerKey: key }, this.dispatcher);
          await l.start();
          ls.push(l);
        }
        this.listeners.set(key, ls);
      }
    } catch (e) {
      for (const k of opened) {
        for (const l of this.listeners.get(k) ?? []) await l.close();
        this.listeners.delete(k);
        this.dispatcher.routers.delete(k);
      }
      await rt.shutdown();
      throw e;
    }
    const old = this.runtime;
    this.runtime = rt;
    this.dispatcher.routers = routers;
    const keep = new Set(wanted.map((w) => listenerKey(w.host, w.port)));
    for (const [k, ls] of this.listeners) {
      if (keep.has(k)) continue;
      this.listeners.delete(k);
      for (const l of ls) await l.close();
    }
    if (old) {
      await this.dispatcher.drained(5000);
      await old.shutdown();
    }
  }

  /** Re-reads the Corefile; an invalid one is logged and the running one kept. */
  reload(reason: string): Promise<void> {
    if (this.stopping) return Promise.resolve();
    if (this.reloading) {
      this.reloadAgain = true;
      return this.reloading;
    }
    this.reloading = (async () => {
      do {
        this.reloadAgain = false;
        const current = this.runtime;
        let cfg: LoadedConfig;
        try {
          cfg = parseConfig(readConfigSource(current?.config.source.builtin ? undefined : this.opts.conf ?? current?.config.source.file), this.opts.defaultPort);
        } catch (e) {
          reloadLog.error(`Corefile changed but reload failed: ${(e as Error).message}; keeping the running configuration`);
          continue;
        }
        if (current && cfg.hash === current.config.hash && reason !== 'SIGUSR1') continue;
        try {
          const rt = await Runtime.create(cfg, this.env());
          await this.switchTo(rt);
          reloadLog.info(`Running configuration SHA512 = ${cfg.hash}`);
        } catch (e) {
          reloadLog.error(`reload failed: ${(e as Error).message}; keeping the running configuration`);
        }
      } while (this.reloadAgain);
    })().finally(() => {
      this.reloading = null;
    });
    return this.reloading;
  }

  /** Lameduck, stop accepting, let in-flight queries finish, stop plugins. */
  async shutdown(): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    const rt = this.runtime;
    const lameduck = rt ? rt.lameduckMs() : 0;
    if (lameduck > 0) {
      logger('health').info(`Going into lameduck mode for ${lameduck / 1000}s`);
      await new Promise((r) => setTimeout(r, lameduck));
    }
    for (const ls of this.listeners.values()) for (const l of ls) await l.close();
    this.listeners.clear();
    await this.dispatcher.drained(5000);
    if (rt) await rt.shutdown();
    await this.http.closeAll();
  }

  /** The UDP port actually bound for a configured port (for tests using port 0). */
  boundPorts(): number[] {
    const out: number[] = [];
    for (const ls of this.listeners.values()) for (const l of ls) out.push(l.boundPort);
    return out;
  }

  get isStopping(): boolean {
    return this.stopping;
  }
}

export { log as serverLog };
