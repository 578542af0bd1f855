// src/kube is a generic Kubernetes client: it knows nothing of the server around it (its heap
// policy included) and never forces a garbage collection on the thread that serves DNS.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

const dir = resolve('src/kube');
const files = readdirSync(dir).filter((f) => f.endsWith('.ts'));

/** Modules of ours that import nothing of ours, so any layer may use them. */
const LEAVES = ['../text/redact.js', '../version.js'];

test('src/kube imports only itself, node: built-ins, its npm dependencies and the leaf helpers (redact, version)', () => {
  assert.ok(files.length >= 4, `found ${files.join(', ')}`);
  for (const f of files) {
    const text = readFileSync(join(dir, f), 'utf8');
    for (const m of text.matchAll(/(?:from|import)\s*\(?\s*'([^']+)'/g)) {
      const spec = m[1]!;
      assert.ok(
        spec.startsWith('./') || spec.startsWith('node:') || spec === 'yaml' || LEAVES.includes(spec),
        `${f} imports ${spec}`,
      );
    }
  }
});

test('the leaf helpers src/kube uses import nothing of ours', () => {
  for (const leaf of LEAVES) {
    const text = readFileSync(resolve(dir, leaf.replace(/\.js$/, '.ts')), 'utf8');
    for (const m of text.matchAll(/^(?:import|export)[^;]*?from\s*'([^']+)'/gm))
      assert.match(m[1]!, /^node:/, `${leaf} imports ${m[1]}`);
  }
});

test('src/kube forces no garbage collection', () => {
  for (const f of files) {
    const text = readFileSync(join(dir, f), 'utf8');
    assert.doesNotMatch(text, /expose-gc|\bgc\(\)|collectAfterBurst|setFlagsFromString|heap\.js/, f);
  }
});
