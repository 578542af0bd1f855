// Security properties that are not a single plugin's business: HTTP endpoints listen only
// where they are configured, the route stream refuses clients without its token, and no
// program is run through a shell (checked over the source tree, so a new call gets reviewed).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { startServer } from '../helpers/server.js';
import { freePort } from '../helpers/ports.js';

const DEMO = readFileSync('examples/demo/cluster.yaml', 'utf8');

async function status(url: string, headers: Record<string, string> = {}): Promise<number | string> {
  const ac = new AbortController();
  const t = setTimeout(() => ac.abort(), 3000);
  try {
    const res = await fetch(url, { headers, signal: ac.signal });
    // The route stream never ends: the status line is all this needs.
    void res.body?.cancel();
    return res.status;
  } catch (e) {
    return (e as { cause?: { code?: string } }).cause?.code ?? (e as Error).message;
  } finally {
    clearTimeout(t);
  }
}

for (const workers of [1, 2]) {
  test(
    `metrics, health, ready and the route stream listen only on the configured 127.0.0.2 (${workers} worker${workers > 1 ? 's' : ''}): 127.0.0.1 refuses`,
    { timeout: 30_000 },
    async () => {
      const [metrics, health, ready, routes] = [
        await freePort('127.0.0.2'),
        await freePort('127.0.0.2'),
        await freePort('127.0.0.2'),
        await freePort('127.0.0.2'),
      ];
      const s = await startServer({
        corefile: `.:PORT {
    bind 127.0.0.1
    prometheus 127.0.0.2:${metrics}
    health 127.0.0.2:${health}
    ready 127.0.0.2:${ready}
    routes 127.0.0.2:${routes} {
        token s3cret
    }
    kubernetes cluster.local {
        manifests cluster.yaml
    }
}
`,
        files: { 'cluster.yaml': DEMO },
        workers,
      });
      try {
        const endpoints: Array<[string, number, string]> = [
          ['metrics', metrics, '/metrics'],
          ['health', health, '/health'],
          ['ready', ready, '/ready'],
        ];
        for (const [what, port, path] of endpoints) {
          let code: number | string = 0;
          for (let i = 0; i < 50 && code !== 200; i++) {
            code = await status(`http://127.0.0.2:${port}${path}`);
            if (code !== 200) await new Promise((r) => setTimeout(r, 100));
          }
          assert.equal(code, 200, `${what} answers on 127.0.0.2:${port}`);
          assert.equal(
            await status(`http://127.0.0.1:${port}${path}`),
            'ECONNREFUSED',
            `${what} must not listen on 127.0.0.1:${port}`,
          );
        }
        assert.equal(
          await status(`http://127.0.0.2:${routes}/routes`, { authorization: 'Bearer s3cret' }),
          200,
          'the route stream with its token',
        );
        assert.equal(await status(`http://127.0.0.2:${routes}/routes`), 401, 'no token: 401');
        assert.equal(
          await status(`http://127.0.0.2:${routes}/routes`, { authorization: 'Bearer s3cre' }),
          401,
          'a wrong token: 401',
        );
        assert.equal(
          await status(`http://127.0.0.1:${routes}/routes`, { authorization: 'Bearer s3cret' }),
          'ECONNREFUSED',
        );
      } finally {
        await s.stop();
      }
    },
  );
}

test('the route stream cannot be configured without a token', { timeout: 20_000 }, async () => {
  const port = await freePort();
  const s = await startServer({
    corefile: `.:PORT {\n    bind 127.0.0.1\n    routes 127.0.0.1:${port}\n    kubernetes cluster.local {\n        manifests cluster.yaml\n    }\n}\n`,
    files: { 'cluster.yaml': DEMO },
    noWait: true,
  });
  assert.equal(await new Promise<number | null>((r) => s.proc.on('exit', r)), 1);
  assert.match(s.output(), /Error during parsing: .*token or tokenfile is required/);
});

function sources(dir: string): string[] {
  const out: string[] = [];
  for (const e of readdirSync(dir)) {
    const p = join(dir, e);
    if (statSync(p).isDirectory()) out.push(...sources(p));
    else if (p.endsWith('.ts')) out.push(p);
  }
  return out;
}

test('no program is run through a shell: child_process is used only by the two reviewed modules, with execFile/spawnSync and argument arrays', () => {
  const users: string[] = [];
  for (const file of sources('src')) {
    const text = readFileSync(file, 'utf8');
    assert.doesNotMatch(text, /shell\s*:\s*true/, `${file} asks for a shell`);
    const imp = /import\s*\{([^}]*)\}\s*from\s*'node:child_process'/.exec(text);
    if (!imp && !/child_process/.test(text)) continue;
    assert.ok(imp, `${file} reaches child_process in an unusual way`);
    const names = imp[1]!
      .split(',')
      .map((n) => n.trim().replace(/^type\s+/, ''))
      .filter(Boolean);
    for (const n of names)
      assert.ok(['execFile', 'spawnSync', 'ChildProcess'].includes(n), `${file} imports ${n} from child_process`);
    users.push(relative('src', file));
  }
  // Reviewed (RELIABILITY.md): the one command runner (iptables/ip for nodecache,
  // resolvectl/ip/powershell for connect; PowerShell scripts go in -EncodedCommand, every value a
  // quoted literal), and the kubeconfig exec credential plugin, which runs the command the
  // kubeconfig names, as kubectl does.
  assert.deepEqual(users.sort(), ['kube/connection.ts', 'sys/exec.ts']);
});
