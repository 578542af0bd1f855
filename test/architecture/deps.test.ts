// The layers of ARCHITECTURE.md hold: `.dependency-cruiser.cjs` (npm run lint:deps) fails on
// each kind of wrong import and passes the real tree.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const config = join(root, '.dependency-cruiser.cjs');
const depcruise = join(root, 'node_modules/dependency-cruiser/bin/dependency-cruise.mjs');

const temps: string[] = [];
after(() => {
  for (const t of temps) rmSync(t, { recursive: true, force: true });
});

function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'clusterdns-arch-'));
  temps.push(d);
  return d;
}

interface Violation {
  rule: string;
  from: string;
  to: string;
}

/** Runs `npm run lint:deps`'s command in `cwd`: its exit status and the violations it reports. */
function cruise(cwd: string): { status: number | null; violations: Violation[]; output: string } {
  const r = spawnSync(process.execPath, [depcruise, 'src', '--config', config], { cwd, encoding: 'utf8' });
  const violations: Violation[] = [];
  for (const m of r.stdout.matchAll(/^\s*error ([\w-]+): (\S+) \u2192 (\S+)$/gm))
    violations.push({ rule: m[1]!, from: m[2]!, to: m[3]! });
  return { status: r.status, violations, output: r.stdout + r.stderr };
}

function write(dir: string, files: Record<string, string>): void {
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
}

const key = (v: Violation) => `${v.rule}: ${v.from} -> ${v.to}`;

describe('dependency rules (.dependency-cruiser.cjs)', () => {
  test('each forbidden import fails the check; the allowed ones beside them do not', () => {
    const dir = tempDir();
    write(dir, {
      // The bottom layer reaching up.
      'src/dns/name.ts': `import { x } from '../server/request.js';\nexport const n = x;\n`,
      'src/dns/ok.ts': `import { n } from './name.js';\nimport { isIP } from 'node:net';\nexport const o = [n, isIP];\n`,
      // The Kubernetes client using DNS code; text/ is allowed.
      'src/kube/http.ts': `import { n } from '../dns/name.js';\nimport { r } from '../text/redact.js';\nexport const h = [n, r];\n`,
      'src/text/redact.ts': `export const r = 1;\n`,
      // Core: the request API, the runtime (may load order.ts), something that loads plugins itself.
      'src/server/request.ts': `export const x = 1;\n`,
      'src/server/runtime.ts': `import { order } from '../plugins/order.js';\nimport type { P } from '../plugins/plugin.js';\nexport const rt: P = order;\n`,
      'src/server/listeners.ts': `import { own } from '../plugins/alpha/own.js';\nimport { order } from '../plugins/order.js';\nexport const l = [own, order];\n`,
      'src/metrics/registry.ts': `import { nc } from '../nodecache/agent.js';\nexport const m = nc;\n`,
      // The plugin framework and two plugins.
      'src/plugins/plugin.ts': `import type { Own } from './gamma/types.js';\nexport type P = Own;\n`,
      'src/plugins/order.ts': [
        `import { own } from './alpha/own.js';`,
        `export const order = [() => import('./alpha/setup.js'), () => import('./beta/setup.js'), own];`,
        ``,
      ].join('\n'),
      'src/plugins/alpha/own.ts': `export const own = 1;\n`,
      'src/plugins/alpha/setup.ts': [
        `import { own } from './own.js';`,
        `import { x } from '../../server/request.js';`,
        `import type { P } from '../plugin.js';`,
        `import { b } from '../beta/setup.js';`,
        `import { d } from '../../diagnose/command.js';`,
        `export const a: P = [own, x, b, d];`,
        ``,
      ].join('\n'),
      // A type-only import couples plugins too.
      'src/plugins/beta/setup.ts': `import type { P } from '../plugin.js';\nimport type { Own } from '../gamma/types.js';\nexport const b: P & Own = 1;\n`,
      'src/plugins/gamma/types.ts': `export type Own = unknown;\n`,
      // Roles: the framework is fine, a plugin's internals are not.
      'src/diagnose/command.ts': `import { n } from '../dns/name.js';\nimport { order } from '../plugins/order.js';\nimport { own } from '../plugins/alpha/own.js';\nexport const d = [n, order, own];\n`,
      'src/nodecache/agent.ts': `export const nc = 1;\n`,
      'src/serve.ts': `import { order } from './plugins/order.js';\nimport { x } from './server/request.js';\nexport const s = [order, x];\n`,
    });
    const r = cruise(dir);
    assert.notEqual(r.status, 0, 'the check fails');
    assert.deepEqual(r.violations.map(key).sort(), [
      'core-imports-a-plugin: src/server/listeners.ts -> src/plugins/alpha/own.ts',
      'core-imports-a-role: src/metrics/registry.ts -> src/nodecache/agent.ts',
      'core-loads-plugins-outside-the-runtime: src/server/listeners.ts -> src/plugins/order.ts',
      'dns-imports-above-it: src/dns/name.ts -> src/server/request.ts',
      'framework-imports-a-plugin: src/plugins/plugin.ts -> src/plugins/gamma/types.ts',
      'kube-imports-dns-code: src/kube/http.ts -> src/dns/name.ts',
      'order-imports-a-plugin-eagerly: src/plugins/order.ts -> src/plugins/alpha/own.ts',
      'plugin-imports-a-role: src/plugins/alpha/setup.ts -> src/diagnose/command.ts',
      'plugin-imports-another-plugin: src/plugins/alpha/setup.ts -> src/plugins/beta/setup.ts',
      'plugin-imports-another-plugin: src/plugins/beta/setup.ts -> src/plugins/gamma/types.ts',
      'role-imports-plugin-internals: src/diagnose/command.ts -> src/plugins/alpha/own.ts',
    ]);
  });

  test('the real tree passes', () => {
    const r = cruise(root);
    assert.deepEqual(r.violations.map(key), []);
    assert.equal(r.status, 0, r.output);
  });
});
