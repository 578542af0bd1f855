// Helpers for plugins' setup code: durations, numbers, once-only directives, all reporting
// errors as `FILE:LINE - Error during parsing: ...`.

import { directiveError } from './errors.js';
import type { Directive, Token } from './types.js';
import { canonicalZone } from '../dns/name.js';
import { cidrToReverseZones } from '../dns/reverse.js';

/** Go's time.ParseDuration subset: "5s", "1m30s", "500ms", "1h", "0". Returns milliseconds. */
export function parseDurationMs(text: string): number | null {
  if (text === '0') return 0;
  const re = /(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/gy;
  let total = 0;
  let matched = 0;
  let m: RegExpExecArray | null;
  while ((m = re.exec(text)) !== null) {
    const v = Number(m[1]);
    const unit = m[2];
    const mult =
      unit === 'h'
        ? 3_600_000
        : unit === 'm'
          ? 60_000
          : unit === 's'
            ? 1000
            : unit === 'ms'
              ? 1
              : unit === 'ns'
                ? 1e-6
                : 1e-3;
    total += v * mult;
    matched = re.lastIndex;
  }
  if (matched !== text.length || matched === 0) return null;
  return total;
}

export function durationArg(tok: Token | undefined, d: Directive, what: string): number {
  if (!tok) throw directiveError(d, `${what}: missing duration`);
  const ms = parseDurationMs(tok.text);
  if (ms === null) throw directiveError(tok, `${what}: invalid duration "${tok.text}"`);
  return ms;
}

export function intArg(tok: Token | undefined, d: Directive, what: string, min: number, max: number): number {
  if (!tok) throw directiveError(d, `${what}: missing number`);
  if (!/^-?\d+$/.test(tok.text)) throw directiveError(tok, `${what}: "${tok.text}" is not a number`);
  const n = Number(tok.text);
  if (n < min || n > max) throw directiveError(tok, `${what}: ${n} is out of range [${min}, ${max}]`);
  return n;
}

/** Most plugins may appear once per server block, as in CoreDNS (plugin.ErrOnce). */
export function once(ds: Directive[], name: string): Directive {
  if (ds.length > 1) throw directiveError(ds[1]!, `plugin '${name}' can only be used once per Server Block`);
  return ds[0]!;
}

export function noArgs(d: Directive): void {
  if (d.args.length) throw directiveError(d.args[0]!, `${d.name}: unexpected argument "${d.args[0]!.text}"`);
}

export function noBlock(d: Directive): void {
  if (d.block && d.block.length) throw directiveError(d.block[0]!, `${d.name}: unknown property '${d.block[0]!.name}'`);
}

export function unknownProperty(p: Directive, plugin: string): never {
  throw directiveError(p, `${plugin}: unknown property '${p.name}'`);
}

/** A plugin's ZONES arguments: names made fully qualified and lowercase, CIDRs expanded into reverse zones; `fallback` when there are none. */
export function zoneArgs(toks: readonly Token[], fallback: readonly string[]): string[] {
  if (toks.length === 0) return [...fallback];
  const out: string[] = [];
  for (const t of toks) {
    let zones: string[];
    if (t.text.includes('/')) {
      try {
        zones = cidrToReverseZones(t.text);
      } catch {
        throw directiveError(t, `"${t.text}" is not a valid CIDR`);
      }
    } else zones = [canonicalZone(t.text)];
    for (const z of zones) if (!out.includes(z)) out.push(z);
  }
  return out;
}
