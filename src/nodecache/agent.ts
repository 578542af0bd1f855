// The node-local agent: interface, Corefile, in-process DNS server, iptables rules, the
// periodic re-check, config polling, and teardown. See README.md for the sequence and why.

import { rmSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { CorefileError } from '../corefile/errors.js';
import type { Logger } from '../log.js';
import { DnsServer } from '../server/server.js';
import { parseConfig, type LoadedConfig, type Runtime } from '../server/runtime.js';
import { killRunningCommands, type CommandRunner, type SyncCommandRunner } from '../sys/exec.js';
import type { NodeCacheFlags } from './flags.js';
import { CorefileSourceError, readSources, renderSources, fingerprint, type GeneratorOptions } from './generator.js';
import { Iptables, nodeCacheRules, ruleText, type EnsureReport, type IptablesRule } from './iptables.js';
import { countSetupError, defineNodeCacheMetrics, serveSetupMetrics } from './metrics.js';
import { InterfaceError, NodeInterface, type EnsureResult } from './netif.js';
import { checkPorts, portsOf } from './preflight.js';
import { PILLAR } from './template.js';
import { resolveUpstreamService } from './upstream.js';
import { resolveTarget, writeFileAtomic } from '../sys/atomic-file.js';

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

/** Through a temporary file, fsync and a rename, so a reload (or a crash) never reads half a Corefile. */
function writeCorefile(path: string, text: string): void {
  writeFileAtomic(resolveTarget(path), text);
}

export class NodeCacheAgent {
  readonly rules: IptablesRule[];
  readonly iptables: Iptables;
  readonly netif: NodeInterface;
  server: DnsServer | null = null;
  private generator: GeneratorOptions | null = null;
  private lastFingerprint = '';
  private closeMetrics: (() => Promise<void>) | null = null;
  private syncTimer: NodeJS.Timeout | null = null;
  private configTimer: NodeJS.Timeout | null = null;
  private syncing: Promise<void> | null = null;
  private checkingConfig = false;
  /** Something of ours may be on the node (interface or rules) and the exit hook must undo it. */
  private armed = false;
  /**
   * What this process itself put on the node while starting; 'all' once started (teardown then
   * removes everything, as upstream does). A failed start undoes only its own changes, never
   * the interface or rules of an agent that was already running.
   */
  private owned: { link: boolean; addresses: string[] } | 'all' = { link: false, addresses: [] };
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
        this.closeMetrics = await serveSetupMetrics(f.metricsListenAddress);
      } catch (e) {
        throw new NodeCacheStartError(`-metrics-listen-address ${f.metricsListenAddress}: ${(e as Error).message}`);
      }
    }

    this.generator = {
      baseCorefile: f.baseCorefile,
      baseCorefileExplicit: f.baseCorefileExplicit,
      resolvConf: f.resolvConf,
      kubeDnsConfigDir: f.kubeDnsConfigDir,
      localIPs: f.localIPs,
      clusterDns: null,
      clusterDnsSource: f.upstreamService,
      dnsDomain: f.clusterDomain,
      dnsPort: f.dnsPort,
    };
    let sources: ReturnType<typeof readSources>;
    try {
      sources = readSources(this.generator);
    } catch (e) {
      throw new NodeCacheStartError((e as Error).message);
    }
    try {
      const upstream = await resolveUpstreamService({
        service: f.upstreamService,
        env: this.deps.env,
        kubeconfig: f.kubeconfig,
      });
      this.generator.clusterDns = upstream.ip;
      this.log.info(`cluster DNS (${f.upstreamService}) is ${upstream.ip}, from ${upstream.source}`);
    } catch (e) {
      // As k8s-dns-node-cache's NewCacheApp: only a template that forwards to it needs the address.
      if (sources.base.includes(PILLAR.clusterDns)) throw new NodeCacheStartError((e as Error).message);
      this.log.warn(
        `Unable to lookup IP address of Upstream service ${f.upstreamService}: ${(e as Error).message}; ${sources.baseFrom} does not use ${PILLAR.clusterDns}, so starting without it`,
      );
    }

    // Everything is checked before the node changes: the template, every plugin's options, and
    // every port where its address already exists (a second agent must not disturb the first).
    let config: LoadedConfig;
    let text: string;
    let prepared: Runtime;
    this.server = new DnsServer({ conf: f.corefile, defaultPort: f.dnsPort });
    try {
      const generated = renderSources(sources, this.generator);
      for (const w of generated.warnings) this.log.warn(w);
      text = generated.text;
      this.lastFingerprint = generated.fingerprint;
      config = parseConfig({ file: resolve(f.corefile), text, builtin: false }, f.dnsPort);
      prepared = await this.server.setUp(config);
    } catch (e) {
      throw new NodeCacheStartError(
        e instanceof CorefileError || e instanceof CorefileSourceError
          ? e.message
          : `the generated Corefile does not load: ${(e as Error).message}`,
      );
    }
    const busy = await checkPorts(portsOf(config, prepared.listenAddresses()));
    if (busy.length > 0)
      throw new NodeCacheStartError(`not starting; nothing on the node was changed: ${busy.join('; ')}`);

    try {
      writeCorefile(f.corefile, text);
      this.log.info(
        `wrote ${f.corefile} from the ${sources.baseFrom === 'built-in' ? 'built-in template' : `template ${sources.baseFrom}`}`,
      );
    } catch (e) {
      throw new NodeCacheStartError(`cannot write ${f.corefile}: ${(e as Error).message}`);
    }

    if (f.setupInterface || this.rules.length > 0) this.arm();
    if (f.setupInterface) {
      const r = await this.ensureInterface('start');
      if (r && this.owned !== 'all') {
        this.owned.link = r.created !== null;
        this.owned.addresses = r.addedAddresses;
      }
    }

    try {
      await this.server.start(config, prepared);
    } catch (e) {
      throw new NodeCacheStartError(`the DNS server did not start: ${(e as Error).message}`);
    }
    // Serving on the local IPs makes this the node's agent: from here on, an exit (the loop
    // plugin's FATAL may come at once) removes every rule, as upstream does.
    this.owned = 'all';

    if (this.rules.length > 0) {
      const r = await this.ensureRules('start');
      if (r.errors.length === 0)
        this.log.info(
          `iptables: ${this.rules.length} rules for ${f.localIPs.join(', ')} in place (${r.added.length} added)`,
        );
      else
        this.log.warn(
          `iptables: not every rule is in place (errors above); retrying every ${f.syncIntervalMs / 1000}s`,
        );
    }
    if (f.pidfile) writeFileSync(f.pidfile, `${process.pid}\n`);

    this.syncTimer = setInterval(() => void this.syncNetwork(), f.syncIntervalMs);
    this.configTimer = setInterval(() => void this.checkConfig(), this.deps.configPollMs ?? 2000);
    this.log.info(
      `ready: serving DNS on ${f.localIPs.join(', ')}; re-checking ${f.setupInterface ? `interface ${f.interfaceName}` : 'nothing'}${this.rules.length ? ' and iptables' : ''} every ${f.syncIntervalMs / 1000}s`,
    );
  }

  private arm(): void {
    if (this.armed || this.flags.skipTeardown) return;
    this.armed = true;
    process.on('exit', this.exitHook);
  }

  private reportInterface(r: EnsureResult, when: 'start' | 'sync'): void {
    const name = this.flags.interfaceName;
    if (r.created === 'bridge') {
      this.log.warn(
        `this kernel has no dummy interface driver (${r.dummyRefused}); created ${name} as an empty bridge instead, which holds the local IPs the same way`,
      );
    } else if (r.created === 'dummy') this.log.info(`created dummy interface ${name}`);
    if (when === 'sync' && (r.created || r.addedAddresses.length)) {
      this.log.info(
        `Added back interface ${name}${r.addedAddresses.length ? ` address ${r.addedAddresses.join(', ')}` : ''}`,
      );
    } else if (r.addedAddresses.length) this.log.info(`added ${r.addedAddresses.join(', ')} to ${name}`);
  }

  private async ensureInterface(when: 'start' | 'sync'): Promise<EnsureResult | null> {
    try {
      const r = await this.netif.ensure();
      this.reportInterface(r, when);
      return r;
    } catch (e) {
      const type = e instanceof InterfaceError ? e.errorType : 'interface_check';
      countSetupError(type);
      this.log.error(`interface ${this.flags.interfaceName}: ${(e as Error).message}`);
      return null;
    }
  }

  /** Ensures every rule; logs and counts failures. */
  private async ensureRules(when: 'start' | 'sync'): Promise<EnsureReport> {
    const report = await this.iptables.ensureAll(this.rules);
    for (const e of report.errors) {
      countSetupError(e.errorType);
      this.log.error(`iptables: ${e.message}`);
    }
    if (when === 'sync')
      for (const rule of report.added) this.log.info(`Added back nodelocaldns rule - ${ruleText(rule)}`);
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
        writeCorefile(this.flags.corefile, generated.text);
      } catch (e) {
        this.lastFingerprint = ''; // not written (a full disk): try again at the next poll
        throw e;
      }
      this.log.info(
        `${generated.baseFrom === 'built-in' ? 'template inputs' : generated.baseFrom} changed; wrote ${this.flags.corefile}, reloading`,
      );
      await this.server.reload('nodecache: template changed');
      if (this.server.runtime?.config.source.text !== generated.text) {
        countSetupError('configmap');
        this.log.error(
          `the regenerated ${this.flags.corefile} was not loaded (see the reload error above); still serving the previous configuration`,
        );
      }
    } catch (e) {
      countSetupError('configmap');
      this.log.error(
        `cannot regenerate ${this.flags.corefile}: ${(e as Error).message}; still serving the previous configuration`,
      );
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
          this.log.info(
            typeof r === 'string'
              ? `teardown: interface ${this.flags.interfaceName} ${r}`
              : `teardown: ${r.kept}; left in place`,
          );
        } catch (e) {
          this.log.error(`teardown: ${(e as Error).message}`);
        }
      }
      if (this.flags.skipTeardown) this.log.info('-skipteardown: leaving the interface and iptables rules in place');
      this.disarm();
      await this.closeMetrics?.();
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
    const owned = this.owned;
    // Rules go in only after the server serves (owned 'all'), so a failed start added none.
    const rules = owned === 'all' ? this.rules : [];
    let removed = 0;
    if (rules.length > 0) {
      const r = this.iptables.removeAllSync(rules);
      removed = r.removed;
      for (const e of r.errors) this.log.error(`teardown: iptables: ${e.message}`);
    }
    let link = '';
    if (this.flags.setupInterface) {
      try {
        if (owned === 'all' || owned.link) {
          this.netif.removeSync();
          link = ` and interface ${this.flags.interfaceName}`;
        } else if (owned.addresses.length > 0) {
          this.netif.removeAddressesSync(owned.addresses);
          link = ` and ${owned.addresses.join(', ')} from ${this.flags.interfaceName}`;
        }
      } catch (e) {
        this.log.error(`teardown: ${(e as Error).message}`);
      }
    }
    if (owned === 'all') {
      this.log.info(`teardown on exit: removed ${removed} iptables rules${link}`);
      if (this.flags.pidfile) rmSync(this.flags.pidfile, { force: true });
    } else {
      this.log.info(
        `teardown on exit: removed what this start added${link ? ` (${link.slice(5)})` : ' (nothing)'}; what was there before is left alone`,
      );
    }
  }
}
