// The kube-dns ConfigMap (mounted as a directory, one file per key) that node-cache honours:
// `stubDomains` (JSON map domain → servers) and `upstreamNameservers` (JSON list).

import { isIP } from 'node:net';
import { isRecord } from '../kube/types.js';

export interface KubeDnsConfig {
  stubDomains: Map<string, string[]>;
  upstreamNameservers: string[];
  /** Keys or values that were ignored, with why (logged as warnings). */
  problems: string[];
}

/** `IP`, `IP:PORT`, `[IPv6]:PORT`; kube-dns takes no other forms. */
export function validServer(s: string): boolean {
  const v6 = /^\[([^\]]+)\](?::(\d+))?$/.exec(s);
  if (v6) return isIP(v6[1]!) === 6 && (v6[2] === undefined || (Number(v6[2]) > 0 && Number(v6[2]) < 65536));
  if (isIP(s) !== 0) return true;
  const m = /^([^:]+):(\d+)$/.exec(s);
  return !!m && isIP(m[1]!) === 4 && Number(m[2]) > 0 && Number(m[2]) < 65536;
}

const DOMAIN = /^([A-Za-z0-9_]([-A-Za-z0-9_]*[A-Za-z0-9_])?\.)*[A-Za-z0-9_]([-A-Za-z0-9_]*[A-Za-z0-9_])?\.?$/;

function parseJson(key: string, text: string, problems: string[]): unknown {
  try {
    return JSON.parse(text);
  } catch (e) {
    problems.push(`${key}: not JSON (${(e as Error).message}); ignored`);
    return undefined;
  }
}

/** Reads the ConfigMap's files (absent keys are fine); invalid entries are reported and skipped. */
export function parseKubeDnsConfig(files: ReadonlyMap<string, string>): KubeDnsConfig {
  const problems: string[] = [];
  const stubDomains = new Map<string, string[]>();
  const upstreamNameservers: string[] = [];
  const stub = files.get('stubDomains');
  if (stub !== undefined && stub.trim() !== '') {
    const parsed = parseJson('stubDomains', stub, problems);
    if (parsed !== undefined && !isRecord(parsed))
      problems.push('stubDomains: want a JSON object {"domain": ["IP", ...]}; ignored');
    else if (isRecord(parsed)) {
      for (const [domain, servers] of Object.entries(parsed)) {
        const list = Array.isArray(servers) ? servers.filter((s): s is string => typeof s === 'string') : [];
        if (!DOMAIN.test(domain)) problems.push(`stubDomains: "${domain}" is not a domain name; ignored`);
        else if (list.length === 0 || list.length !== (servers as unknown[]).length)
          problems.push(`stubDomains: ${domain}: want a list of IP addresses; ignored`);
        else if (!list.every(validServer))
          problems.push(
            `stubDomains: ${domain}: ${list.filter((s) => !validServer(s)).join(', ')} is not IP[:PORT]; ignored`,
          );
        else stubDomains.set(domain.replace(/\.$/, ''), list);
      }
    }
  }
  const up = files.get('upstreamNameservers');
  if (up !== undefined && up.trim() !== '') {
    const parsed = parseJson('upstreamNameservers', up, problems);
    if (parsed !== undefined) {
      const list = Array.isArray(parsed) ? parsed : null;
      if (!list || !list.every((s): s is string => typeof s === 'string' && validServer(s))) {
        problems.push('upstreamNameservers: want a JSON list of "IP[:PORT]"; ignored');
      } else if (list.length > 3) {
        problems.push('upstreamNameservers: at most 3 servers (as kube-dns); ignored');
      } else upstreamNameservers.push(...list);
    }
  }
  if (files.has('federations')) problems.push('federations: not supported (kube-dns federation is obsolete); ignored');
  return { stubDomains, upstreamNameservers, problems };
}
