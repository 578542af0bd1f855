// Readable errors for the subcommands that parse their flags with node:util parseArgs, whose
// own messages ("Unknown option '--typ'. To specify a positional argument starting with a
// '-', place it at the end of the command after '--', as in '-- \"--typ\"") confuse users.

import { VERSION } from './version.js';

/** Go-style single-dash long flags (-conf, -dns.port, -resolv-conf) become --conf for parseArgs; -h stays short. */
export function normalizeArgv(argv: string[]): string[] {
  return argv.map((s) => (/^-[a-zA-Z][\w.-]+(=.*)?$/.test(s) ? '-' + s : s));
}

function editDistance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++)
      cur[j] = Math.min(prev[j]! + 1, cur[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    prev = cur;
  }
  return prev[b.length]!;
}

/** The known flag `given` most likely meant: the only one it starts, else the closest within 2 edits. */
export function closestFlag(given: string, known: readonly string[]): string | null {
  const g = given.replace(/^-+/, '').replace(/=.*$/, '');
  if (g === '') return null;
  const prefixed = known.filter((k) => k.startsWith(g));
  if (prefixed.length === 1) return prefixed[0]!;
  let best: string | null = null;
  let bestD = 3;
  for (const k of known) {
    const d = editDistance(g, k);
    if (d < bestD) [best, bestD] = [k, d];
  }
  return best;
}

/** parseArgs's error as one plain sentence: `unknown flag --typ (did you mean --type?)`. */
export function unknownFlagMessage(err: Error, known: readonly string[]): string {
  const code = (err as NodeJS.ErrnoException).code;
  if (code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') {
    const flag = /Unknown option '([^']+)'/.exec(err.message)?.[1] ?? '';
    const guess = closestFlag(flag, known);
    return `unknown flag ${flag}${guess ? ` (did you mean --${guess}?)` : ''}`;
  }
  if (code === 'ERR_PARSE_ARGS_UNEXPECTED_POSITIONAL') {
    const arg = /Unexpected argument '([^']+)'/.exec(err.message)?.[1];
    return arg !== undefined
      ? `unexpected argument "${arg}" (flags take their value as --flag VALUE or --flag=VALUE)`
      : err.message;
  }
  if (code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE') {
    const flag = /Option '(-[^ ']+)/.exec(err.message)?.[1];
    if (flag && /argument missing/.test(err.message)) return `${flag} needs a value`;
    if (flag && /does not take an argument/.test(err.message)) return `${flag} takes no value`;
  }
  return err.message;
}

/**
 * The start every role command shares: its flags parsed (a usage error exits 2 with the usage
 * after it), `-h` prints the usage and `-version` the version. null when that was all to do.
 */
export function roleFlags<F extends { help: boolean; version: boolean }>(
  role: string,
  usage: string,
  parse: () => F,
  UsageError: abstract new (...args: never[]) => Error,
  die: (code: number, message: string) => never,
): F | null {
  let flags: F;
  try {
    flags = parse();
  } catch (e) {
    if (e instanceof UsageError) die(2, `${e.message}\n\n${usage}`);
    throw e;
  }
  if (flags.help) {
    process.stdout.write(usage);
    return null;
  }
  if (flags.version) {
    process.stdout.write(`clusterdns-${VERSION} ${role}\n`);
    return null;
  }
  return flags;
}
