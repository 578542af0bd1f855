// Name matching shared by rewrite's rules: CoreDNS's exact, prefix, suffix, substring and regex
// match types, and Go regular expressions taken into JavaScript's syntax.

import { goRegExp } from '../../corefile/regexp.js';
import { nameToLabels } from '../../dns/name.js';

export type MatchType = 'exact' | 'prefix' | 'suffix' | 'substring' | 'regex';

export const MATCH_TYPES: ReadonlySet<string> = new Set(['exact', 'prefix', 'suffix', 'substring', 'regex']);

/** How many `{N}` a replacement uses (CoreDNS refuses more than the pattern has groups). */
export function groupsUsed(replacement: string): number {
  let n = 0;
  for (let i = 0; i <= 100; i++) if (replacement.includes(`{${i}}`)) n++;
  return n;
}

/** A replacement split once into text and `{N}` group references. */
export class Replacement {
  private readonly parts: Array<string | number> = [];

  constructor(readonly text: string) {
    const re = /\{(\d+)\}/g;
    let last = 0;
    let m: RegExpExecArray | null;
    while ((m = re.exec(text)) !== null) {
      if (m.index > last) this.parts.push(text.slice(last, m.index));
      this.parts.push(Number(m[1]));
      last = m.index + m[0].length;
    }
    if (last < text.length) this.parts.push(text.slice(last));
  }

  /** The text with `{N}` replaced by group N of `m` (left as written past the last group). */
  fill(m: RegExpExecArray): string {
    let s = '';
    for (const p of this.parts) s += typeof p === 'string' ? p : p < m.length ? (m[p] ?? '') : `{${p}}`;
    return s;
  }
}

const compiled = new Map<string, Replacement>();

/** `{0}`, `{1}`... of `replacement` filled from a match (the split kept per replacement text). */
export function fillGroups(replacement: string, m: RegExpExecArray): string {
  let r = compiled.get(replacement);
  if (r === undefined) {
    r = new Replacement(replacement);
    if (compiled.size < 1000) compiled.set(replacement, r);
  }
  return r.fill(m);
}

/** Lowercased and fully qualified, as CoreDNS's plugin.Name(...).Normalize(). */
export function normalizeName(s: string): string {
  const l = s.toLowerCase();
  return l.endsWith('.') ? l : `${l}.`;
}

/** True when `name` (presentation form) is a name the wire can carry (CoreDNS's dns.IsDomainName). */
export function isValidName(name: string): boolean {
  if (!name.endsWith('.')) return false;
  try {
    nameToLabels(name);
    return true;
  } catch {
    return false;
  }
}

/** A name test of one match type; `rewrite` returns the new name, or null when it does not match. */
export class NameMatch {
  readonly regex: RegExp | null;

  constructor(
    readonly type: MatchType,
    readonly from: string,
  ) {
    this.regex = type === 'regex' ? goRegExp(from) : null;
  }

  /** Does `name` (lowercase FQDN) match? For regex, the match with its groups. */
  test(name: string): RegExpExecArray | boolean {
    switch (this.type) {
      case 'exact':
        return name === this.from;
      case 'prefix':
        return name.startsWith(this.from);
      case 'suffix':
        return name.endsWith(this.from);
      case 'substring':
        return name.includes(this.from);
      case 'regex': {
        const m = this.regex!.exec(name);
        return m ?? false;
      }
    }
  }

  /** The name after the rewrite to `to`, or null when `name` does not match. */
  rewrite(name: string, to: string): string | null {
    switch (this.type) {
      case 'exact':
        return name === this.from ? to : null;
      case 'prefix':
        return name.startsWith(this.from) ? to + name.slice(this.from.length) : null;
      case 'suffix':
        return name.endsWith(this.from) ? name.slice(0, name.length - this.from.length) + to : null;
      case 'substring':
        return name.includes(this.from) ? name.split(this.from).join(to) : null;
      case 'regex': {
        const m = this.regex!.exec(name);
        return m ? fillGroups(to, m) : null;
      }
    }
  }
}
