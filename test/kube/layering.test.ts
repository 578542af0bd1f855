// src/kube is a generic Kubernetes client: it knows nothing of the server around it (its heap
// policy included) and never forces a garbage collection on the thread that serves DNS.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

const dir = resolve('src/kube');
const files = readdirSync(dir).filter((f) => f.endsWith('.ts'));

test('src/kube imports only itself, node: built-ins, its npm dependencies and the leaf text helpers', () => {
  assert.ok(files.length >= 4, `found ${files.join(', ')}`);
  for (const f of files) {
    const text = readFileSync(join(dir, f), 'utf8');
    for (const m of text.matchAll(/(?:from|import)\s*\(?\s*'([^']+)'/g)) {
      const spec = m[1]!;
      assert.ok(
        spec.startsWith('./') || spec.startsWith('node:') || spec === 'yaml' || spec === '../text/redact.js',
        `${f} imports ${spec}`,
      );
    }
  }
});

test('src/kube forces no garbage collection', () => {
  for (const f of files) {
    const text = readFileSync(join(dir, f), 'utf8');
    assert.doesNotMatch(text, /expose-gc|\bgc\(\)|collectAfterBurst|setFlagsFromString|heap\.js/, f);
  }
});
