// Parsed Corefile structures.

/** One lexical token of a Corefile (after `{$VAR}` / `{%VAR%}` substitution). */
export interface Token {
  text: string;
  /** File the token was read from (the Corefile name as given, or the absolute path of an imported file). */
  file: string;
  /** 1-based line of the token's first character. */
  line: number;
  /** True when the token was written as a "quoted" or `backtick` string. */
  quoted: boolean;
  /** Read from an imported file, which may be any file at all: errors never quote its text. */
  imported?: boolean;
}

/**
 * A directive line: `name args...`, optionally followed by a `{ ... }` block
 * whose lines are themselves directives (recursively). `block` is null when
 * there is no block (an empty `{ }` gives `[]`).
 */
export interface Directive {
  name: string;
  args: Token[];
  block: Directive[] | null;
  file: string;
  line: number;
  /** Read from an imported file: errors never quote its text (see Token). */
  imported?: boolean;
}

/**
 * One server-block key `[SCHEME://]ZONE[:PORT]`. A CIDR key expands into one
 * ServerKey per reverse zone, all sharing the same `raw`.
 */
export interface ServerKey {
  /** 'dns' (default), 'tls', 'grpc', 'https', 'https3' or 'quic'. */
  scheme: string;
  /** Lowercased and fully qualified ('.' for the root). */
  zone: string;
  port: number;
  /** The key as written (after environment substitution, without a separating comma). */
  raw: string;
}

export interface ServerBlock {
  keys: ServerKey[];
  /** Directives in file order (the caller re-orders them by plugin order). */
  directives: Directive[];
  /** Location of the first key. */
  file: string;
  line: number;
}
