// Reads what the generated Corefile depends on (the base template, the node's resolv.conf,
// the kube-dns ConfigMap directory) and renders it. The caller polls `fingerprint` to notice
// changes: reading three small files is cheaper than trusting inotify across kubelet's
// symlink swaps of ConfigMap volumes.

import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { resolvConfNameservers } from '../sys/resolvconf.js';
import { parseKubeDnsConfig } from './kubedns.js';
import { DEFAULT_BASE_COREFILE, PILLAR, renderCorefile } from './template.js';

export class CorefileSourceError extends Error {
  readonly code = 'NODECACHE_ERR_CONFIG';
  constructor(message: string) {
    super(message);
    this.name = 'CorefileSourceError';
  }
}

export interface GeneratorOptions {
  baseCorefile: string;
  /** A missing explicit base file is an error; a missing default one means the built-in template. */
  baseCorefileExplicit: boolean;
  resolvConf: string;
  kubeDnsConfigDir: string;
  localIPs: readonly string[];
  /** The upstream Service's ClusterIP; null when it could not be found (then the template must not use it). */
  clusterDns: string | null;
  /** The upstream Service's name, for the message when clusterDns is null. */
  clusterDnsSource?: string;
  dnsDomain: string;
  dnsPort: number;
}

export interface SourceTexts {
  base: string;
  baseFrom: string;
  resolvConf: string | null;
  kubeDns: Map<string, string>;
}

export interface GeneratedCorefile {
  text: string;
  /** SHA-256 over every input, to tell whether anything changed since the last poll. */
  fingerprint: string;
  /** Where the template came from: its path, or "built-in". */
  baseFrom: string;
  warnings: string[];
}

const KUBE_DNS_KEYS = ['stubDomains', 'upstreamNameservers', 'federations'];

function readOptional(path: string): string | null {
  try {
    return readFileSync(path, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw new CorefileSourceError(`cannot read ${path}: ${(e as Error).message}`);
  }
}

export function readSources(o: GeneratorOptions): SourceTexts {
  const baseText = readOptional(o.baseCorefile);
  if (baseText === null && o.baseCorefileExplicit)
    throw new CorefileSourceError(`-basecorefile ${o.baseCorefile} does not exist`);
  const kubeDns = new Map<string, string>();
  if (o.kubeDnsConfigDir !== '') {
    for (const key of KUBE_DNS_KEYS) {
      const t = readOptional(join(o.kubeDnsConfigDir, key));
      if (t !== null) kubeDns.set(key, t);
    }
  }
  return {
    base: baseText ?? DEFAULT_BASE_COREFILE,
    baseFrom: baseText === null ? 'built-in' : o.baseCorefile,
    resolvConf: readOptional(o.resolvConf),
    kubeDns,
  };
}

export function fingerprint(s: SourceTexts): string {
  const h = createHash('sha256');
  h.update(s.baseFrom)
    .update('\0')
    .update(s.base)
    .update('\0')
    .update(s.resolvConf ?? '<none>');
  for (const [k, v] of s.kubeDns) h.update('\0').update(k).update('\0').update(v);
  return h.digest('hex');
}

export function renderSources(s: SourceTexts, o: GeneratorOptions): GeneratedCorefile {
  const warnings: string[] = [];
  const kd = parseKubeDnsConfig(s.kubeDns);
  for (const p of kd.problems) warnings.push(`kube-dns ConfigMap ${o.kubeDnsConfigDir}: ${p}`);
  let upstreamServers: string[] = kd.upstreamNameservers;
  const fromKubeDns = upstreamServers.length > 0;
  if (!fromKubeDns && s.base.includes(PILLAR.upstreamServers)) {
    if (s.resolvConf === null)
      throw new CorefileSourceError(
        `${o.resolvConf} does not exist; it names the node's resolvers for ${PILLAR.upstreamServers}`,
      );
    const rc = resolvConfNameservers(s.resolvConf);
    for (const p of rc.problems) warnings.push(`${o.resolvConf}:${p.line}: ${p.message}`);
    upstreamServers = rc.nameservers;
    if (upstreamServers.length === 0)
      throw new CorefileSourceError(
        `${o.resolvConf} has no usable nameserver line; it names the node's resolvers for ${PILLAR.upstreamServers}`,
      );
    const loopback = upstreamServers.filter((ns) => ns.startsWith('127.') || ns === '::1');
    if (loopback.length > 0) {
      warnings.push(
        `${o.resolvConf} names ${loopback.join(', ')}, a local stub; if it forwards back to us the loop plugin stops the agent (point -resolvconf at the real upstream list, e.g. /run/systemd/resolve/resolv.conf)`,
      );
    }
  }
  if (o.clusterDns === null && s.base.includes(PILLAR.clusterDns)) {
    throw new CorefileSourceError(
      `${s.baseFrom} uses ${PILLAR.clusterDns}, but the address of ${o.clusterDnsSource ?? 'the upstream Service'} was not found at start (restart the agent once the Service exists)`,
    );
  }
  const text = renderCorefile(s.base, {
    localIPs: o.localIPs,
    clusterDns: o.clusterDns ?? '',
    upstreamServers,
    upstreamFromKubeDns: fromKubeDns,
    dnsDomain: o.dnsDomain,
    stubDomains: kd.stubDomains,
    dnsPort: o.dnsPort,
  });
  const left = /__PILLAR__[A-Z_]+__/.exec(text);
  if (left)
    throw new CorefileSourceError(
      `${s.baseFrom}: unknown placeholder ${left[0]} (known: ${Object.values(PILLAR).join(', ')})`,
    );
  return { text, fingerprint: fingerprint(s), baseFrom: s.baseFrom, warnings };
}

export function generateCorefile(o: GeneratorOptions): GeneratedCorefile {
  return renderSources(readSources(o), o);
}
