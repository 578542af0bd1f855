// What a user reads when a start goes wrong, and the lines CoreDNS users grep for: each as
// CoreDNS words it, once per server (not once per worker), naming the file, line or address.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import dgram from 'node:dgram';
import { BIN, startServer } from '../helpers/server.js';
import { dig } from '../helpers/dns.js';
import { freePort } from '../helpers/ports.js';

const run = promisify(execFile);

interface Outcome {
  code: number;
  stdout: string;
  stderr: string;
}

async function clusterdns(args: string[], env: Record<string, string> = {}, timeoutMs = 15000): Promise<Outcome> {
  try {
    const r = await run(process.execPath, [BIN, ...args], {
      env: { ...process.env, CLUSTERDNS_EXIT_WITH_PARENT: '1', ...env },
      timeout: timeoutMs,
    });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (e) {
    const x = e as { code: number; stdout: string; stderr: string };
    return { code: x.code, stdout: x.stdout, stderr: x.stderr };
  }
}

function corefile(text: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'clusterdns-start-'));
  const f = join(dir, 'Corefile');
  writeFileSync(f, text);
  return f;
}

test('a -conf file that is not there is named, in words, not as a raw ENOENT', async () => {
  const missing = join(mkdtempSync(join(tmpdir(), 'clusterdns-start-')), 'Corefile');
  const r = await clusterdns(['-conf', missing]);
  assert.equal(r.code, 1);
  assert.equal(
    r.stderr.trim(),
    `clusterdns: ${missing}: cannot read the Corefile (-conf ${missing}): no such file or directory`,
  );
});

test('a misspelt directive gets "did you mean"', async () => {
  const f = corefile('.:1053 {\n    whoam\n}\n');
  const r = await clusterdns(['-conf', f]);
  assert.equal(r.code, 1);
  assert.equal(r.stderr.trim(), `${f}:2 - Error during parsing: Unknown directive 'whoam' (did you mean 'whoami'?)`);
});

test('hosts with a missing file and an import glob that matches nothing warn once each, with two workers', async () => {
  const s = await startServer({
    corefile: '.:PORT {\n    import /nonexistent-dir/*.conf\n    hosts /nonexistent-hosts\n    whoami\n}\n',
    workers: 2,
  });
  try {
    const out = s.output();
    assert.equal(
      out.split('[WARNING] No files matching import glob pattern: /nonexistent-dir/*.conf\n').length - 1,
      1,
      out,
    );
    await s.waitFor('[WARNING] plugin/hosts: File does not exist: /nonexistent-hosts\n');
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(s.output().split('File does not exist').length - 1, 1, s.output());
  } finally {
    await s.stop();
  }
});

test('a DNS port in use is reported once, with its address, not once per worker', async () => {
  const port = await freePort();
  const holder = dgram.createSocket('udp4');
  await new Promise<void>((r) => holder.bind(port, '0.0.0.0', () => r()));
  try {
    const r = await clusterdns(['-conf', corefile(`.:${port} {\n    whoami\n}\n`), '-workers', '3']);
    assert.equal(r.code, 1);
    assert.equal(r.stderr, `clusterdns: cannot listen on dns://0.0.0.0:${port}: address already in use\n`);
  } finally {
    holder.close();
  }
});

test('ready on a port in use names the real address, not null:PORT', async () => {
  const port = await freePort();
  const busy = createServer();
  await new Promise<void>((r) => busy.listen(port, () => r()));
  try {
    for (const workers of ['1', '2']) {
      const r = await clusterdns([
        '-conf',
        corefile(`.:${await freePort()} {\n    whoami\n    ready :${port}\n}\n`),
        '-workers',
        workers,
      ]);
      assert.equal(r.code, 1);
      assert.equal(
        r.stderr,
        `clusterdns: cannot listen on :${port} ([::]:${port}): address already in use\n`,
        `workers ${workers}`,
      );
    }
  } finally {
    busy.close();
  }
});

const unprivilegedStart = Number(
  existsSync('/proc/sys/net/ipv4/ip_unprivileged_port_start')
    ? readFileSync('/proc/sys/net/ipv4/ip_unprivileged_port_start', 'utf8')
    : 1024,
);
const canDropRoot = process.getuid?.() === 0 && existsSync('/usr/bin/setpriv') && unprivilegedStart > 53;

test(
  'binding port 53 without privilege says what to grant',
  { skip: !canDropRoot && 'needs root (to drop it) and setpriv' },
  async () => {
    const f = corefile('.:53 {\n    whoami\n}\n');
    chmodSync(dirname(f), 0o755); // readable by the unprivileged user
    let r: Outcome;
    try {
      await run(
        'setpriv',
        ['--reuid=65534', '--regid=65534', '--clear-groups', process.execPath, BIN, '-conf', f, '-workers', '1'],
        { timeout: 15000 },
      );
      assert.fail('started on port 53 without privilege');
    } catch (e) {
      r = e as Outcome;
    }
    assert.equal(r!.code, 1);
    assert.match(
      r!.stderr,
      /^clusterdns: cannot listen on dns:\/\/0\.0\.0\.0:53: permission denied; .*CAP_NET_BIND_SERVICE.*net\.ipv4\.ip_unprivileged_port_start to 53\n$/,
    );
  },
);

test('a kubeconfig context that does not exist points at the kubeconfig line', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'clusterdns-start-'));
  const kc = join(dir, 'kubeconfig');
  writeFileSync(
    kc,
    'apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:1\ncontexts:\n- name: a\n  context:\n    cluster: c\ncurrent-context: a\n',
  );
  const f = corefile(
    `.:${await freePort()} {\n    kubernetes cluster.local {\n        pods insecure\n        kubeconfig ${kc} nope\n    }\n}\n`,
  );
  const r = await clusterdns(['-conf', f, '-workers', '1']);
  assert.equal(r.code, 1);
  assert.match(r.stderr, new RegExp(`^${f}:4 - Error during parsing: kubernetes: .*context "nope" not found`));
});

const inPod = existsSync('/var/run/secrets/kubernetes.io/serviceaccount/ca.crt');

test('an in-cluster error with workers says "in-cluster:" once', { skip: inPod && 'runs in a Pod' }, async () => {
  const s = await startServer({
    corefile: '.:PORT {\n    kubernetes cluster.local\n}\n',
    workers: 2,
    noWait: true,
    env: { KUBERNETES_SERVICE_HOST: '127.0.0.1', KUBERNETES_SERVICE_PORT: '1' },
  });
  try {
    await s.waitFor('service account CA', 10000);
    assert.match(s.output(), /\[ERROR\] plugin\/kubernetes: in-cluster: service account CA: cannot read /);
    assert.doesNotMatch(s.output(), /in-cluster: in-cluster/);
  } finally {
    await s.stop('SIGKILL');
  }
});

test('the banner says "on ADDRESS" for a block that binds, as CoreDNS does', async () => {
  const other = await freePort();
  const s = await startServer({
    corefile: `example.org:PORT {\n    bind 127.0.0.1 ::1\n    whoami\n}\n.:${other} {\n    whoami\n}\n`,
    workers: 1,
  });
  try {
    const banner = s.output().split('clusterdns-')[0]!;
    assert.equal(banner, `example.org.:${s.port} on 127.0.0.1\nexample.org.:${s.port} on ::1\n.:${other}\n`);
  } finally {
    await s.stop();
  }
});

test('reload logs the running SHA512 at start, then Reloading / SHA512 / Reloading complete on a change', async () => {
  const s = await startServer({ corefile: '.:PORT {\n    reload 2s 1s\n    whoami\n}\n', workers: 2 });
  try {
    const first = createHash('sha512').update(readFileSync(s.corefile)).digest('hex');
    await s.waitFor(`[INFO] plugin/reload: Running configuration SHA512 = ${first}\n`);
    const text = readFileSync(s.corefile, 'utf8').replace('whoami', 'whoami\n    log');
    writeFileSync(s.corefile, text);
    const second = createHash('sha512').update(text).digest('hex');
    await s.waitFor('[INFO] Reloading complete\n', 15000);
    const out = s.output();
    const tail = out.slice(out.indexOf('[INFO] Reloading\n'));
    assert.equal(
      tail,
      `[INFO] Reloading\n[INFO] plugin/reload: Running configuration SHA512 = ${second}\n[INFO] Reloading complete\n`,
    );
    assert.equal(out.split('Running configuration SHA512').length - 1, 2, 'one line per load, not one per worker');
  } finally {
    await s.stop();
  }
});

test('errors logs "no next plugin found" for a SERVFAIL at the end of the chain', async () => {
  const s = await startServer({
    corefile: '.:PORT {\n    errors\n    hosts {\n        10.0.0.1 a.test\n        fallthrough\n    }\n}\n',
    workers: 1,
  });
  try {
    const r = await dig(s.port, ['b.test', 'A']);
    assert.equal(r.status, 'SERVFAIL');
    await s.waitFor('[ERROR] plugin/errors: 2 b.test. A: plugin/hosts: no next plugin found\n', 3000);
  } finally {
    await s.stop();
  }
});
