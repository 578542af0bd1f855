// order.ts's promise holds: a plugin is removed by deleting its folder and its line there.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const tsc = join(root, 'node_modules/typescript/bin/tsc');
const dir = mkdtempSync(join(tmpdir(), 'clusterdns-removal-'));
after(() => rmSync(dir, { recursive: true, force: true }));

describe("order.ts's promise", () => {
  // The dependency rules keep every other plugin, role and core file off a plugin's folder, so
  // deleting several at once proves each can go alone; one compile keeps the test quick.
  test('cache, forward and kubernetes are removed by deleting their folders and their lines in order.ts', () => {
    cpSync(join(root, 'src'), join(dir, 'src'), { recursive: true });
    symlinkSync(join(root, 'node_modules'), join(dir, 'node_modules'), 'dir');
    const orderFile = join(dir, 'src/plugins/order.ts');
    let order = readFileSync(orderFile, 'utf8');
    for (const name of ['cache', 'forward', 'kubernetes']) {
      const folder = join(dir, 'src/plugins', name);
      rmSync(folder, { recursive: true });
      const line = `  ['${name}', () => import('./${name}/setup.js')],\n`;
      assert.ok(order.includes(line), `order.ts has the line for ${name}`);
      order = order.replace(line, '');
    }
    writeFileSync(orderFile, order);
    const base = JSON.parse(readFileSync(join(root, 'tsconfig.json'), 'utf8')) as {
      compilerOptions: Record<string, unknown>;
    };
    const compilerOptions: Record<string, unknown> = { ...base.compilerOptions, noEmit: true, incremental: false };
    delete compilerOptions.tsBuildInfoFile;
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ type: 'module' }));
    writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions, include: ['src/**/*.ts'] }));
    const r = spawnSync(process.execPath, [tsc, '-p', join(dir, 'tsconfig.json')], { cwd: dir, encoding: 'utf8' });
    assert.equal(r.status, 0, `tsc --noEmit failed:\n${r.stdout}${r.stderr}`);
  });
});
