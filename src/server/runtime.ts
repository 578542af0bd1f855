// One loaded configuration: the Corefile parsed, every plugin set up, each server block's
// chain composed in the compiled-in order. A reload builds a new Runtime beside the old.

import { existsSync, readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { createHash } from 'node:crypto';
import { Rcode } from '../dns/constants.js';
import { parseCorefile } from '../corefile/parser.js';
import { directiveError } from '../corefile/errors.js';
import type { Directive, ServerBlock } from '../corefile/types.js';
import { coreDnsOnly, knownDirectives, loadedSetup, loadPlugins, pluginOrder } from '../plugins/order.js';
import { didYouMean, insteadHint } from '../corefile/suggest.js';
import type { BlockInfo, PluginInstance, SetupContext } from '../plugins/plugin.js';
import { logger } from '../log.js';
import type { HttpServices } from './http.js';
import type { DirectHandler } from './dispatcher.js';
import { listenerKey } from './listeners.js';
import { Router, type RoutedBlock } from './router.js';
import { Response, type HandlerResult, type Next, type Request } from './request.js';
import type { ServerServices } from './services.js';
import { systemErrorText } from './system-errors.js';
import { Invalidation } from './invalidation.js';
import { FAST_SAFE_PLUGINS } from './fast-answers.js';

/** CoreDNS's built-in configuration when no Corefile is found. */
export const BUILTIN_COREFILE = '. {\n    whoami\n    log\n}\n';

export interface ConfigSource {
  file: string;
  text: string;
  builtin: boolean;
  /**
   * The imported files' texts by absolute path, as the primary read them: a worker parses
   * these instead of reading the files (with several workers only the primary reads).
   */
  imports?: Record<string, string>;
}

/** `-conf FILE`, else ./Corefile, else the built-in `. { whoami; log }`. */
export function readConfigSource(conf: string | undefined): ConfigSource {
  if (conf !== undefined) {
    const file = resolve(conf);
    try {
      return { file, text: readFileSync(file, 'utf8'), builtin: false };
    } catch (e) {
      throw new Error(`${file}: cannot read the Corefile (-conf ${conf}): ${systemErrorText(e)}`, { cause: e });
    }
  }
  const local = resolve('Corefile');
  if (existsSync(local)) return { file: local, text: readFileSync(local, 'utf8'), builtin: false };
  return { file: 'Corefile', text: BUILTIN_COREFILE, builtin: true };
}

export interface LoadedConfig {
  source: ConfigSource;
  blocks: ServerBlock[];
  /** Every file read: the Corefile and its imports (what `reload` watches). */
  files: string[];
  /** SHA-512 of the texts, as CoreDNS's reload compares. */
  hash: string;
}

/** `warn` gets non-fatal problems (an import glob that matches nothing), in CoreDNS's words. */
export function parseConfig(source: ConfigSource, defaultPort: number, warn?: (msg: string) => void): LoadedConfig {
  const files: string[] = source.builtin ? [] : [source.file];
  const hash = createHash('sha512');
  hash.update(source.text);
  const given = source.imports;
  const imports: Record<string, string> = {};
  const readFile = (f: string): string => {
    if (given === undefined) return (imports[f] = readFileSync(f, 'utf8'));
    const text = given[f];
    if (text !== undefined) return text;
    // Not among what the primary read (a glob the primary matched differently): as if missing.
    throw Object.assign(new Error(`ENOENT: ${f}`), { code: 'ENOENT' });
  };
  const blocks = parseCorefile(source.text, source.file, {
    defaultPort,
    onWarning: warn,
    readFile: (f: string) => {
      const text = readFile(f);
      if (f !== source.file) hash.update(text);
      return text;
    },
    onFile: (f: string) => {
      if (!files.includes(f)) files.push(f);
    },
  });
  return { source: given === undefined ? { ...source, imports } : source, blocks, files, hash: hash.digest('hex') };
}

export interface RuntimeEnv {
  http: HttpServices;
  /** The server's services, which outlive this configuration (services.ts). */
  services: ServerServices;
  requestReload: (reason: string) => void;
  shuttingDown: () => boolean;
}

export interface BlockRuntime extends RoutedBlock {
  info: BlockInfo;
  instances: PluginInstance[];
}

function blockInfo(block: ServerBlock): BlockInfo {
  const port = block.keys[0]!.port;
  const zones = block.keys.map((k) => k.zone);
  return {
    keys: block.keys,
    zones,
    port,
    serverLabel: `${block.keys[0]!.scheme}://:${port}`,
    bindAddresses: [],
    file: block.file,
  };
}

/** Where problems go: thrown at the first (serving), or all collected (`-validate`). */
export type ProblemSink = (e: Error) => void;

const throwFirst: ProblemSink = (e) => {
  throw e;
};

function groupDirectives(block: ServerBlock, problem: ProblemSink): Map<string, Directive[]> {
  const m = new Map<string, Directive[]>();
  for (const d of block.directives) {
    if (!knownDirectives.has(d.name)) {
      const what = coreDnsOnly.has(d.name)
        ? `Unknown directive '${d.name}' (a CoreDNS plugin that clusterdns does not include${insteadHint(d.name)})`
        : `Unknown directive '${d.name}'${didYouMean(d.name, knownDirectives)}`;
      problem(directiveError(d, what));
      continue;
    }
    const list = m.get(d.name);
    if (list) list.push(d);
    else m.set(d.name, [d]);
  }
  return m;
}

function compose(handlers: PluginInstance[]): Next {
  // Only the last plugin can reach the end: CoreDNS's NextOrFailure error, which `errors` logs.
  const noNext = handlers.length
    ? `plugin/${handlers[handlers.length - 1]!.name}: no next plugin found`
    : 'no next plugin found';
  let next: Next = () => Response.rcode(Rcode.SERVFAIL, '', noNext);
  for (let i = handlers.length - 1; i >= 0; i--) {
    const h = handlers[i]!.handler!;
    const n = next;
    next = (req: Request): HandlerResult => h.serveDNS(req, n);
  }
  return next;
}

export class Runtime {
  /** Drops this configuration's kept answers when the data they were built from changes. */
  readonly invalidation = new Invalidation();
  readonly blocks: BlockRuntime[] = [];
  readonly instances: PluginInstance[] = [];
  readonly services: ServerServices;

  /** Loads the code of the plugins `config` uses, then builds the runtime. */
  static async create(config: LoadedConfig, env: RuntimeEnv, problem?: ProblemSink): Promise<Runtime> {
    await loadPlugins(config.blocks.flatMap((b) => b.directives.map((d) => d.name)));
    return new Runtime(config, env, problem);
  }

  constructor(
    readonly config: LoadedConfig,
    env: RuntimeEnv,
    problem: ProblemSink = throwFirst,
  ) {
    const services = (this.services = env.services);
    for (const block of config.blocks) {
      const info = blockInfo(block);
      const grouped = groupDirectives(block, problem);
      const instances: PluginInstance[] = [];
      const rb: BlockRuntime = {
        zone: info.zones[0]!,
        serverLabel: info.serverLabel,
        info,
        instances,
        chain: () => Response.rcode(Rcode.REFUSED, ''),
        stats: services.stats.zone(info.serverLabel, info.zones[0]!),
      };
      let chain: Next | null = null;
      const ctx = (name: string): SetupContext => ({
        block: info,
        corefile: config.source.file,
        configFiles: config.files,
        http: env.http,
        services,
        logger: logger(name),
        resolve: (req) => (chain ? chain(req) : Response.rcode(Rcode.SERVFAIL, '')),
        requestReload: env.requestReload,
        instances: () => this.instances,
        blockInstances: () => instances,
        shuttingDown: env.shuttingDown,
        invalidation: this.invalidation,
      });
      for (const [name] of pluginOrder) {
        const ds = grouped.get(name);
        if (!ds) continue;
        let made: PluginInstance | PluginInstance[];
        try {
          made = loadedSetup(name)(ds, ctx(name));
        } catch (e) {
          problem(e as Error);
          continue;
        }
        for (const inst of Array.isArray(made) ? made : [made]) instances.push(inst);
      }
      const handlers = instances.filter((i) => i.handler !== undefined);
      // A block with no plugin that answers refuses everything, as CoreDNS does.
      if (handlers.length > 0) {
        chain = compose(handlers);
        rb.chain = chain;
        const only = handlers.length === 1 ? (handlers[0]!.handler as Partial<DirectHandler>) : null;
        if (only?.serveDirect !== undefined) rb.direct = { chain, handler: only as DirectHandler };
      }
      if (instances.some((i) => i.anyClass === true)) rb.anyClass = true;
      rb.fast = handlers.every((i) => FAST_SAFE_PLUGINS.has(i.name));
      const filters = instances.flatMap((i) => (i.routeFilter ? [i.routeFilter] : []));
      if (filters.length === 1) rb.filter = filters[0];
      else if (filters.length > 1) rb.filter = (req) => filters.every((f) => f(req));
      this.instances.push(...instances);
      // One RoutedBlock per zone of the block, all sharing the chain.
      this.blocks.push(rb);
      for (const z of info.zones.slice(1)) {
        this.blocks.push({ ...rb, zone: z, stats: services.stats.zone(info.serverLabel, z) });
      }
    }
  }

  /** (host, port) pairs to listen on; host '' means every address. */
  listenAddresses(): Array<{ host: string; port: number }> {
    const seen = new Map<string, { host: string; port: number }>();
    for (const b of this.blocks) {
      const hosts = b.info.bindAddresses.length ? b.info.bindAddresses : [''];
      for (const h of hosts) seen.set(listenerKey(h, b.info.port), { host: h, port: b.info.port });
    }
    return [...seen.values()];
  }

  routers(): Map<string, Router> {
    const out = new Map<string, Router>();
    for (const b of this.blocks) {
      const hosts = b.info.bindAddresses.length ? b.info.bindAddresses : [''];
      for (const h of hosts) {
        const key = listenerKey(h, b.info.port);
        let r = out.get(key);
        if (!r) out.set(key, (r = new Router(this.services.stats)));
        r.add(b);
      }
    }
    return out;
  }

  async startup(): Promise<void> {
    for (const i of this.instances) if (i.startup) await i.startup();
  }

  async shutdown(): Promise<void> {
    for (const i of [...this.instances].reverse()) {
      try {
        if (i.shutdown) await i.shutdown();
      } catch (e) {
        logger(i.name).error(`shutdown: ${(e as Error).message}`);
      }
    }
  }

  lameduckMs(): number {
    let ms = 0;
    for (const i of this.instances) if (i.lameduckMs) ms = Math.max(ms, i.lameduckMs());
    return ms;
  }

  /** Directory of the Corefile, which relative paths in plugin options are resolved against. */
  get baseDir(): string {
    return dirname(this.config.source.file);
  }
}
