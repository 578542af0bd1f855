// The marked block connect keeps in /etc/hosts: which lines go in it, and how it is put into
// (or taken out of) the file's text without changing one byte outside it.
import type { Route } from './routes.js';

export const BLOCK_BEGIN = '# BEGIN clusterdns connect';
export const BLOCK_END = '# END clusterdns connect';
const BLOCK_NOTE = '# Cluster Services from the route stream; removed by `clusterdns disconnect`. Do not edit.';

/** The file's markers are unbalanced or nested: we will not guess which lines are ours. */
export class HostsBlockError extends Error {
  readonly code = 'CONNECT_ERR_HOSTS_BLOCK';
  constructor(message: string) {
    super(message);
    this.name = 'HostsBlockError';
  }
}

export interface HostsNaming {
  /** The cluster domain used for the fully qualified names (the first --domains entry). */
  clusterDomain: string;
  /** The search list, in order; `<ns>.svc.<clusterDomain>` entries give short names their namespace. */
  searchDomains: readonly string[];
}

/** The namespaces whose Services a bare name reaches through the search list, highest priority first. */
export function searchNamespaces(n: HostsNaming): string[] {
  const suffix = `.svc.${n.clusterDomain}`;
  const out: string[] = [];
  for (const d of n.searchDomains) {
    if (!d.endsWith(suffix)) continue;
    const ns = d.slice(0, -suffix.length);
    if (ns !== '' && !ns.includes('.') && !out.includes(ns)) out.push(ns);
  }
  return out;
}

/**
 * One `IP name name.ns name.ns.svc name.ns.svc.<domain>` line per ClusterIP. The bare name goes
 * only to the Service the search list would find first, as the cluster's own resolver would.
 */
export function hostsEntries(routes: Iterable<Route>, naming: HostsNaming): string[] {
  const sorted = [...routes].sort((a, b) =>
    a.namespace === b.namespace ? cmp(a.name, b.name) : cmp(a.namespace, b.namespace),
  );
  const order = searchNamespaces(naming);
  const shortOwner = new Map<string, number>();
  for (const r of sorted) {
    const rank = order.indexOf(r.namespace);
    if (rank === -1 || r.clusterIPs.length === 0) continue;
    const cur = shortOwner.get(r.name);
    if (cur === undefined || rank < cur) shortOwner.set(r.name, rank);
  }
  const lines: string[] = [];
  for (const r of sorted) {
    const names: string[] = [];
    if (shortOwner.get(r.name) === order.indexOf(r.namespace)) names.push(r.name);
    names.push(
      `${r.name}.${r.namespace}`,
      `${r.name}.${r.namespace}.svc`,
      `${r.name}.${r.namespace}.svc.${naming.clusterDomain}`,
    );
    for (const ip of r.clusterIPs) lines.push(`${ip} ${names.join(' ')}`);
  }
  return lines;
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

export function renderBlock(entries: readonly string[], eol: string): string {
  return [BLOCK_BEGIN, BLOCK_NOTE, ...entries, BLOCK_END].map((l) => l + eol).join('');
}

interface Span {
  start: number;
  end: number;
}

/** Byte spans of every marked block (BEGIN line through END line and its line break). */
export function findBlocks(text: string): Span[] {
  const spans: Span[] = [];
  let open = -1;
  let openLine = 0;
  let lineNo = 0;
  for (let pos = 0; pos < text.length;) {
    lineNo++;
    const nl = text.indexOf('\n', pos);
    const next = nl === -1 ? text.length : nl + 1;
    const line = text.slice(pos, nl === -1 ? text.length : nl).trim();
    if (line === BLOCK_BEGIN) {
      if (open !== -1)
        throw new HostsBlockError(
          `line ${lineNo}: "${BLOCK_BEGIN}" inside the block opened on line ${openLine}; fix the file by hand`,
        );
      open = pos;
      openLine = lineNo;
    } else if (line === BLOCK_END) {
      if (open === -1)
        throw new HostsBlockError(`line ${lineNo}: "${BLOCK_END}" without "${BLOCK_BEGIN}"; fix the file by hand`);
      spans.push({ start: open, end: next });
      open = -1;
    }
    pos = next;
  }
  if (open !== -1)
    throw new HostsBlockError(
      `line ${openLine}: "${BLOCK_BEGIN}" is never closed by "${BLOCK_END}"; fix the file by hand`,
    );
  return spans;
}

export interface SpliceResult {
  text: string;
  /** True while the file's last line had no line break and we added one before our block. */
  addedNewline: boolean;
}

/**
 * Puts `block` in place of the file's marked block (appending it when there is none), or takes
 * the block out when `block` is null. Removal gives back the exact bytes the file had before the
 * block went in, including a missing final line break (`addedNewline` remembers that).
 */
export function spliceBlock(text: string, block: string | null, addedNewline: boolean): SpliceResult {
  const spans = findBlocks(text);
  if (spans.length === 0) {
    if (block === null) return { text, addedNewline: false };
    const needsBreak = text !== '' && !text.endsWith('\n');
    return { text: (needsBreak ? text + eolOf(text) : text) + block, addedNewline: needsBreak };
  }
  let out = text.slice(0, spans[0]!.start) + (block ?? '');
  for (let i = 0; i < spans.length; i++) {
    const tailEnd = i + 1 < spans.length ? spans[i + 1]!.start : text.length;
    out += text.slice(spans[i]!.end, tailEnd);
  }
  let added = addedNewline;
  if (block === null) {
    if (added && spans[spans.length - 1]!.end === text.length && spans[0]!.start === out.length) {
      if (out.endsWith('\r\n')) out = out.slice(0, -2);
      else if (out.endsWith('\n')) out = out.slice(0, -1);
    }
    added = false;
  }
  return { text: out, addedNewline: added };
}

/** The line break a file already uses (CRLF on a Windows hosts file), LF otherwise. */
export function eolOf(text: string, fallback = '\n'): string {
  const nl = text.indexOf('\n');
  if (nl === -1) return fallback;
  return nl > 0 && text[nl - 1] === '\r' ? '\r\n' : '\n';
}
