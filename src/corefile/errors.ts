import type { Directive, Token } from './types.js';

/**
 * A Corefile syntax or setup error. The message follows CoreDNS:
 * `FILE:LINE - Error during parsing: WHAT`.
 */
export class CorefileError extends Error {
  readonly file: string;
  readonly line: number;
  readonly what: string;

  constructor(file: string, line: number, what: string) {
    super(`${file}:${line} - Error during parsing: ${what}`);
    this.name = 'CorefileError';
    this.file = file;
    this.line = line;
    this.what = what;
  }
}

/** An error located at a directive or token (used by plugin setup code for bad options). */
export function directiveError(d: Directive | Token, what: string): CorefileError {
  if (!d.imported) return new CorefileError(d.file, d.line, what);
  return new CorefileError(d.file, d.line, redactContent(what, 'text' in d ? [d.text] : d.args.map((a) => a.text)));
}

/** Quoted words of the Corefile syntax itself, which messages may name. */
const SYNTAX = new Set(['{', '}', 'import']);

/** Shortest token text taken out of a message by value; shorter ones would garble its words. */
const MIN_REDACTED = 3;

/**
 * A message about an imported file without that file's content: `import /proc/self/environ`
 * must not print the environment. Quoted parts and the named tokens' texts become `…`.
 */
export function redactContent(what: string, texts: readonly string[]): string {
  const quoted = (q: string, inner: string) => (SYNTAX.has(inner) ? q + inner + q : q + '…' + q);
  let out = what.replace(/'([^']*)'/g, (_m, inner: string) => quoted("'", inner)).replace(/"([^"]*)"/g, (_m, inner: string) => quoted('"', inner));
  for (const t of texts) if (t.length >= MIN_REDACTED) out = out.split(t).join('…');
  return out;
}

/** Type guard. */
export function isCorefileError(e: unknown): e is CorefileError {
  return e instanceof CorefileError;
}

/**
 * A parser's message about a file (YAML, JSON) without the file's text: its first line,
 * quoted parts redacted (Node's JSON.parse and the YAML library both quote the input).
 */
export function contentFreeMessage(e: unknown): string {
  const m = e instanceof Error ? e.message : String(e);
  const nl = m.indexOf('\n');
  return redactContent((nl < 0 ? m : m.slice(0, nl)).trimEnd(), []);
}
