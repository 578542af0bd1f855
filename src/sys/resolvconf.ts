// resolv.conf, read two ways from one lexer: as glibc's resolver reads it (resolv/res_init.c:
// keywords in column 0, comments only at the start of a line, the last `search`/`domain`
// wins, at most three nameservers, option values clamped to glibc's limits), and as CoreDNS's
// `forward . /etc/resolv.conf` takes its nameservers (Go's reader: indented lines too, no cap).
// Every deviation from a clean file is kept as a problem with its line, because a pod's DNS
// often fails on exactly these.

import { canonicalIP } from '../dns/ip.js';

/** glibc's limits (resolv.h): MAXNS, RES_MAXNDOTS, RES_MAXRETRANS, RES_MAXRETRY. */
export const MAX_NAMESERVERS = 3;
export const MAX_NDOTS = 15;
export const MAX_TIMEOUT_SECONDS = 30;
export const MAX_ATTEMPTS = 5;

export interface ResolvConfProblem {
  /** 1-based line in the file; 0 for a problem of the file as a whole. */
  line: number;
  message: string;
}

export interface ResolvConf {
  file: string;
  /** Addresses in file order (IPv6 zone `%eth0` kept), at most MAX_NAMESERVERS. */
  nameservers: string[];
  /** Search domains without their trailing dot; the root is ".". */
  search: string[];
  /** Where the search list came from. */
  searchSource: 'search' | 'domain' | 'hostname' | 'none';
  ndots: number;
  /** `options timeout:N`, seconds: the first try's timeout (RES_TIMEOUT 5). */
  timeout: number;
  /** `options attempts:N`: rounds over all nameservers (RES_DFLRETRY 2). */
  attempts: number;
  rotate: boolean;
  singleRequest: boolean;
  singleRequestReopen: boolean;
  useVc: boolean;
  noTldQuery: boolean;
  edns0: boolean;
  trustAd: boolean;
  noAaaa: boolean;
  /** Options glibc knows that do not change what is sent (debug, inet6, no-reload...). */
  inertOptions: string[];
  problems: ResolvConfProblem[];
}

export interface ParseOptions {
  /** The host name, for glibc's default search domain when the file has neither search nor domain. */
  hostname?: string;
}

const INERT_OPTIONS = new Set([
  'debug',
  'inet6',
  'insecure1',
  'insecure2',
  'no-check-names',
  'no-reload',
  'ip6-bytestring',
  'ip6-dotint',
  'no-ip6-dotint',
]);

/** Parses resolv.conf text. Never throws: what glibc would ignore is reported as a problem. */
export function parseResolvConf(text: string, file: string, opts: ParseOptions = {}): ResolvConf {
  const conf: ResolvConf = {
    file,
    nameservers: [],
    search: [],
    searchSource: 'none',
    ndots: 1,
    timeout: 5,
    attempts: 2,
    rotate: false,
    singleRequest: false,
    singleRequestReopen: false,
    useVc: false,
    noTldQuery: false,
    edns0: false,
    trustAd: false,
    noAaaa: false,
    inertOptions: [],
    problems: [],
  };
  const problem = (line: number, message: string) => conf.problems.push({ line, message });
  for (const { line: lineNo, indented, text: lineText, keyword, values } of resolvConfLines(text)) {
    if (indented) {
      problem(lineNo, `starts with white space: glibc ignores the line ("${lineText}")`);
      continue;
    }
    switch (keyword) {
      case 'nameserver': {
        const ns = nameserverAddress(values);
        if (ns.ip === null) {
          problem(
            lineNo,
            ns.why === NO_ADDRESS
              ? `${ns.why}: ignored`
              : `nameserver ${ns.why}: ignored (a host name is not allowed here)`,
          );
          break;
        }
        if (conf.nameservers.length >= MAX_NAMESERVERS) {
          problem(lineNo, `nameserver ${ns.addr} ignored: glibc uses at most ${MAX_NAMESERVERS} nameservers`);
          break;
        }
        conf.nameservers.push(ns.ip);
        break;
      }
      case 'domain':
      case 'search': {
        if (values.length === 0) {
          problem(lineNo, `${keyword} without a domain: ignored`);
          break;
        }
        const domains = keyword === 'domain' ? values.slice(0, 1) : values;
        if (conf.searchSource === 'search' || conf.searchSource === 'domain') {
          problem(
            lineNo,
            `${keyword} replaces the ${conf.searchSource} line before it (the last search or domain line wins)`,
          );
        }
        conf.search = domains.map(normalizeDomain);
        conf.searchSource = keyword;
        for (const d of domains) {
          if (d.startsWith('#') || d.startsWith(';')) {
            problem(lineNo, `"${d}" is taken as a search domain: comments must start the line`);
          }
        }
        if (keyword === 'search' && conf.search.length > 6) {
          problem(lineNo, `${conf.search.length} search domains: glibc before 2.26 (and musl) use only the first 6`);
        }
        break;
      }
      case 'options':
        for (const opt of values) parseOption(conf, opt, lineNo);
        break;
      case 'sortlist':
        conf.inertOptions.push('sortlist');
        break;
      default:
        problem(lineNo, `unknown keyword "${keyword}": ignored`);
    }
  }
  if (conf.nameservers.length === 0) {
    conf.nameservers.push('127.0.0.1');
    problem(0, 'no usable nameserver line: glibc then asks 127.0.0.1');
  }
  if (conf.searchSource === 'none') {
    const host = opts.hostname ?? '';
    const dot = host.indexOf('.');
    if (dot > 0 && dot < host.length - 1) {
      conf.search = [normalizeDomain(host.slice(dot + 1))];
      conf.searchSource = 'hostname';
    }
  }
  return conf;
}

interface ResolvConfLine {
  /** 1-based. */
  line: number;
  /** Starts with white space: glibc ignores such a line, Go's reader does not. */
  indented: boolean;
  /** The line without its surrounding white space. */
  text: string;
  keyword: string;
  values: string[];
}

/** The keyword lines of the file: blank lines and lines starting with # or ; are left out. */
function resolvConfLines(text: string): ResolvConfLine[] {
  const out: ResolvConfLine[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!.replace(/\r$/, '');
    if (line.trim() === '' || line.startsWith('#') || line.startsWith(';')) continue;
    const fields = line.split(/[ \t]+/).filter((f) => f !== '');
    out.push({
      line: i + 1,
      indented: /^\s/.test(line),
      text: line.trim(),
      keyword: fields[0]!,
      values: fields.slice(1),
    });
  }
  return out;
}

const NO_ADDRESS = 'nameserver without an address';

/**
 * A nameserver line's address, canonical, its IPv6 zone (%eth0) kept. A # or ; stuck to the
 * address makes it no address, as in glibc (inet_aton) and CoreDNS (which dials it verbatim).
 */
function nameserverAddress(
  values: string[],
): { ip: string; addr: string; why?: undefined } | { ip: null; addr: string; why: string } {
  const addr = values[0] ?? '';
  if (addr === '') return { ip: null, addr, why: NO_ADDRESS };
  const pct = addr.indexOf('%');
  const ip = canonicalIP(pct >= 0 ? addr.slice(0, pct) : addr);
  if (ip === null) return { ip: null, addr, why: `"${addr}" is not an IP address` };
  return { ip: pct >= 0 ? ip + addr.slice(pct) : ip, addr };
}

/**
 * The nameservers as CoreDNS's `forward . FILE` takes them (Go's resolv.conf reader): every
 * nameserver line, an indented one too, with no cap of three and no 127.0.0.1 when there is none.
 */
export function resolvConfNameservers(text: string): { nameservers: string[]; problems: ResolvConfProblem[] } {
  const nameservers: string[] = [];
  const problems: ResolvConfProblem[] = [];
  for (const { line, keyword, values } of resolvConfLines(text)) {
    if (keyword !== 'nameserver') continue;
    const ns = nameserverAddress(values);
    if (ns.ip === null) problems.push({ line, message: ns.why });
    else nameservers.push(ns.ip);
  }
  return { nameservers, problems };
}

function normalizeDomain(d: string): string {
  if (d === '.') return '.';
  return d.endsWith('.') ? d.slice(0, -1) : d;
}

/** glibc reads option numbers with atoi(): leading digits, anything else is 0. */
function atoi(s: string): number {
  const m = /^[+]?\d+/.exec(s.trim());
  return m ? Number(m[0]) : 0;
}

function parseOption(conf: ResolvConf, opt: string, line: number): void {
  const colon = opt.indexOf(':');
  const name = colon >= 0 ? opt.slice(0, colon) : opt;
  const arg = colon >= 0 ? opt.slice(colon + 1) : undefined;
  const numeric = (max: number, min: number): number => {
    const raw = arg ?? '';
    const n = atoi(raw);
    if (!/^\d+$/.test(raw))
      conf.problems.push({ line, message: `option ${opt}: "${raw}" is not a number; glibc reads it as ${n}` });
    if (n > max) {
      conf.problems.push({ line, message: `option ${opt}: glibc caps ${name} at ${max}` });
      return max;
    }
    if (n < min) {
      conf.problems.push({ line, message: `option ${opt}: ${name} below ${min} behaves as ${min}` });
      return min;
    }
    return n;
  };
  switch (name) {
    case 'ndots':
      conf.ndots = numeric(MAX_NDOTS, 0);
      return;
    case 'timeout':
      conf.timeout = numeric(MAX_TIMEOUT_SECONDS, 1);
      return;
    case 'attempts':
      conf.attempts = numeric(MAX_ATTEMPTS, 0);
      if (conf.attempts === 0)
        conf.problems.push({
          line,
          message: 'option attempts:0: glibc then sends no query at all and every lookup fails at once',
        });
      return;
    case 'rotate':
      conf.rotate = true;
      return;
    case 'single-request':
      conf.singleRequest = true;
      return;
    case 'single-request-reopen':
      conf.singleRequestReopen = true;
      return;
    case 'use-vc':
      conf.useVc = true;
      return;
    case 'no-tld-query':
    case 'no_tld_query':
      conf.noTldQuery = true;
      return;
    case 'edns0':
      conf.edns0 = true;
      return;
    case 'trust-ad':
      conf.trustAd = true;
      return;
    case 'no-aaaa':
      conf.noAaaa = true;
      return;
    default:
      if (INERT_OPTIONS.has(name)) conf.inertOptions.push(name);
      else conf.problems.push({ line, message: `unknown option "${opt}": ignored` });
  }
}

/** The options line as the resolver sees it, defaults included: `ndots:5 timeout:5 attempts:2 rotate`. */
export function optionsText(conf: ResolvConf): string {
  const parts = [`ndots:${conf.ndots}`, `timeout:${conf.timeout}`, `attempts:${conf.attempts}`];
  if (conf.rotate) parts.push('rotate');
  if (conf.singleRequest) parts.push('single-request');
  if (conf.singleRequestReopen) parts.push('single-request-reopen');
  if (conf.useVc) parts.push('use-vc');
  if (conf.noTldQuery) parts.push('no-tld-query');
  if (conf.edns0) parts.push('edns0');
  if (conf.trustAd) parts.push('trust-ad');
  if (conf.noAaaa) parts.push('no-aaaa');
  return parts.join(' ');
}
