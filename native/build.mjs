#!/usr/bin/env node
// npm's install script: builds native/udpbatch.node with node-gyp (npm's own copy, offline
// with the Node headers npm is pointed at, e.g. nodedir=/usr). A failed or impossible build
// is a warning, never a failed `npm ci`: clusterdns then serves UDP through node:dgram.
//
//   CLUSTERDNS_SKIP_NATIVE=1 npm ci    # do not even try
//   node native/build.mjs              # rebuild by hand

import { spawnSync } from 'node:child_process';
import { existsSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, 'build/Release/udpbatch.node');
const warn = (msg) => process.stderr.write(`clusterdns: ${msg}; UDP will use node:dgram (see native/README.md)\n`);

if (process.env.CLUSTERDNS_SKIP_NATIVE === '1') {
  warn('CLUSTERDNS_SKIP_NATIVE=1, native UDP addon not built');
  process.exit(0);
}
if (process.platform !== 'linux') {
  process.stderr.write(`clusterdns: the native UDP addon is Linux only; not built on ${process.platform}\n`);
  process.exit(0);
}

// npm sets npm_config_node_gyp to its bundled node-gyp; outside npm, look next to npm itself.
const candidates = [
  process.env.npm_config_node_gyp,
  join(dirname(process.execPath), '../lib/node_modules/npm/node_modules/node-gyp/bin/node-gyp.js'),
].filter(Boolean);
const gyp = candidates.find((p) => existsSync(p));
const gypArgs = ['rebuild'];
// Without npm (which passes its nodedir setting), use the headers installed beside node, if
// any, rather than letting node-gyp download them.
const prefix = join(dirname(process.execPath), '..');
if (!process.env.npm_config_nodedir && existsSync(join(prefix, 'include/node/node_api.h')))
  gypArgs.push(`--nodedir=${prefix}`);
const opts = { cwd: here, stdio: ['ignore', 'pipe', 'pipe'], encoding: 'utf8' };
const r = gyp ? spawnSync(process.execPath, [gyp, ...gypArgs], opts) : spawnSync('node-gyp', gypArgs, opts);
if (r.error || r.status !== 0 || !existsSync(out)) {
  const lines = `${r.stdout ?? ''}${r.stderr ?? ''}`.split('\n');
  // The compiler's or make's own complaint says more than node-gyp's closing lines.
  const cause = lines.filter((l) => /error:|not found|no such file|Error \d/i.test(l) && !l.startsWith('gyp ERR!'));
  const tail = (cause.length ? cause : lines.filter((l) => l.startsWith('gyp ERR!'))).slice(-6);
  rmSync(join(here, 'build'), { recursive: true, force: true });
  warn(`native UDP addon not built (${r.error ? r.error.message : `node-gyp exited ${r.status}`})`);
  if (tail.length) process.stderr.write(tail.map((l) => `  ${l}`).join('\n') + '\n');
  process.exit(0);
}
process.stderr.write(`clusterdns: built ${out}\n`);
