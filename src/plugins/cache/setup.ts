// `cache [TTL] [ZONES...] { success|denial CAPACITY [TTL [MINTTL]]; prefetch AMOUNT [[DURATION] [PERCENTAGE%]];
// serve_stale [DURATION] [immediate|verify]; servfail DURATION; disable success|denial [ZONES...]; keepttl;
// max_bytes SIZE }` with CoreDNS's defaults and error texts (max_bytes is ours).

import { directiveError } from '../../corefile/errors.js';
import type { Directive, Token } from '../../corefile/types.js';
import { canonicalZone } from '../../dns/name.js';
import type { PluginSetup } from '../plugin.js';
import { durationArg, once, unknownProperty } from '../../corefile/args.js';
import { CacheHandler, type CacheOptions, type TtlLimits } from './handler.js';
import { CACHE_METRICS } from './metrics.js';

/** CoreDNS's defaults (plugin/cache/cache.go, plugin/pkg/dnsutil/ttl.go). */
export const DEFAULT_CAPACITY = 10000;
export const MAX_SUCCESS_TTL = 3600;
export const MAX_DENIAL_TTL = 1800;
export const MIN_TTL = 5;
export const DEFAULT_SERVFAIL_MS = 5000;
/** Ours: what both kinds of entries may hold together; ordinary answers fill 20,480 entries well below it. */
export const DEFAULT_MAX_BYTES = 32 * 1024 * 1024;
const SIZE_UNITS: Record<string, number> = { '': 1, k: 1024, m: 1024 * 1024, g: 1024 * 1024 * 1024 };
const SHARDS = 256;
const MIN_SHARD = 4;

/** What CoreDNS actually holds for a configured capacity: 256 shards of max(cap/256, 4). */
export function effectiveCapacity(configured: number): number {
  return Math.max(Math.floor(configured / SHARDS), MIN_SHARD) * SHARDS;
}

function argErr(d: Directive): never {
  throw directiveError(d, `Wrong argument count or unexpected line ending after '${d.name}'`);
}

function integer(tok: Token): number {
  if (!/^[+-]?\d+$/.test(tok.text)) throw directiveError(tok, `strconv.Atoi: parsing "${tok.text}": invalid syntax`);
  return Number(tok.text);
}

function positiveTtl(tok: Token): number {
  const n = integer(tok);
  // Reserve 0 (and smaller), as CoreDNS does.
  if (n <= 0) throw directiveError(tok, `cache TTL can not be zero or negative: ${n}`);
  return n;
}

/** `success|denial CAPACITY [TTL [MINTTL]]`. */
function ttlLimits(p: Directive, into: TtlLimits): void {
  if (p.args.length === 0 || p.args.length > 3) argErr(p);
  const cap = integer(p.args[0]!);
  if (cap < 0) throw directiveError(p.args[0]!, `cache capacity can not be negative: ${cap}`);
  into.capacity = effectiveCapacity(cap);
  if (p.args[1]) into.maxTtl = positiveTtl(p.args[1]);
  if (p.args[2]) {
    const min = integer(p.args[2]);
    if (min < 0) throw directiveError(p.args[2], `cache min TTL can not be negative: ${min}`);
    into.minTtl = min;
  }
}

/** `max_bytes SIZE`: bytes, or with a K, M or G suffix (powers of 1024). */
function maxBytes(p: Directive): number {
  if (p.args.length !== 1) argErr(p);
  const tok = p.args[0]!;
  const m = /^(\d+)([kmg]?)i?b?$/i.exec(tok.text);
  const n = m === null ? NaN : Number(m[1]) * SIZE_UNITS[m[2]!.toLowerCase()]!;
  if (!(n > 0) || !Number.isSafeInteger(n))
    throw directiveError(tok, `max_bytes: "${tok.text}" is not a size above zero (bytes, or with a K, M or G suffix)`);
  return n;
}

function zonesOf(tokens: Token[]): string[] {
  return tokens.map((t) => canonicalZone(t.text));
}

export function parseCache(ds: Directive[], blockZones: string[], server: string): CacheOptions {
  const d = once(ds, 'cache');
  const opts: CacheOptions = {
    zones: blockZones,
    success: { capacity: effectiveCapacity(DEFAULT_CAPACITY), maxTtl: MAX_SUCCESS_TTL, minTtl: MIN_TTL },
    denial: { capacity: effectiveCapacity(DEFAULT_CAPACITY), maxTtl: MAX_DENIAL_TTL, minTtl: MIN_TTL },
    servfailMs: DEFAULT_SERVFAIL_MS,
    prefetch: null,
    staleMs: 0,
    verifyStale: false,
    disableSuccess: [],
    disableDenial: [],
    keepTtl: false,
    maxBytes: DEFAULT_MAX_BYTES,
    server,
  };
  let args = d.args;
  // The first argument is the TTL when it is a number, else a zone.
  if (args[0] && /^[+-]?\d+$/.test(args[0].text)) {
    const ttl = positiveTtl(args[0]);
    opts.success.maxTtl = ttl;
    opts.denial.maxTtl = ttl;
    args = args.slice(1);
  }
  if (args.length > 0) opts.zones = zonesOf(args);

  for (const p of d.block ?? []) {
    switch (p.name) {
      case 'success':
        ttlLimits(p, opts.success);
        break;
      case 'denial':
        ttlLimits(p, opts.denial);
        break;
      case 'prefetch': {
        if (p.args.length === 0 || p.args.length > 3) argErr(p);
        const amount = integer(p.args[0]!);
        if (amount < 0) throw directiveError(p.args[0]!, `prefetch amount should be positive: ${amount}`);
        const pf = { amount, durationMs: 60_000, percentage: 10 };
        if (p.args[1]) pf.durationMs = durationArg(p.args[1], p, 'prefetch');
        if (p.args[2]) {
          const pct = p.args[2].text;
          if (!pct.endsWith('%')) {
            throw directiveError(
              p.args[2],
              `last character of percentage should be \`%\`, but is: '${pct[pct.length - 1] ?? ''}'`,
            );
          }
          const num = integer({ ...p.args[2], text: pct.slice(0, -1) });
          if (num < 10 || num > 90) throw directiveError(p.args[2], `percentage should fall in range [10, 90]: ${num}`);
          pf.percentage = num;
        }
        opts.prefetch = amount > 0 ? pf : null;
        break;
      }
      case 'serve_stale': {
        if (p.args.length > 2) argErr(p);
        opts.staleMs = 3_600_000;
        if (p.args[0]) opts.staleMs = durationArg(p.args[0], p, 'serve_stale');
        opts.verifyStale = false;
        if (p.args[1]) {
          const mode = p.args[1].text.toLowerCase();
          if (mode !== 'immediate' && mode !== 'verify') {
            throw directiveError(p.args[1], `invalid value for serve_stale refresh mode: ${mode}`);
          }
          opts.verifyStale = mode === 'verify';
        }
        break;
      }
      case 'servfail': {
        if (p.args.length !== 1) argErr(p);
        const ms = durationArg(p.args[0], p, 'servfail');
        // RFC 2308 7.1 prohibits caching SERVFAIL longer than 5 minutes.
        if (ms > 300_000)
          throw directiveError(p.args[0]!, 'caching SERVFAIL responses over 5 minutes is not permitted');
        opts.servfailMs = ms;
        break;
      }
      case 'disable': {
        if (p.args.length < 1) argErr(p);
        const zones = p.args.length > 1 ? zonesOf(p.args.slice(1)) : ['.'];
        const which = p.args[0]!.text;
        if (which === 'success') opts.disableSuccess.push(...zones);
        else if (which === 'denial') opts.disableDenial.push(...zones);
        else throw directiveError(p.args[0]!, 'cache type for disable must be "success" or "denial"');
        break;
      }
      case 'max_bytes':
        opts.maxBytes = maxBytes(p);
        break;
      case 'keepttl':
        if (p.args.length !== 0) argErr(p);
        opts.keepTtl = true;
        break;
      default:
        unknownProperty(p, 'cache');
    }
  }
  return opts;
}

export const setup: PluginSetup = (ds, ctx) => {
  const h = new CacheHandler(
    parseCache(ds, ctx.block.zones, ctx.block.serverLabel),
    ctx.services.selfProbes,
    ctx.services.get(CACHE_METRICS),
  );
  return {
    name: 'cache',
    handler: h,
    startup: () => h.start(ctx.invalidation),
    shutdown: () => h.stop(),
  };
};
