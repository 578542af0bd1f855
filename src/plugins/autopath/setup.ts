// `autopath [ZONE...] RESOLV-CONF` as in CoreDNS: RESOLV-CONF is a resolv.conf file (its
// search list for every client) or `@kubernetes` (each pod's own list, which needs
// `pods verified` in the block's kubernetes plugin). clusterdns adds an optional block,
// `{ resolvconf FILE }`, naming the file whose search list follows the cluster domains in
// `@kubernetes` paths (CoreDNS always reads /etc/resolv.conf).

import { readFileSync } from 'node:fs';
import { dirname, isAbsolute, resolve } from 'node:path';
import { CorefileError, directiveError } from '../../corefile/errors.js';
import type { Directive } from '../../corefile/types.js';
import { canonicalZone } from '../../dns/name.js';
import { parseResolvConf } from '../../sys/resolvconf.js';
import { once, unknownProperty } from '../../corefile/args.js';
import type { PluginSetup } from '../plugin.js';
import { AutoPath } from './handler.js';
import { AUTOPATH_SUCCESS } from './metrics.js';
import { PodSearchPath, StaticSearchPath } from './searchpath.js';

/** Where CoreDNS's kubernetes plugin reads the server's own search list. */
export const SERVER_RESOLV_CONF = '/etc/resolv.conf';

/** Search domains of a resolv.conf as FQDNs, or null when the file cannot be read. */
function searchOf(file: string): string[] | null {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return null;
  }
  return parseResolvConf(text, file).search.map((s) => canonicalZone(s));
}

export interface AutoPathConfig {
  zones: string[];
  /** `@kubernetes`, or null for a resolv.conf file. */
  plugin: 'kubernetes' | null;
  /** For a file: its search list then "" (the bare name). */
  staticPath: string[];
  /** For @kubernetes: the server's own resolv.conf. */
  serverResolvConf: string;
}

export function parseAutoPath(d: Directive, blockZones: readonly string[], corefile: string): AutoPathConfig {
  if (d.args.length === 0)
    throw directiveError(d, "autopath: Wrong argument count or unexpected line ending after 'autopath'");
  const resolvTok = d.args[d.args.length - 1]!;
  const zones = d.args.slice(0, -1).map((t) => canonicalZone(t.text));
  const cfg: AutoPathConfig = {
    zones: zones.length > 0 ? zones : [...blockZones],
    plugin: null,
    staticPath: [],
    serverResolvConf: SERVER_RESOLV_CONF,
  };
  const rel = (p: string) => (isAbsolute(p) ? p : resolve(dirname(corefile), p));
  if (resolvTok.text.startsWith('@')) {
    const plugin = resolvTok.text.slice(1);
    if (plugin !== 'kubernetes')
      throw directiveError(
        resolvTok,
        `autopath: ${plugin} does not implement the AutoPather interface (only @kubernetes does)`,
      );
    cfg.plugin = 'kubernetes';
  } else {
    const file = rel(resolvTok.text);
    const search = searchOf(file);
    if (search === null)
      throw directiveError(
        resolvTok,
        `autopath: failed to parse "${resolvTok.text}": open ${file}: no such file or directory`,
      );
    cfg.staticPath = [...search, ''];
  }
  for (const p of d.block ?? []) {
    if (p.name !== 'resolvconf') unknownProperty(p, 'autopath');
    if (cfg.plugin === null) throw directiveError(p, 'autopath: resolvconf only applies to @kubernetes');
    if (p.args.length !== 1) throw directiveError(p, 'autopath: resolvconf takes one file');
    cfg.serverResolvConf = rel(p.args[0]!.text);
  }
  return cfg;
}

export const setup: PluginSetup = (ds, ctx) => {
  const d = once(ds, 'autopath');
  const cfg = parseAutoPath(d, ctx.block.zones, ctx.corefile);
  const handler = new AutoPath(
    cfg.zones,
    cfg.plugin === null ? new StaticSearchPath(cfg.staticPath) : null,
    ctx.services.get(AUTOPATH_SUCCESS),
  );
  return {
    name: 'autopath',
    handler,
    startup() {
      if (cfg.plugin === null) return;
      // The kubernetes instance of this block exists once every plugin is set up.
      // Found by the view it publishes on its instance, not by import.
      const view = ctx
        .blockInstances()
        .find((i) => i.name === 'kubernetes' && i.clusterView !== undefined)?.clusterView;
      if (view === undefined)
        throw new CorefileError(
          d.file,
          d.line,
          'autopath: @kubernetes needs the kubernetes plugin in the same server block',
        );
      if (view.pods !== 'verified') {
        ctx.logger.warn(
          `${d.file}:${d.line}: autopath @kubernetes does nothing unless the kubernetes plugin has 'pods verified' (it has 'pods ${view.pods}')`,
        );
      }
      handler.source = new PodSearchPath(view, searchOf(cfg.serverResolvConf) ?? []);
    },
  };
};
