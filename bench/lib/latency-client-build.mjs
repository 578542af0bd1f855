// Builds the C recording client (lib/latency-client.c) and the known-delay responder
// (lib/delay-responder.c) with `cc -O2` into bench/build/ (ignored by git), when a source is
// newer than its binary. Each binary is written under a temporary name and renamed, so that two
// benches or tests building at once never run a half-written file.

import { spawnSync } from 'node:child_process';
import { mkdirSync, renameSync, rmSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const mtime = (p) => {
  try {
    return statSync(p).mtimeMs;
  } catch {
    return -1;
  }
};

/** Compiles `src` (relative to the repository) to bench/build/`name`; → { path } or { error }. */
function build(src, name) {
  const cc = process.env.CC || 'cc';
  const out = join(root, 'bench/build', name);
  const from = join(root, src);
  if (mtime(out) >= mtime(from) && mtime(out) > 0) return { path: out };
  mkdirSync(dirname(out), { recursive: true });
  const tmp = `${out}.${process.pid}.tmp`;
  const r = spawnSync(cc, ['-O2', '-Wall', '-o', tmp, from, '-lm'], { encoding: 'utf8', timeout: 60_000 });
  if (r.error || r.status !== 0) {
    rmSync(tmp, { force: true });
    return {
      error: `${cc} ${src}: ${r.error?.message ?? (r.stderr.trim().split('\n').slice(-3).join(' / ') || `exit ${r.status}`)}`,
    };
  }
  renameSync(tmp, out);
  return { path: out };
}

/** The C latency client: { path } or { error } (no compiler, or it did not compile). */
export const buildCClient = () => build('bench/lib/latency-client.c', 'latency-client');

/** The responder that answers after a fixed delay: { path } or { error }. */
export const buildDelayResponder = () => build('bench/lib/delay-responder.c', 'delay-responder');
