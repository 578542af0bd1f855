// Checks made before anything on the node changes: every port the new configuration will
// listen on is tried (bound and released at once) wherever its address already exists, so a
// second agent whose ports are held by the running one fails without touching its setup.

import { createServer } from 'node:net';
import { createSocket } from 'node:dgram';
import { networkInterfaces } from 'node:os';
import { isIP } from 'node:net';
import { splitHostPort } from '../server/http.js';
import type { LoadedConfig } from '../server/runtime.js';

export interface PortUse {
  /** What will listen there, for the message: `health`, `DNS (udp)`, ... */
  what: string;
  /** '' means every address. */
  host: string;
  port: number;
  proto: 'tcp' | 'udp';
}

/** The HTTP plugins' defaults, as their setups use when the directive has no address. */
const HTTP_DEFAULTS: Record<string, string> = { health: ':8080', ready: ':8181', prometheus: 'localhost:9153' };

/** Every (address, port) the configuration listens on: the DNS listeners and the HTTP plugins. */
export function portsOf(config: LoadedConfig, dnsListeners: ReadonlyArray<{ host: string; port: number }>): PortUse[] {
  const out: PortUse[] = [];
  for (const { host, port } of dnsListeners) {
    out.push({ what: 'DNS', host, port, proto: 'udp' }, { what: 'DNS', host, port, proto: 'tcp' });
  }
  for (const block of config.blocks) {
    for (const d of block.directives) {
      const fallback = HTTP_DEFAULTS[d.name];
      if (fallback === undefined) continue;
      const address = d.args[0]?.text || fallback;
      const { host, port } = splitHostPort(address, 0);
      out.push({ what: `${d.name} ${address}`, host, port, proto: 'tcp' });
    }
  }
  const seen = new Set<string>();
  return out.filter((p) => {
    const k = `${p.proto} ${p.host} ${p.port}`;
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}

function localAddresses(): Set<string> {
  const out = new Set<string>();
  for (const list of Object.values(networkInterfaces())) for (const a of list ?? []) out.add(a.address);
  return out;
}

function tryBind(host: string, port: number, proto: 'tcp' | 'udp'): Promise<NodeJS.ErrnoException | null> {
  return new Promise((resolve) => {
    if (proto === 'udp') {
      const s = createSocket({ type: isIP(host) === 6 ? 'udp6' : 'udp4' });
      s.once('error', (e) => {
        s.close();
        resolve(e);
      });
      s.bind({ address: host, port, exclusive: true }, () => s.close(() => resolve(null)));
    } else {
      const s = createServer();
      s.once('error', (e) => resolve(e));
      s.listen({ host, port, exclusive: true }, () => s.close(() => resolve(null)));
    }
  });
}

/**
 * Tries every port whose address exists on the node now (or every address); an address not
 * there yet goes on the interface we create, where nothing else can hold it. Returns the
 * problems, one line each (empty: all free).
 */
export async function checkPorts(uses: readonly PortUse[]): Promise<string[]> {
  const local = localAddresses();
  const problems: string[] = [];
  for (const u of uses) {
    if (u.port === 0) continue;
    const host = u.host === '' ? '0.0.0.0' : u.host;
    if (u.host !== '' && !local.has(host)) continue;
    const e = await tryBind(host, u.port, u.proto);
    if (!e || e.code === 'EADDRNOTAVAIL') continue;
    const why =
      e.code === 'EADDRINUSE'
        ? 'address already in use (another node-cache, or another program, listens there)'
        : e.message;
    problems.push(
      `${u.what}: cannot listen on ${u.host === '' ? '' : u.host.includes(':') ? `[${u.host}]` : u.host}:${u.port}/${u.proto}: ${why}`,
    );
  }
  return problems;
}
