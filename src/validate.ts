// `clusterdns -validate -conf FILE`: everything a start does before binding, with every problem
// reported (not just the first), so a ConfigMap can be checked before it is applied.

import { CorefileError } from './corefile/errors.js';
import { HttpServices } from './server/http.js';
import { ServerServices } from './server/services.js';
import { parseConfig, readConfigSource, Runtime, type LoadedConfig } from './server/runtime.js';

/** Prints `FILE:LINE - ...` for each problem on stderr; returns the exit code (0: it would load). */
export async function validateCorefile(conf: string | undefined, defaultPort: number): Promise<number> {
  let cfg: LoadedConfig;
  try {
    cfg = parseConfig(readConfigSource(conf), defaultPort);
  } catch (e) {
    // readConfigSource's and the parser's messages already name the file.
    process.stderr.write(`${(e as Error).message}\n`);
    return 1;
  }
  const problems: Error[] = [];
  const rt = await Runtime.create(
    cfg,
    { http: new HttpServices(), services: new ServerServices(), requestReload: () => {}, shuttingDown: () => false },
    (e) => problems.push(e),
  );
  // In file order, whichever check found them (unknown directives are seen before setups run).
  problems.sort((a, b) =>
    a instanceof CorefileError && b instanceof CorefileError ? a.file.localeCompare(b.file) || a.line - b.line : 0,
  );
  for (const p of problems)
    process.stderr.write(`${p instanceof CorefileError ? p.message : `${cfg.source.file}: ${p.message}`}\n`);
  if (problems.length > 0) {
    process.stderr.write(
      `${cfg.source.file}: ${problems.length} problem${problems.length === 1 ? '' : 's'}; it would not load\n`,
    );
    return 1;
  }
  const blocks = cfg.blocks.length;
  process.stdout.write(
    `${cfg.source.file}: valid (${blocks} server block${blocks === 1 ? '' : 's'}, ${rt.instances.length} plugin instances)\n`,
  );
  return 0;
}
