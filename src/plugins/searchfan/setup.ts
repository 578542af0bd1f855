// `searchfan [TO...] { search DOMAIN...; ndots N; timeout DURATION; max_concurrent N }`: parses the block.
// TOs are upstreams as forward takes them (IP, IP:PORT, [IPv6]:PORT, dns://…) or a
// resolv.conf file; with no TO, /etc/resolv.conf. The search list and ndots default to the
// first resolv.conf named (or /etc/resolv.conf when every TO is an address).

import { existsSync, readFileSync } from 'node:fs';
import { dirname, isAbsolute, resolve } from 'node:path';
import { directiveError } from '../../corefile/errors.js';
import type { Directive, Token } from '../../corefile/types.js';
import { canonicalIP } from '../../dns/ip.js';
import { canonicalZone, nameToLabels } from '../../dns/name.js';
import { MAX_NDOTS, parseResolvConf, type ResolvConf } from '../../sys/resolvconf.js';
import { durationArg, intArg, once, unknownProperty } from '../../corefile/args.js';
import type { PluginSetup } from '../plugin.js';
import { SearchFan } from './handler.js';
import { SEARCHFAN_METRICS } from './metrics.js';
import { joinHostPort } from '../../upstream/exchange.js';

/** KubeVPN's resolv.conf, and what a plugin without TOs reads. */
export const DEFAULT_RESOLV_CONF = '/etc/resolv.conf';
/** KubeVPN's one deadline for a whole fan-out. */
export const DEFAULT_TIMEOUT_MS = 5000;
/** As forward: at most 15 upstreams. */
export const MAX_UPSTREAMS = 15;
/** Search domains kept; every one multiplies the queries of a miss. */
export const MAX_SEARCH = 16;
/** Lookups in flight at once (each holds candidates × upstreams sockets); REFUSED beyond. */
export const DEFAULT_MAX_CONCURRENT = 1000;

export interface UpstreamTarget {
  host: string;
  port: number;
  /** "127.0.0.1:53": the `to` label. */
  addr: string;
}

export interface SearchFanConfig {
  upstreams: UpstreamTarget[];
  /** Search domains, lowercase, no trailing dot; the root is "." */
  search: string[];
  ndots: number;
  timeoutMs: number;
  maxConcurrent: number;
}

function err(at: Directive | Token, what: string): Error {
  return directiveError(at, `searchfan: ${what}`);
}

function portArg(text: string, tok: Token): number {
  if (!/^\d{1,5}$/.test(text) || Number(text) < 1 || Number(text) > 65535)
    throw err(tok, `invalid port '${text}' in '${tok.text}'`);
  return Number(text);
}

/** An address TO, or null when the text is not one. */
function addressTo(tok: Token): UpstreamTarget | null {
  let text = tok.text;
  if (text.toLowerCase().startsWith('dns://')) text = text.slice(6);
  else if (/^[a-z][a-z0-9+.-]*:\/\//i.test(text))
    throw err(tok, `'${tok.text}': only plain DNS upstreams (dns://) are supported`);
  let host = text;
  let port = 53;
  const br = /^\[([^\]]+)\](?::(.*))?$/.exec(text);
  if (br) {
    host = br[1]!;
    if (br[2] !== undefined) port = portArg(br[2], tok);
  } else if (text.split(':').length === 2) {
    const i = text.indexOf(':');
    host = text.slice(0, i);
    port = portArg(text.slice(i + 1), tok);
  }
  const ip = canonicalIP(host);
  if (ip === null) return null;
  return { host: ip, port, addr: joinHostPort(ip, port) };
}

function readResolvConf(file: string, at: Directive | Token): ResolvConf {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw err(at, `cannot read ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
  return parseResolvConf(text, file);
}

function searchDomain(tok: Token): string {
  const z = canonicalZone(tok.text);
  try {
    nameToLabels(z);
  } catch (e) {
    throw err(tok, `invalid search domain '${tok.text}': ${(e as Error).message}`);
  }
  return z === '.' ? '.' : z.slice(0, -1);
}

export function parseSearchFan(d: Directive, corefile: string): SearchFanConfig {
  const baseDir = dirname(corefile);
  const upstreams: UpstreamTarget[] = [];
  let defaults: ResolvConf | null = null;
  for (const tok of d.args) {
    const a = addressTo(tok);
    if (a !== null) {
      upstreams.push(a);
      continue;
    }
    const file = isAbsolute(tok.text) ? tok.text : resolve(baseDir, tok.text);
    if (!existsSync(file)) throw err(tok, `'${tok.text}' is not an IP address or an existing resolv.conf file`);
    const rc = readResolvConf(file, tok);
    defaults ??= rc;
    for (const ns of rc.nameservers) {
      const ip = ns.includes('%') ? ns.slice(0, ns.indexOf('%')) : ns;
      upstreams.push({ host: ip, port: 53, addr: joinHostPort(ip, 53) });
    }
  }
  if (d.args.length === 0) {
    defaults = readResolvConf(DEFAULT_RESOLV_CONF, d);
    for (const ns of defaults.nameservers) {
      const ip = ns.includes('%') ? ns.slice(0, ns.indexOf('%')) : ns;
      upstreams.push({ host: ip, port: 53, addr: joinHostPort(ip, 53) });
    }
  } else if (defaults === null && existsSync(DEFAULT_RESOLV_CONF)) {
    try {
      defaults = parseResolvConf(readFileSync(DEFAULT_RESOLV_CONF, 'utf8'), DEFAULT_RESOLV_CONF);
    } catch {
      defaults = null;
    }
  }
  if (upstreams.length === 0) throw err(d, 'no upstream servers');
  if (upstreams.length > MAX_UPSTREAMS) throw err(d, `more than ${MAX_UPSTREAMS} upstreams: ${upstreams.length}`);

  const cfg: SearchFanConfig = {
    upstreams,
    search: (defaults?.search ?? []).map((s) => (s === '.' ? '.' : s.toLowerCase())),
    ndots: defaults?.ndots ?? 1,
    timeoutMs: DEFAULT_TIMEOUT_MS,
    maxConcurrent: DEFAULT_MAX_CONCURRENT,
  };
  for (const p of d.block ?? []) {
    switch (p.name) {
      case 'search':
        cfg.search = p.args.map(searchDomain);
        break;
      case 'ndots':
        cfg.ndots = intArg(p.args[0], p, 'searchfan: ndots', 0, MAX_NDOTS);
        if (p.args.length > 1) throw err(p.args[1]!, 'ndots takes one number');
        break;
      case 'timeout':
        cfg.timeoutMs = durationArg(p.args[0], p, 'searchfan: timeout');
        if (cfg.timeoutMs <= 0 || cfg.timeoutMs > 60_000)
          throw err(p.args[0]!, 'timeout must be more than 0 and at most 1m');
        break;
      case 'max_concurrent':
        cfg.maxConcurrent = intArg(p.args[0], p, 'searchfan: max_concurrent', 1, 1_000_000);
        break;
      default:
        unknownProperty(p, 'searchfan');
    }
  }
  if (cfg.search.length > MAX_SEARCH) throw err(d, `more than ${MAX_SEARCH} search domains: ${cfg.search.length}`);
  return cfg;
}

export const setup: PluginSetup = (ds, ctx) => {
  const d = once(ds, 'searchfan');
  const fan = new SearchFan(
    parseSearchFan(d, ctx.corefile),
    ctx.block.serverLabel,
    ctx.services.get(SEARCHFAN_METRICS),
  );
  return { name: 'searchfan', handler: fan, startup: () => fan.start(), shutdown: () => fan.stop() };
};
