#!/usr/bin/env node
// Runs every compiled test file under dist/test with node's test runner.
// Node 20's --test does not expand globs, so the files are listed here.
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';

function findTests(dir) {
  const out = [];
  let entries;
  try {
    entries = readdirSync(dir);
  } catch {
    return out;
  }
  for (const e of entries) {
    const p = join(dir, e);
    if (statSync(p).isDirectory()) out.push(...findTests(p));
    else if (e.endsWith('.test.js')) out.push(p);
  }
  return out.sort();
}

const filter = process.argv.slice(2);
let files = findTests('dist/test');
if (filter.length) files = files.filter((f) => filter.some((x) => f.includes(x)));
if (files.length === 0) {
  console.error('no test files found under dist/test (did the build run?)');
  process.exit(1);
}
// A file's whole run is bounded too: the fuzz file needs ~75 s of a core alone, and on CI's two
// shared cores it took over 120 s; tests that can hang carry their own tighter timeouts.
// TAP as before, and after it a list of the failures alone (scripts/failures-reporter.mjs).
const failures = new URL('./failures-reporter.mjs', import.meta.url).pathname;
const reporters = ['--test-reporter=tap', '--test-reporter-destination=stdout'];
reporters.push(`--test-reporter=${failures}`, '--test-reporter-destination=stdout');
const args = ['--test', '--test-concurrency=2', '--test-timeout=300000', ...reporters, ...files];
const r = spawnSync(process.execPath, args, { stdio: 'inherit' });
process.exit(r.status ?? 1);
