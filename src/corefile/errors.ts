import type { Directive, Token } from './types.js';
import { redactContent } from '../text/redact.js';

export { contentFreeMessage, redactContent } from '../text/redact.js';

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
