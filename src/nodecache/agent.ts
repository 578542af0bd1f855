// The node-local agent: interface, Corefile, in-process DNS server, iptables rules, the
// periodic re-check, config polling, and teardown. See README.md for the sequence and why.

import { renameSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { Server } from 'node:http';
import { CorefileError } from '../corefile/errors.js';
import type { Logger } from '../log.js';
import { DnsServer } from '../server/server.js';
import { parseConfig, readConfigSource, type LoadedConfig } from '../server/runtime.js';
import { killRunningCommands, type CommandRunner, type SyncCommandRunner } from './exec.js';
import type { NodeCacheFlags } from './flags.js';
import { CorefileSourceError, readSources, renderSources, fingerprint, type GeneratorOptions } from './generator.js';
import { Iptables, nodeCacheRules, ruleText, type EnsureReport, type IptablesRule } from './iptables.js';
import { countSetupError, defineNodeCacheMetrics, serveSetupMetrics } from './metrics.js';
import { InterfaceError, NodeInterface, type EnsureResult } from './netif.js';
import { resolveUpstreamService, type UpstreamAddress } from './upstream.js';

export class NodeCacheStartError extends Error {
  readonly code = 'NODECACHE_ERR_START';
  constructor(message: string) {
    super(message);
    this.name = 'NodeCacheStartError';
  }
}

export interface AgentDeps {
  run: CommandRunner;
  runSync: SyncCommandRunner;
  log: Logger;
  env: NodeJS.ProcessEnv;
  /** How often the template, resolv.conf and kube-dns ConfigMap are polled (default 2 s). */
  configPollMs?: number;
}

/** Writes through a temporary file and a rename, so a reload never reads half a Corefile. */
function writeAtomically(path: string, text: string): void {
  const tmp = join(dirname(path), `.${process.pid}.${Date.now()}.nodecache.tmp`);
  try {
    // 'wx' (O_EXCL): never written through a file or symlink already there; a full disk leaves no tmp behind.
    writeFileSync(tmp, text, { mode: 0o644, flag: 'wx' });
    renameSync(tmp, path);
  } catch (e) {
    rmSync(tmp, { force: true });
    throw e;
  }
}

export class NodeCacheAgent {
  readonly rules: IptablesRule[];
  readonly iptables: Iptables;
  readonly netif: NodeInterface;
  server: DnsServer | null = null;
  private generator: GeneratorOptions | null = null;
  private lastFingerprint = '';
  private metricsServer: Server | null = null;
  private syncTimer: NodeJS.Timeout | null = null;
  private configTimer: NodeJS.Timeout | null = null;
  private syncing: Promise<void> | null = null;
  private checkingConfig = false;
  /** Something of ours may be on the node (interface or rules) and the exit hook must undo it. */
  private armed = false;
  private stopping: Promise<void> | null = null;
  private readonly exitHook = () => this.teardownSync();

  constructor(
    readonly flags: NodeCacheFlags,
    private readonly deps: AgentDeps,
  ) {
    this.rules = flags.setupIptables ? nodeCacheRules(flags.localIPs, flags.dnsPort, flags.healthPort) : [];
    this.iptables = new Iptables(flags.family, deps.run, deps.runSync);
    this.netif = new NodeInterface(flags.interfaceName, flags.localIPs, deps.run, deps.runSync);
  }

  private get log(): Logger {
    return this.deps.log;
  }

  /**
   * Start-up: Corefile → interface → DNS server bound → iptables rules → pidfile → loops.
   * The rules go in as soon as the listeners are bound (upstream waits for the first sync,
   * ~60 s, without -pidfile) and never before, so a server that fails to start captures nothing.
   */
  async start(): Promise<void> {
    const f = this.flags;
    if (f.syncIntervalNote) this.log.warn(f.syncIntervalNote);
    defineNodeCacheMetrics();
    if (f.metricsListenAddress !== '') {
      try {
        this.metricsServer = await serveSetupMetrics(f.metricsListenAddress);
      } catch (e) {
        throw new NodeCacheStartError(`-metrics-listen-address ${f.metricsListenAddress}: ${(e as Error).message}`);
      }
    }

    let upstream: UpstreamAddress;
    try {
      upstream = await resolveUpstreamService({ service: f.upstreamService, env: this.deps.env, kubeconfig: f.kubeconfig });
    } catch (e) {
      throw new NodeCacheStartError((e as Error).message);
    }
    this.log.info(`cluster DNS (${f.upstreamService}) is ${upstream.ip}, from ${upstream.source}`);
    this.generator = {
      baseCorefile: f.baseCorefile,
      baseCorefileExplicit: f.baseCorefileExplicit,
      resolvConf: f.resolvConf,
      kubeDnsConfigDir: f.kubeDnsConfigDir,
      localIPs: f.localIPs,
      clusterDns: upstream.ip,
      dnsDomain: f.clusterDomain,
      dnsPort: f.dnsPort,
    };

    let config: LoadedConfig;
    try {
      const sources = readSources(this.generator);
      const generated = renderSources(sources, this.generator);
      for (const w of generated.warnings) this.log.warn(w);
      writeAtomically(f.corefile, generated.text);
      this.lastFingerprint = generated.fingerprint;
      this.log.info(`wrote ${f.corefile} from the ${generated.baseFrom === 'built-in' ? 'built-in template' : `template ${generated.baseFrom}`}`);
      config = parseConfig(readConfigSource(f.corefile), f.dnsPort);
    } catch (e) {
      if (e instanceof CorefileError || e instanceof CorefileSourceError) throw new NodeCacheStartError(e.message);
      throw new NodeCacheStartError(`cannot write ${f.corefile}: ${(e as Error).message}`);
    }

    if (f.setupInterface || this.rules.length > 0) this.arm();
    if (f.setupInterface) await this.ensureInterface('start');

    this.server = new DnsServer({ conf: f.corefile, defaultPort: f.dnsPort });
    try {
      await this.server.start(config);
    } catch (e) {
      throw new NodeCacheStartError(`the DNS server did not start: ${(e as Error).message}`);
    }

    if (this.rules.length > 0) {
      const r = await this.ensureRules('start');
      if (r.errors.length === 0) this.log.info(`iptables: ${this.rules.length} rules for ${f.localIPs.join(', ')} in place (${r.added.length} added)`);
      else this.log.warn(`iptables: not every rule is in place (errors above); retrying every ${f.syncIntervalMs / 1000}s`);
    }
    if (f.pidfile) writeFileSync(f.pidfile, `${process.pid}\n`);

    this.syncTimer = setInterval(() => void this.syncNetwork(), f.syncIntervalMs);
    this.configTimer = setInterval(() => void this.checkConfig(), this.deps.configPollMs ?? 2000);
    this.log.info(`ready: serving DNS on ${f.localIPs.join(', ')}; re-checking ${f.setupInterface ? `interface ${f.interfaceName}` : 'nothing'}${this.rules.length ? ' and iptables' : ''} every ${f.syncIntervalMs / 1000}s`);
  }

  private arm(): void {
    if (this.armed || this.flags.skipTeardown) return;
    this.armed = true;
    process.on('exit', this.exitHook);
  }

  private reportInterface(r: EnsureResult, when: 'start' | 'sync'): void {
    const name = this.flags.interfaceName;
    if (r.created === 'bridge') {
      this.log.warn(`this kernel has no dummy interface driver (${r.dummyRefused}); created ${name} as an empty bridge instead, which holds the local IPs the same way`);
    } else if (r.created === 'dummy') this.log.info(`created dummy interface ${name}`);
    if (when === 'sync' && (r.created || r.addedAddresses.length)) {
      this.log.info(`Added back interface ${name}${r.addedAddresses.length ? ` address ${r.addedAddresses.join(', ')}` : ''}`);
    } else if (r.addedAddresses.length) this.log.info(`added ${r.addedAddresses.join(', ')} to ${name}`);
  }

  private async ensureInterface(when: 'start' | 'sync'): Promise<void> {
    try {
      this.reportInterface(await this.netif.ensure(), when);
    } catch (e) {
      const type = e instanceof InterfaceError ? e.errorType : 'interface_check';
      countSetupError(type);
      this.log.error(`interface ${this.flags.interfaceName}: ${(e as Error).message}`);
    }
  }

  /** Ensures every rule; logs and counts failures. */
  private async ensureRules(when: 'start' | 'sync'): Promise<EnsureReport> {
    const report = await this.iptables.ensureAll(this.rules);
    for (const e of report.errors) {
      countSetupError(e.errorType);
      this.log.error(`iptables: ${e.message}`);
    }
    if (when === 'sync') for (const rule of report.added) this.log.info(`Added back nodelocaldns rule - ${ruleText(rule)}`);
    return report;
  }

  /** The periodic check: the interface and its addresses, then every rule. */
  syncNetwork(): Promise<void> {
    if (this.syncing || this.stopping) return this.syncing ?? Promise.resolve();
    this.syncing = (async () => {
      if (this.flags.setupInterface) await this.ensureInterface('sync');
      if (this.rules.length > 0) await this.ensureRules('sync');
    })().finally(() => {
      this.syncing = null;
    });
    return this.syncing;
  }

  /** Regenerates the Corefile when the template or its inputs changed, and reloads. */
  async checkConfig(): Promise<void> {
    if (this.checkingConfig || this.stopping || !this.generator || !this.server) return;
    this.checkingConfig = true;
    try {
      const sources = readSources(this.generator);
      const fp = fingerprint(sources);
      if (fp === this.lastFingerprint) return;
      this.lastFingerprint = fp;
      const generated = renderSources(sources, this.generator);
      for (const w of generated.warnings) this.log.warn(w);
      try {
        writeAtomically(this.flags.corefile, generated.text);
      } catch (e) {
        this.lastFingerprint = ''; // not written (a full disk): try again at the next poll
        throw e;
      }
      this.log.info(`${generated.baseFrom === 'built-in' ? 'template inputs' : generated.baseFrom} changed; wrote ${this.flags.corefile}, reloading`);
      await this.server.reload('nodecache: template changed');
      if (this.server.runtime?.config.source.text !== generated.text) {
        countSetupError('configmap');
        this.log.error(`the regenerated ${this.flags.corefile} was not loaded (see the reload error above); still serving the previous configuration`);
      }
    } catch (e) {
      countSetupError('configmap');
      this.log.error(`cannot regenerate ${this.flags.corefile}: ${(e as Error).message}; still serving the previous configuration`);
    } finally {
      this.checkingConfig = false;
    }
  }

  /** SIGTERM/SIGINT: rules out first (traffic falls back to kube-dns), server down, interface gone. */
  stop(): Promise<void> {
    this.stopping ??= (async () => {
      if (this.syncTimer) clearInterval(this.syncTimer);
      if (this.configTimer) clearInterval(this.configTimer);
      await this.syncing;
      const teardown = !this.flags.skipTeardown;
      if (teardown && this.rules.length > 0) {
        const r = await this.iptables.removeAll(this.rules);
        for (const e of r.errors) this.log.error(`teardown: iptables: ${e.message}`);
        this.log.info(`teardown: removed ${r.removed} iptables rules`);
      }
      await this.server?.shutdown();
      if (teardown && this.flags.setupInterface) {
        try {
          const r = await this.netif.remove();
          this.log.info(typeof r === 'string' ? `teardown: interface ${this.flags.interfaceName} ${r}` : `teardown: ${r.kept}; left in place`);
        } catch (e) {
          this.log.error(`teardown: ${(e as Error).message}`);
        }
      }
      if (this.flags.skipTeardown) this.log.info('-skipteardown: leaving the interface and iptables rules in place');
      this.disarm();
      await new Promise<void>((r) => (this.metricsServer ? this.metricsServer.close(() => r()) : r()));
      if (this.flags.pidfile) rmSync(this.flags.pidfile, { force: true });
    })();
    return this.stopping;
  }

  private disarm(): void {
    if (!this.armed) return;
    this.armed = false;
    process.off('exit', this.exitHook);
  }

  /** The process is exiting without stop() (a fatal error, the loop plugin): undo what we can. */
  teardownSync(): void {
    if (!this.armed) return;
    this.armed = false;
    killRunningCommands();
    let removed = 0;
    if (this.rules.length > 0) {
      const r = this.iptables.removeAllSync(this.rules);
      removed = r.removed;
      for (const e of r.errors) this.log.error(`teardown: iptables: ${e.message}`);
    }
    if (this.flags.setupInterface) {
      try {
        this.netif.removeSync();
      } catch (e) {
        this.log.error(`teardown: ${(e as Error).message}`);
      }
    }
    this.log.info(`teardown on exit: removed ${removed} iptables rules${this.flags.setupInterface ? ` and interface ${this.flags.interfaceName}` : ''}`);
    if (this.flags.pidfile) rmSync(this.flags.pidfile, { force: true });
  }
}
