// Parses `forward FROM TO... { ... }` lines. Each line is its own instance; they run in the
// order written, and `next` on one hands the listed rcodes to the following line.

import { existsSync, readFileSync } from 'node:fs';
import { dirname, isAbsolute, resolve } from 'node:path';
import type tls from 'node:tls';
import { directiveError } from '../../corefile/errors.js';
import type { Directive, Token } from '../../corefile/types.js';
import { rcodeFromString, Rcode } from '../../dns/constants.js';
import { canonicalIP } from '../../dns/ip.js';
import { canonicalZone, nameToLabels } from '../../dns/name.js';
import { cidrToReverseZones } from '../../dns/reverse.js';
import { resolvConfNameservers } from '../../sys/resolvconf.js';
import { durationArg, intArg, noArgs, unknownProperty } from '../../corefile/args.js';
import type { PluginInstance, PluginSetup } from '../plugin.js';
import { Forward, type ForwardOptions } from './handler.js';
import { FORWARD_METRICS, type ForwardMetrics } from './metrics.js';
import { makePolicy, type PolicyName } from '../../upstream/policy.js';
import { Upstream, type HealthCheckSettings, type UpstreamAddress } from './upstream.js';

/** CoreDNS's limit on TOs per forward line. */
export const MAX_UPSTREAMS = 15;

/** Everything a forward line says, before upstream objects are made. */
export interface ForwardConfig {
  from: string;
  to: UpstreamAddress[];
  except: string[];
  forceTcp: boolean;
  preferUdp: boolean;
  expireMs: number;
  maxIdleConns: number;
  readTimeoutMs: number;
  maxFails: number;
  maxConnectAttempts: number;
  maxConcurrent: number;
  policy: PolicyName;
  healthCheckMs: number;
  healthCheckRecursion: boolean;
  healthCheckDomain: string;
  tls: tls.ConnectionOptions | null;
  tlsServerName: string | null;
  nextRcodes: number;
  nextOnNodata: boolean;
  failoverRcodes: number;
  failfastAllUnhealthy: boolean;
}

function err(at: Directive | Token, what: string): Error {
  return directiveError(at, `forward: ${what}`);
}

function zoneArg(tok: Token): string {
  const t = tok.text;
  if (t.includes('/')) {
    let zones: string[];
    try {
      zones = cidrToReverseZones(t);
    } catch {
      throw err(tok, `invalid CIDR '${t}'`);
    }
    // As in CoreDNS, a CIDR that needs several reverse zones uses only the first.
    return zones[0]!;
  }
  const z = canonicalZone(t);
  try {
    nameToLabels(z);
  } catch (e) {
    throw err(tok, `invalid domain '${t}': ${(e as Error).message}`);
  }
  return z;
}

function portArg(text: string, tok: Token): number {
  if (!/^\d{1,5}$/.test(text) || Number(text) < 1 || Number(text) > 65535)
    throw err(tok, `invalid port '${text}' in '${tok.text}'`);
  return Number(text);
}

/** Splits "host", "host:port", "[v6]:port", "v6" (no brackets, no port). */
function splitHostPort(text: string, tok: Token, defaultPort: number): { host: string; port: number } {
  const br = /^\[([^\]]+)\](?::(.*))?$/.exec(text);
  if (br) return { host: br[1]!, port: br[2] === undefined ? defaultPort : portArg(br[2], tok) };
  const colons = text.split(':').length - 1;
  if (colons === 1) {
    const i = text.indexOf(':');
    return { host: text.slice(0, i), port: portArg(text.slice(i + 1), tok) };
  }
  return { host: text, port: defaultPort };
}

/** One TO: an address, or a resolv.conf file whose nameservers all become upstreams. */
function parseTo(tok: Token, baseDir: string, warn: (msg: string) => void): UpstreamAddress[] {
  const text = tok.text;
  let scheme = 'dns';
  let rest = text;
  const m = /^([A-Za-z][A-Za-z0-9+.-]*):\/\/(.*)$/.exec(text);
  if (m) {
    scheme = m[1]!.toLowerCase();
    rest = m[2]!;
  }
  if (scheme === 'https')
    throw err(tok, `DNS over HTTPS upstreams ('${text}') are not supported by clusterdns; use dns:// or tls://`);
  if (scheme !== 'dns' && scheme !== 'tls')
    throw err(tok, `'${scheme}' is not supported as a destination protocol in forward: ${text}`);
  const isTls = scheme === 'tls';
  const defaultPort = isTls ? 853 : 53;

  // tls://IP%NAME[:PORT] names the server per upstream (CoreDNS's splitZone).
  let serverName: string | undefined;
  if (isTls && rest.includes('%')) {
    const pct = rest.lastIndexOf('%');
    let host = rest.slice(0, pct);
    let zone = rest.slice(pct + 1);
    if (host.startsWith('[')) host += ']';
    const colon = zone.lastIndexOf(':');
    if (colon >= 0) {
      host += zone.slice(colon);
      zone = zone.slice(0, colon);
    }
    zone = zone.replace(/\]$/, '');
    if (zone === '') throw err(tok, `empty server name in '${text}'`);
    serverName = zone;
    rest = host;
  }

  const { host, port } = splitHostPort(rest, tok, defaultPort);
  const pct = !isTls ? host.indexOf('%') : -1;
  const ip = canonicalIP(pct >= 0 ? host.slice(0, pct) : host);
  if (ip !== null) return [{ host: pct >= 0 ? ip + host.slice(pct) : ip, port, tls: isTls, serverName }];

  // Not an address: a resolv.conf-style file, if there is one.
  const file = isAbsolute(rest) ? rest : resolve(baseDir, rest);
  const looksLikePath = rest.startsWith('/') || rest.startsWith('./') || rest.startsWith('../');
  if (existsSync(file)) {
    let content: string;
    try {
      content = readFileSync(file, 'utf8');
    } catch (e) {
      throw err(tok, `cannot read ${file}: ${(e as Error).message}`);
    }
    const parsed = resolvConfNameservers(content);
    for (const p of parsed.problems) warn(`${file}:${p.line}: ${p.message}; line skipped`);
    if (parsed.nameservers.length === 0) throw err(tok, `no nameservers found in ${file}`);
    return parsed.nameservers.map((h) => ({ host: h, port: defaultPort, tls: isTls }));
  }
  if (looksLikePath) throw err(tok, `cannot read ${file}: no such file`);
  throw err(tok, `'${text}' is not an IP address or file (clusterdns does not resolve upstream host names)`);
}

function rcodeMask(p: Directive, allowNoError: boolean): number {
  if (p.args.length === 0) throw err(p, `${p.name} needs at least one RCODE`);
  let mask = 0;
  for (const t of p.args) {
    const rc = rcodeFromString(t.text);
    if (rc === undefined || rc > 15) throw err(t, `${t.text} is not a valid rcode`);
    if (!allowNoError && rc === Rcode.NOERROR) throw err(t, 'NoError cannot be used in failover');
    mask |= 1 << rc;
  }
  return mask;
}

function readTlsFile(tok: Token, baseDir: string): Buffer {
  const file = isAbsolute(tok.text) ? tok.text : resolve(baseDir, tok.text);
  try {
    return readFileSync(file);
  } catch (e) {
    throw err(tok, `cannot read TLS file ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
}

/** Parses one forward line into its configuration. */
export function parseForward(d: Directive, corefile: string, warn: (msg: string) => void = () => {}): ForwardConfig {
  const baseDir = dirname(corefile);
  if (d.args.length < 2) throw err(d, 'wrong argument count: want FROM and at least one TO');
  const cfg: ForwardConfig = {
    from: zoneArg(d.args[0]!),
    to: [],
    except: [],
    forceTcp: false,
    preferUdp: false,
    expireMs: 10_000,
    maxIdleConns: 0,
    readTimeoutMs: 2000,
    maxFails: 2,
    maxConnectAttempts: 0,
    maxConcurrent: 0,
    policy: 'random',
    healthCheckMs: 500,
    healthCheckRecursion: true,
    healthCheckDomain: '.',
    tls: null,
    tlsServerName: null,
    nextRcodes: 0,
    nextOnNodata: false,
    failoverRcodes: 0,
    failfastAllUnhealthy: false,
  };
  for (const t of d.args.slice(1)) cfg.to.push(...parseTo(t, baseDir, warn));
  if (cfg.to.length > MAX_UPSTREAMS) throw err(d, `more than ${MAX_UPSTREAMS} TOs configured: ${cfg.to.length}`);

  for (const p of d.block ?? []) {
    switch (p.name) {
      case 'except':
        if (p.args.length === 0) throw err(p, 'except needs at least one name');
        for (const t of p.args) cfg.except.push(zoneArg(t));
        break;
      case 'force_tcp':
        noArgs(p);
        cfg.forceTcp = true;
        break;
      case 'prefer_udp':
        noArgs(p);
        cfg.preferUdp = true;
        break;
      case 'expire':
        cfg.expireMs = durationArg(p.args[0], p, 'expire');
        break;
      case 'max_idle_conns':
        cfg.maxIdleConns = intArg(p.args[0], p, 'max_idle_conns', 0, 2 ** 31 - 1);
        break;
      case 'read_timeout':
        cfg.readTimeoutMs = durationArg(p.args[0], p, 'read_timeout');
        if (cfg.readTimeoutMs <= 0) throw err(p, 'read_timeout must be positive');
        break;
      case 'max_fails':
        cfg.maxFails = intArg(p.args[0], p, 'max_fails', 0, 2 ** 32 - 1);
        break;
      case 'max_connect_attempts':
        cfg.maxConnectAttempts = intArg(p.args[0], p, 'max_connect_attempts', 0, 2 ** 32 - 1);
        break;
      case 'max_concurrent':
        cfg.maxConcurrent = intArg(p.args[0], p, 'max_concurrent', 0, 2 ** 31 - 1);
        break;
      case 'policy': {
        const x = p.args[0]?.text;
        if (x !== 'random' && x !== 'round_robin' && x !== 'sequential')
          throw err(p.args[0] ?? p, `unknown policy '${x ?? ''}'`);
        cfg.policy = x;
        break;
      }
      case 'health_check': {
        cfg.healthCheckMs = durationArg(p.args[0], p, 'health_check');
        for (let i = 1; i < p.args.length; i++) {
          const a = p.args[i]!;
          if (a.text === 'no_rec') cfg.healthCheckRecursion = false;
          else if (a.text === 'domain') {
            const dom = p.args[++i];
            if (dom === undefined) throw err(a, 'health_check: domain needs a name');
            try {
              nameToLabels(canonicalZone(dom.text));
            } catch {
              throw err(dom, `health_check: invalid domain name ${dom.text}`);
            }
            cfg.healthCheckDomain = canonicalZone(dom.text);
          } else throw err(a, `health_check: unknown option ${a.text}`);
        }
        break;
      }
      case 'tls': {
        if (p.args.length > 3) throw err(p, 'tls takes at most CERT KEY CA');
        const o: tls.ConnectionOptions = {};
        if (p.args.length === 1) o.ca = readTlsFile(p.args[0]!, baseDir);
        if (p.args.length >= 2) {
          o.cert = readTlsFile(p.args[0]!, baseDir);
          o.key = readTlsFile(p.args[1]!, baseDir);
        }
        if (p.args.length === 3) o.ca = readTlsFile(p.args[2]!, baseDir);
        cfg.tls = o;
        break;
      }
      case 'tls_servername':
        if (p.args.length !== 1) throw err(p, 'tls_servername needs exactly one name');
        cfg.tlsServerName = p.args[0]!.text;
        break;
      case 'next':
        cfg.nextRcodes |= rcodeMask(p, true);
        break;
      case 'next_on_nodata':
        noArgs(p);
        cfg.nextOnNodata = true;
        break;
      case 'failover':
        cfg.failoverRcodes |= rcodeMask(p, false);
        break;
      case 'failfast_all_unhealthy_upstreams':
        noArgs(p);
        cfg.failfastAllUnhealthy = true;
        break;
      case 'doh_method':
        throw err(p, 'doh_method: DNS over HTTPS is not supported by clusterdns');
      case 'resolver':
      case 'resolve_upstream':
        throw err(p, `${p.name}: clusterdns does not resolve upstream host names; give IP addresses`);
      case 'source_address':
        throw err(p, 'source_address is not supported by clusterdns');
      default:
        unknownProperty(p, 'forward');
    }
  }
  if (cfg.tlsServerName !== null) {
    for (const u of cfg.to) {
      if (u.serverName !== undefined) {
        throw err(
          d,
          `both forward ('${cfg.tlsServerName}') and proxy level ('${u.serverName}') TLS servernames are set for upstream proxy '${u.host}'`,
        );
      }
    }
  }
  return cfg;
}

/** Builds a Forward from a parsed line. Opens nothing: sockets come with the first query. */
export function buildForward(cfg: ForwardConfig, nextIsForward: boolean, metrics: ForwardMetrics): Forward {
  const health: HealthCheckSettings = {
    intervalMs: Math.max(cfg.healthCheckMs, 10),
    recursionDesired: cfg.healthCheckRecursion,
    domain: cfg.healthCheckDomain,
    timeoutMs: Math.min(1000, cfg.readTimeoutMs),
    overTcp: cfg.forceTcp,
  };
  let tlsOptions: tls.ConnectionOptions | null = null;
  if (cfg.to.some((u) => u.tls)) {
    tlsOptions = { ...(cfg.tls ?? {}), rejectUnauthorized: true };
    if (cfg.tlsServerName !== null) tlsOptions.servername = cfg.tlsServerName;
  }
  const upstreams = cfg.to.map(
    (addr) =>
      new Upstream(addr, { expireMs: cfg.expireMs, maxIdleConns: cfg.maxIdleConns, tls: tlsOptions }, health, metrics),
  );
  const opts: ForwardOptions = {
    from: cfg.from,
    except: cfg.except,
    upstreams,
    policy: makePolicy(cfg.policy),
    forceTcp: cfg.forceTcp,
    preferUdp: cfg.preferUdp,
    maxFails: cfg.maxFails,
    maxConcurrent: cfg.maxConcurrent,
    maxConnectAttempts: cfg.maxConnectAttempts,
    readTimeoutMs: cfg.readTimeoutMs,
    nextRcodes: cfg.nextRcodes,
    nextOnNodata: cfg.nextOnNodata,
    failoverRcodes: cfg.failoverRcodes,
    failfastAllUnhealthy: cfg.failfastAllUnhealthy,
    nextIsForward,
    metrics,
  };
  return new Forward(opts);
}

export const setup: PluginSetup = (ds, ctx) => {
  const configs = ds.map((d) => parseForward(d, ctx.corefile, (m) => ctx.logger.warn(m)));
  const metrics = ctx.services.get(FORWARD_METRICS);
  return configs.map((cfg, i): PluginInstance => {
    const fwd = buildForward(cfg, i < configs.length - 1, metrics);
    return { name: 'forward', handler: fwd, shutdown: () => fwd.stop() };
  });
};
