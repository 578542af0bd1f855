// A module that every process of a server loads before its own code (NODE_OPTIONS --import, so
// the launcher's processes and their workers too), writing one JSON line per thing it sees to a
// file the test reads back: how a test watches what happens inside the real binary (its V8
// flags, its garbage collections) without changing it.
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

export interface NodeHook<T> {
  /** Environment for the server: NODE_OPTIONS loading the hook, and `outVar` naming its output file. */
  env: Record<string, string>;
  /** Every line the hook wrote so far, parsed. */
  lines(): T[];
}

/** Writes `source` as a module; it finds its output file in process.env[outVar]. */
export function nodeHook<T>(source: string, outVar: string): NodeHook<T> {
  const dir = mkdtempSync(join(tmpdir(), 'clusterdns-hook-'));
  const hook = join(dir, 'hook.mjs');
  writeFileSync(hook, source);
  const out = join(dir, 'hook.jsonl');
  writeFileSync(out, '');
  return {
    env: { NODE_OPTIONS: `--import ${pathToFileURL(hook).href}`, [outVar]: out },
    lines: () =>
      readFileSync(out, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((l) => JSON.parse(l) as T),
  };
}
