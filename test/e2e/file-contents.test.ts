// Files named by a Corefile can be anything (`import /proc/self/environ`, a mounted secret):
// errors and warnings about them name the file and line, never print what the file holds.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { BIN, startServer } from '../helpers/server.js';
import { freePort } from '../helpers/ports.js';

const run = promisify(execFile);
const SECRET = 's3cr3t-0f-the-test-' + process.pid;

async function failingStart(
  corefile: string,
  env: Record<string, string> = {},
): Promise<{ code: number; output: string; dir: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'clusterdns-contents-'));
  writeFileSync(join(dir, 'secret.txt'), `TOKEN=${SECRET}\nsecond ${SECRET} line\n`);
  const conf = join(dir, 'Corefile');
  writeFileSync(conf, corefile);
  const r = await run(process.execPath, [BIN, '-conf', conf], {
    cwd: dir,
    env: { ...process.env, ...env },
    timeout: 15000,
  }).then(
    (o) => ({ code: 0, stdout: o.stdout, stderr: o.stderr }),
    (e: { code: number; stdout: string; stderr: string }) => e,
  );
  return { code: r.code, output: r.stdout + r.stderr, dir };
}

test('import /proc/self/environ fails at the file and line without printing the environment', async () => {
  const port = await freePort();
  for (const corefile of [
    `.:${port} {\n    import /proc/self/environ\n    whoami\n}\n`,
    `import /proc/self/environ\n`,
  ]) {
    const r = await failingStart(corefile, { CLUSTERDNS_TEST_SECRET: SECRET });
    assert.equal(r.code, 1, r.output);
    assert.match(r.output, /^\/proc\/self\/environ:1 - Error during parsing: /m);
    assert.ok(!r.output.includes(SECRET), `the environment leaked:\n${r.output}`);
    assert.ok(!r.output.includes('CLUSTERDNS_TEST_SECRET'), `the environment leaked:\n${r.output}`);
  }
});

test("an imported file that is no Corefile: its words are not quoted back, the Corefile's own still are", async () => {
  const port = await freePort();
  const r = await failingStart(`.:${port} {\n    import secret.txt\n}\n`);
  assert.equal(r.code, 1);
  assert.equal(r.output.trim(), `${join(r.dir, 'secret.txt')}:1 - Error during parsing: Unknown directive '…'`);
  // A plugin's option error inside an imported file is redacted the same way.
  const dir = mkdtempSync(join(tmpdir(), 'clusterdns-contents-'));
  writeFileSync(join(dir, 'part.conf'), `hosts {\n    ttl ${SECRET}\n}\n`);
  writeFileSync(join(dir, 'Corefile'), `.:${port} {\n    import part.conf\n}\n`);
  const r2 = await run(process.execPath, [BIN, '-conf', join(dir, 'Corefile')], { cwd: dir }).catch(
    (e: { code: number; stderr: string }) => e,
  );
  assert.equal((r2 as { code: number }).code, 1);
  assert.match((r2 as { stderr: string }).stderr, /part\.conf:2 - Error during parsing: ttl: "…" is not a number/);
  assert.ok(!(r2 as { stderr: string }).stderr.includes(SECRET));
  // The Corefile itself is the operator's own text: its errors still quote it.
  const r3 = await failingStart(`.:${port} {\n    nosuchplugin\n}\n`);
  assert.match(r3.output, /Unknown directive 'nosuchplugin'/);
});

test('hosts, manifests and kubeconfig files with bad content are reported without their content', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'clusterdns-contents-'));
  writeFileSync(join(dir, 'secret.txt'), `TOKEN=${SECRET}\n${SECRET} x.hosts.test\n`);
  writeFileSync(join(dir, 'bad.json'), `${SECRET}\n`);
  writeFileSync(join(dir, 'bad.yaml'), `a: [${SECRET}\n`);
  const s = await startServer({
    corefile:
      `hosts.test.:PORT {\n    bind 127.0.0.1\n    hosts ${join(dir, 'secret.txt')}\n}\n` +
      `json.test.:PORT {\n    bind 127.0.0.1\n    kubernetes json.test {\n        manifests ${join(dir, 'bad.json')}\n    }\n}\n` +
      `yaml.test.:PORT {\n    bind 127.0.0.1\n    kubernetes yaml.test {\n        manifests ${join(dir, 'bad.yaml')}\n    }\n}\n` +
      `kc.test.:PORT {\n    bind 127.0.0.1\n    kubernetes kc.test {\n        kubeconfig ${join(dir, 'bad.yaml')}\n    }\n}\n`,
    noWait: true,
  });
  try {
    await s.waitFor(/secret\.txt:2: the first field is not an IP address; line skipped/);
    await s.waitFor(/bad\.json: .*is not valid JSON; nothing loaded from it/);
    await s.waitFor(/bad\.yaml: .*; nothing loaded from it/);
    await s.waitFor(/kubeconfig .*bad\.yaml: invalid YAML: /);
    assert.ok(!s.output().includes(SECRET), `file content leaked:\n${s.output()}`);
  } finally {
    await s.stop();
  }
});
