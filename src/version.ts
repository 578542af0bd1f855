// clusterdns's version, from package.json. Imports nothing of ours, so every layer (kube/ too) may use it.

import { readFileSync } from 'node:fs';

/** Walks up from this file (src/ or dist/src/) to clusterdns's own package.json. */
function readVersion(): string {
  for (const rel of ['../../package.json', '../package.json']) {
    try {
      const pkg: unknown = JSON.parse(readFileSync(new URL(rel, import.meta.url), 'utf8'));
      if (typeof pkg === 'object' && pkg !== null && 'name' in pkg && pkg.name === 'clusterdns' && 'version' in pkg)
        return String(pkg.version);
    } catch {
      continue;
    }
  }
  return '0.0.0';
}

export const VERSION = readVersion();
