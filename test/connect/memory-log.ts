// A Logger that keeps its lines, for asserting what connect told the user.
import type { Logger } from '../../src/log.js';

export function memoryLog(): Logger & { lines: string[] } {
  const lines: string[] = [];
  const add = (level: string) => (m: string) => void lines.push(`[${level}] ${m}`);
  return {
    lines,
    debug: add('DEBUG'),
    info: add('INFO'),
    warn: add('WARNING'),
    error: add('ERROR'),
    fatal: add('FATAL'),
    line: (t) => void lines.push(t),
  };
}
