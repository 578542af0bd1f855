// Go (RE2) regular expressions as Corefiles write them, taken into JavaScript's syntax, for the
// plugins that match names with them (rewrite, template).

/**
 * `(?P<name>` becomes `(?<name>` and leading `(?i)`/`(?s)`/`(?m)` become flags. Throws
 * SyntaxError for a pattern JavaScript does not accept.
 */
export function goRegExp(pattern: string): RegExp {
  let flags = '';
  let p = pattern;
  const lead = /^\(\?([ims]+)\)/.exec(p);
  if (lead) {
    for (const f of lead[1]!) if (!flags.includes(f)) flags += f;
    p = p.slice(lead[0].length);
  }
  return new RegExp(p.replace(/\(\?P</g, '(?<'), flags);
}

/** Number of capture groups in `re`. */
export function groupCount(re: RegExp): number {
  return new RegExp(`${re.source}|`).exec('')!.length - 1;
}
