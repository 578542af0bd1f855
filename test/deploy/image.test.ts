// deploy/Dockerfile: a multi-stage build whose runtime stage holds production dependencies and
// dist/ only, runs as a non-root user and writes nothing outside /tmp. No container engine is
// needed: the runtime stage's layout is rebuilt from package-lock.json and dist/src, and run
// as uid 65532 in a private mount namespace whose root filesystem is read-only.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { builtinModules } from 'node:module';
import { chmodSync, cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { query } from '../helpers/dns.js';
import { freePort } from '../helpers/ports.js';
import { QType } from '../../src/dns/constants.js';

const ROOT = process.cwd();
const dockerfile = readFileSync(join(ROOT, 'deploy/Dockerfile'), 'utf8');
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { dependencies?: Record<string, string> };

/** Dockerfile instructions (continuations joined, comments dropped), split into stages. */
function stages(): Array<{ name: string; lines: string[] }> {
  const lines = dockerfile.replace(/\\\n/g, ' ').split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#'));
  const out: Array<{ name: string; lines: string[] }> = [];
  for (const l of lines) {
    const from = /^FROM\s+\S+(?:\s+AS\s+(\S+))?/i.exec(l);
    if (from) out.push({ name: from[1] ?? '', lines: [] });
    else out.at(-1)?.lines.push(l);
  }
  return out;
}

describe('deploy/Dockerfile', () => {
  const [build, runtime] = stages();

  test('multi-stage: the build stage runs npm ci and tsc; the runtime stage is the last', () => {
    assert.equal(stages().length, 2);
    assert.equal(build?.name, 'build');
    assert.equal(runtime?.name, 'runtime');
    assert.ok(build?.lines.some((l) => /^RUN npm ci\b/.test(l)));
    assert.ok(build?.lines.some((l) => /^RUN npx tsc -p tsconfig\.json\b/.test(l)));
  });

  test('the runtime stage installs production dependencies only and copies dist/ from the build stage, nothing else of the source', () => {
    const r = runtime?.lines ?? [];
    assert.ok(r.some((l) => /^RUN npm ci --omit=dev\b/.test(l)));
    const copies = r.filter((l) => /^COPY\b/.test(l));
    assert.deepEqual(copies, ['COPY package.json package-lock.json ./', 'COPY --from=build /src/dist/src ./dist/src', 'COPY --from=build /src/native/build/Release ./native/build/Release']);
  });

  test('runs as a non-root user with the entrypoint node /app/dist/src/cli.js', () => {
    const user = (runtime?.lines ?? []).filter((l) => /^USER\b/.test(l)).at(-1);
    assert.match(user ?? '', /^USER [1-9]\d*(:[1-9]\d*)?$/, 'a numeric non-root uid, so runAsNonRoot can verify it');
    assert.equal((runtime?.lines ?? []).find((l) => /^ENTRYPOINT\b/.test(l)), 'ENTRYPOINT ["node","--min-semi-space-size=2","--no-memory-reducer","--interrupt-budget=16896","/app/dist/src/cli.js"]');
    // The heap flags go in NODE_OPTIONS (not the command line) so a Pod's own NODE_OPTIONS can change them.
    assert.match((runtime?.lines ?? []).find((l) => /^ENV NODE_OPTIONS=/.test(l)) ?? '', /^ENV NODE_OPTIONS=--max-semi-space-size=\d+$/);
    assert.ok((runtime?.lines ?? []).some((l) => l === 'WORKDIR /app'));
  });

  test('everything dist/src imports at run time is a Node built-in or a production dependency', () => {
    const deps = new Set(Object.keys(pkg.dependencies ?? {}));
    const builtins = new Set(builtinModules);
    const bad: string[] = [];
    const walk = (dir: string): void => {
      for (const e of readdirSync(dir)) {
        const p = join(dir, e);
        if (statSync(p).isDirectory()) walk(p);
        else if (e.endsWith('.js')) {
          const text = readFileSync(p, 'utf8');
          const specs = [
            ...text.matchAll(/^\s*(?:import|export)\b[^'"`;]*?\bfrom\s*['"]([^'"]+)['"]/gm),
            ...text.matchAll(/^\s*import\s*['"]([^'"]+)['"]/gm),
            ...text.matchAll(/\bimport\(\s*['"]([^'"]+)['"]\s*\)/g),
          ];
          for (const m of specs) {
            const spec = m[1] ?? '';
            if (spec.startsWith('.') || spec.startsWith('node:') || builtins.has(spec)) continue;
            const name = spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : (spec.split('/')[0] ?? '');
            if (!deps.has(name)) bad.push(`${p.slice(ROOT.length + 1)} imports ${spec}`);
          }
        }
      }
    };
    walk(join(ROOT, 'dist/src'));
    assert.deepEqual(bad, [], 'a devDependency is not in the image');
  });
});

/** The runtime stage's /app, rebuilt: package files, the non-dev packages of the lock, dist/src. */
function runtimeLayout(dir: string): string {
  const app = join(dir, 'app');
  cpSync(join(ROOT, 'package.json'), join(app, 'package.json'));
  cpSync(join(ROOT, 'package-lock.json'), join(app, 'package-lock.json'));
  const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, { dev?: boolean }> };
  for (const [path, meta] of Object.entries(lock.packages)) {
    if (path === '' || meta.dev === true) continue;
    cpSync(join(ROOT, path), join(app, path), { recursive: true });
  }
  cpSync(join(ROOT, 'dist/src'), join(app, 'dist/src'), { recursive: true });
  return app;
}

function sandboxAvailable(): string | undefined {
  if (process.getuid?.() !== 0) return 'needs root for a private mount namespace';
  const r = spawnSync('unshare', ['--mount', '--propagation', 'private', 'sh', '-c', 'mount -o remount,bind,ro / && command -v setpriv'], { encoding: 'utf8' });
  return r.status === 0 ? undefined : `unshare/setpriv not usable here: ${r.stderr.trim()}`;
}

describe('the runtime image layout on a read-only root filesystem, as uid 65532', { skip: sandboxAvailable() }, () => {
  let dir: string;
  let app: string;

  before(() => {
    // /var/tmp, not /tmp: the sandbox mounts an empty tmpfs on /tmp, as the manifests do.
    dir = mkdtempSync('/var/tmp/clusterdns-image-');
    chmodSync(dir, 0o755);
    app = runtimeLayout(dir);
  });

  after(() => rmSync(dir, { recursive: true, force: true }));

  /** argv run as `node /app/dist/src/cli.js ...` in the sandbox, cwd /app. */
  function sandboxed(args: string[]): ReturnType<typeof spawn> {
    const script = 'mount -t tmpfs -o mode=1777 tmpfs /tmp && mount -o remount,bind,ro / && cd "$0" && exec setpriv --reuid=65532 --regid=65532 --clear-groups "$@"';
    return spawn('unshare', ['--mount', '--propagation', 'private', 'sh', '-c', script, app, process.execPath, join(app, 'dist/src/cli.js'), ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: '/nonexistent', NODE_ENV: 'production' },
    });
  }

  function run(args: string[]): Promise<{ code: number | null; out: string }> {
    const p = sandboxed(args);
    let out = '';
    p.stdout?.on('data', (d: Buffer) => (out += d.toString()));
    p.stderr?.on('data', (d: Buffer) => (out += d.toString()));
    return new Promise((r) => p.on('exit', (code) => r({ code, out })));
  }

  test('the server starts with two workers, answers over UDP, serves /health and /ready, and stops cleanly', async () => {
    const [port, health, ready] = [await freePort(), await freePort(), await freePort()];
    writeFileSync(join(app, 'Corefile'), `.:${port} {\n    errors\n    health 127.0.0.1:${health}\n    ready 127.0.0.1:${ready}\n    cache 30\n    whoami\n}\n`);
    const p = sandboxed(['-conf', join(app, 'Corefile'), '-workers', '2']);
    let out = '';
    p.stdout?.on('data', (d: Buffer) => (out += d.toString()));
    p.stderr?.on('data', (d: Buffer) => (out += d.toString()));
    const exit = new Promise<number | null>((r) => p.on('exit', (code) => r(code)));
    try {
      const start = Date.now();
      for (;;) {
        try {
          const m = await query(port, 'whoami.example.', QType.A, { timeoutMs: 300 });
          assert.equal(m.rcode, 0);
          assert.ok(m.additionals.length > 0, 'whoami answers with the client address');
          break;
        } catch (err) {
          if (Date.now() - start > 8000) assert.fail(`no answer within 8 s: ${(err as Error).message}\n${out}`);
          await new Promise((r) => setTimeout(r, 100));
        }
      }
      assert.equal((await fetch(`http://127.0.0.1:${health}/health`)).status, 200);
      assert.equal((await fetch(`http://127.0.0.1:${ready}/ready`)).status, 200);
    } finally {
      p.kill('SIGTERM');
    }
    assert.equal(await exit, 0, out);
    assert.doesNotMatch(out, /EROFS|read-only file system/i);
  });

  test('the autoscaler’s command starts there too', async () => {
    const r = await run(['autoscale', '--version']);
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, /^clusterdns-\d+\.\d+\.\d+ autoscale/);
  });
});
