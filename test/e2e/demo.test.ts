// The demo of `npm start` as the README presents it: its status page is on, at the address the
// README names, and CLUSTERDNS_WORKERS is documented as the server reads it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { startServer } from '../helpers/server.js';
import { freePort } from '../helpers/ports.js';

const readme = readFileSync('README.md', 'utf8');
const demo = readFileSync('examples/demo/Corefile', 'utf8');

test("the README points at the demo's status page, and the demo serves it", async () => {
  const health = /^\s*health (\S+) \{\s*\n\s*status\s*\n\s*\}/m.exec(demo);
  assert.ok(health, "the demo's health block turns the status page on");
  assert.ok(readme.includes(`http://${health[1]}/status`), `README names http://${health[1]}/status`);
  // The demo itself, on free ports instead of its fixed ones.
  const [healthPort, readyPort] = [await freePort(), await freePort()];
  const corefile = demo
    .replace(/^\.:1053 \{/m, '.:PORT {')
    .replace(`health ${health[1]!} {`, `health 127.0.0.1:${healthPort} {`)
    .replace(/ready 127\.0\.0\.1:8181/, `ready 127.0.0.1:${readyPort}`);
  const server = await startServer({
    corefile,
    files: { 'cluster.yaml': readFileSync('examples/demo/cluster.yaml', 'utf8') },
    noWait: true,
  });
  try {
    // The banner comes once every listener, the health one included, is bound (generous for loaded CI).
    await server.waitFor(/clusterdns-\d/, 40_000);
    const page = await fetch(`http://127.0.0.1:${healthPort}/status`);
    assert.equal(page.status, 200);
    assert.match(page.headers.get('content-type') ?? '', /text\/html/);
    const json = await fetch(`http://127.0.0.1:${healthPort}/status.json`);
    assert.equal(json.status, 200);
    assert.equal(typeof (await json.json()), 'object');
  } finally {
    await server.stop();
  }
});

test('CLUSTERDNS_WORKERS is documented in the README where the manifests and the server use it', () => {
  assert.match(readme, /\| `CLUSTERDNS_WORKERS` \| [^|]*-workers[^|]*\|/);
  assert.match(readFileSync('src/cli.ts', 'utf8'), /process\.env\['CLUSTERDNS_WORKERS'\]/);
  assert.match(readFileSync('deploy/cluster-dns/4-deployment.yaml', 'utf8'), /name: CLUSTERDNS_WORKERS/);
});
