// The process-level server: listeners that outlive configurations, the switch from one
// Runtime to the next on reload (queries in flight finish on the old chain), and shutdown.

import { Dispatcher } from './dispatcher.js';
import { DnsListener, listenerKey } from './listeners.js';
import type { Router } from './router.js';
import { Rcode } from '../dns/constants.js';
import { Response, type HandlerResult, type Next, type Request } from './request.js';
import { HttpServices } from './http.js';
import { ServerServices } from './services.js';
import { parseConfig, readConfigSource, Runtime, type LoadedConfig } from './runtime.js';
import { leadProcess, logger } from '../log.js';
import { formatHostPort, listenErrorMessage, ListenError } from './system-errors.js';
import { fastFlush } from './fast-answers.js';
import { settleHeapSoon } from './heap.js';

const log = logger('');
const reloadLog = logger('reload');

export interface ServerOptions {
  conf: string | undefined;
  defaultPort: number;
  /** In a worker: reloads are the primary's to do (serve.ts), so a plugin's request goes there. */
  requestReload?: (reason: string) => void;
}

/** A configuration started beside the running one, not yet answering. */
export interface PreparedConfig {
  rt: Runtime;
  routers: Map<string, Router>;
  opened: string[];
  wanted: Set<string>;
  gate?: ConfigGate;
}

/** Queries held past this many while a gate is closed get SERVFAIL (the client retries). */
const MAX_HELD = 50_000;

/**
 * Holds the queries that reach a committed configuration until every worker has committed
 * it (serve.ts): no client gets an answer from it while another worker may still answer from
 * the configuration before. Installed on the blocks' chains, and taken off when it opens,
 * so it costs nothing afterwards.
 */
export class ConfigGate {
  held = 0;
  private opened = false;
  private waiters: Array<() => void> = [];
  private readonly restore: Array<() => void> = [];

  constructor(rt: Runtime) {
    for (const b of rt.blocks) {
      const chain = b.chain;
      b.chain = (req: Request): HandlerResult => (this.opened ? chain(req) : this.hold(chain, req));
      this.restore.push(() => {
        b.chain = chain;
      });
    }
  }

  private hold(chain: Next, req: Request): HandlerResult {
    if (this.held >= MAX_HELD) return Response.rcode(Rcode.SERVFAIL, '');
    this.held++;
    return new Promise<Response>((resolve, reject) => {
      this.waiters.push(() => {
        this.held--;
        try {
          resolve(chain(req));
        } catch (e) {
          reject(e);
        }
      });
    });
  }

  open(): void {
    if (this.opened) return;
    this.opened = true;
    for (const f of this.restore.splice(0)) f();
    for (const w of this.waiters.splice(0)) w();
  }
}

/** Starts a DNS listener; a bind failure says which address and, for a low port, what to grant. */
async function listenOrExplain(l: DnsListener, host: string, port: number): Promise<void> {
  try {
    await l.start();
  } catch (e) {
    if (typeof (e as NodeJS.ErrnoException).code !== 'string') throw e;
    throw new ListenError(listenErrorMessage(`dns://${formatHostPort(host, port)}`, port, e));
  }
}

export class DnsServer {
  /** Owned by this server, handed to every configuration it runs. */
  readonly services = new ServerServices();
  readonly dispatcher = new Dispatcher(this.services.stats, this.services.queryNames);
  readonly http = new HttpServices();
  private readonly listeners = new Map<string, DnsListener[]>();
  runtime: Runtime | null = null;
  private stopping = false;
  private retiring: Runtime | null = null;
  private reloading: Promise<void> | null = null;
  private reloadAgain = false;

  constructor(private readonly opts: ServerOptions) {}

  private env() {
    return {
      http: this.http,
      services: this.services,
      requestReload: (reason: string) => {
        if (this.opts.requestReload) this.opts.requestReload(reason);
        else void this.reload(reason);
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
  setUp(config: LoadedConfig): Promise<Runtime> {
    return Runtime.create(config, this.env());
  }

  private async switchTo(rt: Runtime): Promise<void> {
    await this.commit(await this.prepareRuntime(rt));
    await this.retire();
  }

  /**
   * First half of a switch: starts the plugins of `cfg` and opens the listeners it adds,
   * while the running configuration keeps answering. Throws (having undone everything)
   * when the configuration cannot run here.
   */
  async prepare(cfg: LoadedConfig, gated = false): Promise<PreparedConfig> {
    const rt = await Runtime.create(cfg, this.env());
    // Closed before any listener can route to it: nothing answers from it until open().
    const gate = gated ? new ConfigGate(rt) : undefined;
    const p = await this.prepareRuntime(rt);
    p.gate = gate;
    return p;
  }

  private async prepareRuntime(rt: Runtime): Promise<PreparedConfig> {
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
          await listenOrExplain(v4, '0.0.0.0', port);
          ls.push(v4);
          const v6 = new DnsListener(
            { host: '::', port: port || v4.boundPort, routerKey: key, ipv6Only: true },
            this.dispatcher,
          );
          try {
            await v6.start();
            ls.push(v6);
          } catch {
            // No IPv6 here; IPv4 alone serves.
          }
        } else {
          const l = new DnsListener({ host, port, routerKey: key }, this.dispatcher);
          await listenOrExplain(l, host, port);
          ls.push(l);
        }
        this.listeners.set(key, ls);
      }
    } catch (e) {
      await this.undo(rt, opened);
      throw e;
    }
    return { rt, routers, opened, wanted: new Set(wanted.map((w) => listenerKey(w.host, w.port))) };
  }

  private async undo(rt: Runtime, opened: string[]): Promise<void> {
    for (const k of opened) {
      for (const l of this.listeners.get(k) ?? []) await l.close();
      this.listeners.delete(k);
      this.dispatcher.routers.delete(k);
    }
    await rt.shutdown();
  }

  /** Gives up a prepared configuration that will not run (another worker could not prepare it). */
  abort(p: PreparedConfig): Promise<void> {
    return this.undo(p.rt, p.opened);
  }

  /**
   * Second half: queries from now on go to the prepared configuration. The one it replaces
   * finishes the queries it has and is stopped by retire().
   */
  async commit(p: PreparedConfig): Promise<void> {
    this.retiring = this.runtime;
    this.runtime = p.rt;
    this.dispatcher.routers = p.routers;
    // Answers the native table kept came from the configuration being replaced.
    fastFlush();
    const closing: Promise<void>[] = [];
    for (const [k, ls] of this.listeners) {
      if (p.wanted.has(k)) continue;
      this.listeners.delete(k);
      for (const l of ls) closing.push(l.close());
    }
    await Promise.all(closing);
  }

  /** Stops the configuration commit() replaced once its queries are answered. */
  async retire(): Promise<void> {
    const old = this.retiring;
    this.retiring = null;
    if (old) {
      await this.dispatcher.drained(5000);
      await old.shutdown();
    }
  }

  /** Queries in flight (answered or not yet) that `gate` does not hold. */
  inflightOutside(gate: ConfigGate): number {
    return this.dispatcher.inflight - gate.held;
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
        // Every worker reloads; one of them speaks (CoreDNS's lines, which operators grep for).
        const lead = leadProcess();
        try {
          cfg = parseConfig(
            readConfigSource(
              current?.config.source.builtin ? undefined : (this.opts.conf ?? current?.config.source.file),
            ),
            this.opts.defaultPort,
            lead ? (m) => log.warn(m) : undefined,
          );
        } catch (e) {
          if (lead) log.info('Reloading');
          reloadLog.error(
            `Corefile changed but reload failed: ${(e as Error).message}; keeping the running configuration`,
          );
          continue;
        }
        if (current && cfg.hash === current.config.hash && reason !== 'SIGUSR1') continue;
        if (lead) log.info('Reloading');
        try {
          const rt = await Runtime.create(cfg, this.env());
          await this.switchTo(rt);
          if (lead) log.info('Reloading complete');
          // The configuration replaced (its plugins, their tables) is garbage now, in bulk.
          settleHeapSoon();
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
