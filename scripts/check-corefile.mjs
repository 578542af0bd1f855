#!/usr/bin/env node
// node scripts/check-corefile.mjs FILE: loads a Corefile the way clusterdns does (syntax,
// imports, every plugin's options) without binding a port or contacting anything, so it can
// be checked anywhere before it is deployed. Exit 0 "FILE: OK", 1 with CoreDNS's FILE:LINE error.
// Needs a build (npm run build).
import { HttpServices } from '../dist/src/server/http.js';
import { parseConfig, readConfigSource, Runtime } from '../dist/src/server/runtime.js';

const file = process.argv[2];
if (!file || file === '-h' || file === '--help') {
  process.stderr.write('usage: node scripts/check-corefile.mjs COREFILE\n');
  process.exit(file ? 0 : 2);
}
try {
  const config = parseConfig(readConfigSource(file), 53);
  // Plugins are set up (options checked) but never started: no socket, no API connection.
  await Runtime.create(config, { http: new HttpServices(), requestReload() {}, shuttingDown: () => true });
  process.stdout.write(`${file}: OK (${config.blocks.length} server block${config.blocks.length === 1 ? '' : 's'})\n`);
  process.exit(0);
} catch (e) {
  const err = /** @type {NodeJS.ErrnoException} */ (e);
  process.stderr.write(`${err.code === 'ENOENT' ? `${file}: no such file` : err.message}\n`);
  process.exit(1);
}
