// Corefile lexer (behaviour of the coredns/caddy lexer):
// - tokens are separated by whitespace;
// - a token that starts with `"` runs to the next unescaped `"` and may contain
//   whitespace and newlines; inside it `\"` gives `"` and `\\` gives `\` (any
//   other backslash is kept literally);
// - a token that starts with a backtick runs to the next backtick, no escapes;
// - an unquoted `#` starts a comment to the end of the line, even in the middle
//   of a token (`foo#bar` is `foo`);
// - a quote character in the middle of a token is literal.

import { CorefileError } from './errors.js';
import type { Token } from './types.js';

/** A token plus the layout information the parser needs. */
export interface LexToken extends Token {
  /** Line of the token's last character (differs from `line` for multi-line quoted strings). */
  endLine: number;
  /** True when this is the first token on its line in its file. */
  lineStart: boolean;
}

function isSpace(ch: string): boolean {
  return (
    ch === ' ' ||
    ch === '\t' ||
    ch === '\n' ||
    ch === '\r' ||
    ch === '\f' ||
    ch === '\v' ||
    ch === '\u00a0' ||
    ch === '\u0085' ||
    ch === '\u2028' ||
    ch === '\u2029' ||
    ch === '\ufeff'
  );
}

/** Splits `text` into tokens. Throws CorefileError on an unterminated quoted string. */
export function lex(text: string, file: string): LexToken[] {
  const tokens: LexToken[] = [];
  const n = text.length;
  let i = 0;
  let line = 1;
  let prevEndLine = 0;

  const push = (t: string, startLine: number, quoted: boolean): void => {
    tokens.push({ text: t, file, line: startLine, quoted, endLine: line, lineStart: startLine > prevEndLine });
    prevEndLine = line;
  };

  while (i < n) {
    const ch = text[i]!;
    if (ch === '\n') {
      line++;
      i++;
      continue;
    }
    if (isSpace(ch)) {
      i++;
      continue;
    }
    if (ch === '#') {
      while (i < n && text[i] !== '\n') i++;
      continue;
    }
    const startLine = line;
    if (ch === '"') {
      i++;
      let val = '';
      let closed = false;
      while (i < n) {
        const c = text[i];
        if (c === '\\' && i + 1 < n && (text[i + 1] === '"' || text[i + 1] === '\\')) {
          val += text[i + 1];
          i += 2;
          continue;
        }
        if (c === '"') {
          closed = true;
          i++;
          break;
        }
        if (c === '\n') line++;
        if (c !== '\r' || text[i + 1] !== '\n') val += c; // normalise CRLF inside quotes
        i++;
      }
      if (!closed) throw new CorefileError(file, startLine, 'Unterminated quoted string');
      push(val, startLine, true);
      continue;
    }
    if (ch === '`') {
      i++;
      let val = '';
      let closed = false;
      while (i < n) {
        const c = text[i];
        if (c === '`') {
          closed = true;
          i++;
          break;
        }
        if (c === '\n') line++;
        if (c !== '\r' || text[i + 1] !== '\n') val += c;
        i++;
      }
      if (!closed) throw new CorefileError(file, startLine, 'Unterminated backtick string');
      push(val, startLine, true);
      continue;
    }
    // Bare word: up to whitespace or a comment.
    let j = i;
    while (j < n && !isSpace(text[j]!) && text[j] !== '#') j++;
    const word = text.slice(i, j);
    i = j;
    push(word, startLine, false);
  }
  return tokens;
}

/**
 * Replaces `{$VAR}` and `{%VAR%}` references in one token. Unset variables
 * become the empty string. Substituted values are not scanned again.
 */
export function replaceEnv(s: string, env: Record<string, string | undefined>): string {
  if (!s.includes('{$') && !s.includes('{%')) return s;
  return s.replace(
    /\{%([\s\S]+?)%\}|\{\$([^}]+)\}/g,
    (_m: string, win: string | undefined, unix: string | undefined) => {
      const name = win ?? unix ?? '';
      return env[name] ?? '';
    },
  );
}
