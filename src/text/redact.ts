// Messages about files without the files' text (`import /proc/self/environ` must not print the
// environment): used by the Corefile parser and by the Kubernetes client alike, so it imports nothing.

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
  let out = what
    .replace(/'([^']*)'/g, (_m, inner: string) => quoted("'", inner))
    .replace(/"([^"]*)"/g, (_m, inner: string) => quoted('"', inner));
  for (const t of texts) if (t.length >= MIN_REDACTED) out = out.split(t).join('…');
  return out;
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
