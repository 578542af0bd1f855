// `clusterdns diagnose` end to end: the real binary, a pod's resolv.conf in a temp file, and
// real servers on loopback: a clusterdns serving the demo cluster (kubernetes plugin,
// manifests mode) that forwards other names to an upstream, a clusterdns whose chain ends
// in SERVFAIL, a UDP socket that never answers, a closed port, and the test API server for
// the kube-dns checks and the "did you mean" suggestions.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BIN, startServer, type RunningServer } from '../helpers/server.js';
import { freePort } from '../helpers/ports.js';
import { KubeApiServer } from '../helpers/kubeapi.js';
import { startFakeDns, type FakeDns } from '../diagnose/fakedns.js';
import {
  appService,
  applyHealthyDns,
  kubeDnsPod,
  kubeDnsService,
  kubeDnsSlice,
  writeKubeconfig,
} from '../diagnose/kubedns-fixtures.js';
import type { DiagnoseReport } from '../../src/diagnose/report.js';

interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

const env: NodeJS.ProcessEnv = { ...process.env };
delete env.KUBERNETES_SERVICE_HOST;
delete env.KUBERNETES_SERVICE_PORT;
delete env.NO_COLOR;

function diagnose(args: string[]): Promise<RunResult> {
  return new Promise((resolve) => {
    execFile(process.execPath, [BIN, 'diagnose', ...args], { env, timeout: 30_000 }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : -1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}

async function report(args: string[]): Promise<{ r: DiagnoseReport; code: number }> {
  const out = await diagnose([...args, '--json']);
  assert.equal(out.stderr, '', out.stderr);
  return { r: JSON.parse(out.stdout) as DiagnoseReport, code: out.code };
}

const POD_RESOLV =
  'search default.svc.cluster.local svc.cluster.local cluster.local\nnameserver 10.96.0.10\noptions ndots:5\n';

describe('clusterdns diagnose', { concurrency: true }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'diagnose-e2e-'));
  let upstream: FakeDns;
  let cluster: RunningServer;
  let broken: RunningServer;
  let demo: RunningServer;
  let silent: dgram.Socket;
  let silentPort: number;
  let api: KubeApiServer;
  let kubeconfig: string;
  const resolvConf = (name: string, text: string) => {
    const f = join(dir, name);
    writeFileSync(f, text);
    return f;
  };
  let pod: string;

  before(async () => {
    upstream = await startFakeDns([
      { match: '^api\\.example\\.com\\.$', reply: { A: '93.184.216.34' } },
      // What a server returns when a CNAME's target does not resolve: the CNAME alone.
      { match: '^alias\\.example\\.com\\.$', reply: { CNAME: 'gone.example.net.' } },
    ]);
    const clusterYaml = readFileSync('examples/demo/cluster.yaml', 'utf8');
    // The demo of `npm start`, on a free port and without its fixed health/ready ports.
    const demoCorefile = readFileSync('examples/demo/Corefile', 'utf8')
      .replace(/^\.:1053 \{/m, '.:PORT {')
      .replace(/^[ \t]*health [^\n]*\{[^}]*\}\n/m, '')
      .replace(/^[ \t]*(health|ready) .*\n/gm, '');
    [cluster, broken, demo] = await Promise.all([
      startServer({
        corefile: `.:PORT {\n  bind 127.0.0.1\n  kubernetes cluster.local in-addr.arpa ip6.arpa {\n    manifests cluster.yaml\n    pods insecure\n    fallthrough in-addr.arpa ip6.arpa\n  }\n  forward . 127.0.0.1:${upstream.port}\n}\n`,
        files: { 'cluster.yaml': clusterYaml },
        probe: 'backend.default.svc.cluster.local.',
      }),
      startServer({ corefile: '.:PORT {\n  bind 127.0.0.1\n  hosts {\n    10.0.0.1 known.example\n  }\n}\n' }),
      startServer({
        corefile: demoCorefile,
        files: { 'cluster.yaml': clusterYaml },
        probe: 'backend.default.svc.cluster.local.',
      }),
    ]);
    silentPort = await freePort();
    silent = dgram.createSocket('udp4');
    await new Promise<void>((r) => silent.bind(silentPort, '127.0.0.1', () => r()));
    api = await KubeApiServer.create();
    applyHealthyDns(api);
    api.apply(appService('backend', 'default', '10.96.120.15'));
    api.apply(appService('payments', 'prod', '10.96.130.1'));
    for (const ns of ['default', 'kube-system', 'prod'])
      api.apply({ kind: 'Namespace', apiVersion: 'v1', metadata: { name: ns } });
    kubeconfig = writeKubeconfig(dir, api);
    pod = resolvConf('pod.conf', POD_RESOLV);
  });
  after(async () => {
    await Promise.all([cluster?.stop(), broken?.stop(), demo?.stop(), upstream?.close(), api?.close()]);
    silent?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const at = (s: { port: number }) => ['--server', `127.0.0.1:${s.port}`];

  test('resolved: "backend" answers at the first search domain; the later names are not asked; exit 0', async () => {
    const { r, code } = await report(['backend', '--resolv-conf', pod, ...at(cluster)]);
    assert.equal(code, 0);
    assert.equal(r.verdict.status, 'resolved');
    assert.equal(r.verdict.resolvedAs, 'backend.default.svc.cluster.local.');
    assert.deepEqual(r.verdict.answers.sort(), ['10.96.120.15', 'fd00:10:96::f']);
    assert.deepEqual(
      r.candidates.map((c) => c.name),
      ['backend.default.svc.cluster.local.', 'backend.svc.cluster.local.', 'backend.cluster.local.', 'backend.'],
    );
    assert.deepEqual(
      r.candidates.map((c) => c.sent),
      [true, false, false, false],
    );
    const first = r.candidates[0]!;
    assert.deepEqual(
      first.queries.map((q) => [q.type, q.rcode, q.transport, q.server]),
      [
        ['A', 'NOERROR', 'udp', `127.0.0.1:${cluster.port}`],
        ['AAAA', 'NOERROR', 'udp', `127.0.0.1:${cluster.port}`],
      ],
    );
    assert.ok(first.queries.every((q) => typeof q.latencyMs === 'number' && q.latencyMs >= 0));
    assert.equal(r.verdict.applicationError, null);
  });

  test('resolved after walking the search path: "backend.default" gets NXDOMAIN first, then answers', async () => {
    const { r, code } = await report(['backend.default', '--resolv-conf', pod, ...at(cluster)]);
    assert.equal(code, 0);
    assert.deepEqual(
      r.candidates.map((c) => c.outcome),
      ['nxdomain', 'answered', null, null],
    );
    assert.equal(r.verdict.resolvedAs, 'backend.default.svc.cluster.local.');
    assert.ok(r.verdict.notes.some((n) => n.includes('1 name was asked for before')));
  });

  test('an external name with ndots:5 walks the three search domains before the upstream answers it', async () => {
    const { r, code } = await report(['api.example.com', '--resolv-conf', pod, ...at(cluster)]);
    assert.equal(code, 0);
    assert.deepEqual(
      r.candidates.map((c) => c.outcome),
      ['nxdomain', 'nxdomain', 'nxdomain', 'answered'],
    );
    assert.deepEqual(r.verdict.answers, ['93.184.216.34']);
    assert.match(r.rule, /2 dots, fewer than ndots:5/);
  });

  test('--type narrows the lookup to one type (SRV of a named port)', async () => {
    const { r, code } = await report(['_http._tcp.backend', '--type', 'SRV', '--resolv-conf', pod, ...at(cluster)]);
    assert.equal(code, 0);
    assert.deepEqual(r.types, ['SRV']);
    assert.equal(r.candidates[0]!.queries.length, 1);
    assert.match(r.verdict.answers[0]!, /^0 \d+ 8080 /);
  });

  test('a missing service: NXDOMAIN for every candidate, exit 1, EAI_NONAME, and a hint to use --kubeconfig', async () => {
    const { r, code } = await report(['bakend', '--resolv-conf', pod, ...at(cluster)]);
    assert.equal(code, 1);
    assert.equal(r.verdict.status, 'nxdomain');
    assert.deepEqual(
      r.candidates.map((c) => c.outcome),
      ['nxdomain', 'nxdomain', 'nxdomain', 'nxdomain'],
    );
    assert.equal(r.verdict.applicationError!.gai, 'EAI_NONAME');
    assert.ok(r.verdict.next.some((n) => n.includes('--kubeconfig')));
    assert.equal(r.cluster, null);
  });

  test('a missing service with --kubeconfig: "did you mean backend.default?", and the kube-dns checks pass', async () => {
    const { r, code } = await report(['bakend', '--resolv-conf', pod, ...at(cluster), '--kubeconfig', kubeconfig]);
    assert.equal(code, 1);
    assert.equal(r.verdict.suggestions[0]!.name, 'backend.default');
    assert.ok(r.verdict.next[0]!.startsWith('did you mean backend.default?'), r.verdict.next[0]);
    assert.match(r.cluster!.source, /kubeconfig .* \(context test\)/);
    assert.deepEqual(
      r.cluster!.checks.map((c) => [c.step, c.status]),
      [
        ['service', 'ok'],
        ['endpoints', 'ok'],
        ['pods', 'ok'],
      ],
    );
    assert.equal(r.cluster!.broken, null);
    assert.ok(!r.verdict.next.some((n) => n.includes('does not exist')), 'default exists');
  });

  test('the right name in another namespace is suggested with its namespace; a namespace typo is named', async () => {
    const { r } = await report(['payments', '--resolv-conf', pod, ...at(cluster), '--kubeconfig', kubeconfig]);
    assert.equal(r.verdict.suggestions[0]!.name, 'payments.prod');
    assert.match(r.verdict.suggestions[0]!.why, /exists in namespace prod/);
    const typo = await report(['payments.prd', '--resolv-conf', pod, ...at(cluster), '--kubeconfig', kubeconfig]);
    assert.equal(typo.r.verdict.suggestions[0]!.name, 'payments.prod');
    assert.ok(typo.r.verdict.next.includes('namespace "prd" does not exist'), typo.r.verdict.next.join('\n'));
  });

  test('SERVFAIL: a chain that cannot answer; glibc walks on through every candidate; the verdict points at logs and upstream', async () => {
    const { r, code } = await report(['backend', '--resolv-conf', pod, ...at(broken)]);
    assert.equal(code, 1);
    assert.equal(r.verdict.status, 'servfail');
    assert.deepEqual(
      r.candidates.map((c) => c.outcome),
      ['servfail', 'servfail', 'servfail', 'servfail'],
    );
    assert.equal(r.verdict.applicationError!.gai, 'EAI_AGAIN');
    assert.ok(r.verdict.next.some((n) => n.includes('logs -l k8s-app=kube-dns')));
    assert.ok(r.verdict.next.some((n) => n.includes('forward')));
    // attempts:2 (the default): SERVFAIL is asked again once per candidate, as glibc does.
    assert.equal(r.candidates[0]!.queries[0]!.tries.length, 2);
  });

  test('timeout: a server that never answers, options timeout:1 attempts:1 — the search list is abandoned, the bare name still tried', async () => {
    const conf = resolvConf(
      'silent.conf',
      POD_RESOLV.replace('options ndots:5', 'options ndots:5 timeout:1 attempts:1'),
    );
    const { r, code } = await report(['backend', '--resolv-conf', conf, ...at({ port: silentPort })]);
    assert.equal(code, 1);
    assert.equal(r.verdict.status, 'timeout');
    assert.deepEqual(
      r.candidates.map((c) => c.outcome),
      ['timeout', null, null, 'timeout'],
    );
    assert.match(r.candidates[1]!.skipped!, /abandoned after a timeout/);
    assert.equal(r.timeoutMs, 1000);
    // Two candidates sent, one 1 s try each (A and AAAA together): about 2 s, not 4 x 2 x 5 s.
    assert.ok(r.durationMs >= 1900 && r.durationMs < 6000, `took ${r.durationMs} ms`);
    assert.ok(r.verdict.next.some((n) => n.includes('conntrack')));
    assert.ok(r.verdict.next.some((n) => n.includes('NetworkPolicy')));
  });

  test('timeout with --kubeconfig: kube-dns endpoints not ready is named as the broken step, first', async () => {
    const sick = await KubeApiServer.create();
    try {
      sick.apply(kubeDnsService());
      sick.apply(kubeDnsSlice([false, false]));
      sick.apply(kubeDnsPod(0, false, 'CrashLoopBackOff'));
      sick.apply(kubeDnsPod(1, false, 'CrashLoopBackOff'));
      const kc = writeKubeconfig(mkdtempSync(join(dir, 'sick-')), sick);
      const { r, code } = await report([
        'backend.default.svc.cluster.local.',
        '--resolv-conf',
        pod,
        ...at({ port: silentPort }),
        '--timeout',
        '200ms',
        '--kubeconfig',
        kc,
      ]);
      assert.equal(code, 1);
      assert.equal(r.verdict.status, 'timeout');
      assert.equal(r.candidates.length, 1);
      assert.deepEqual(
        r.cluster!.checks.map((c) => [c.step, c.status]),
        [
          ['service', 'ok'],
          ['endpoints', 'fail'],
          ['pods', 'fail'],
        ],
      );
      assert.equal(r.cluster!.broken, 'endpoints');
      assert.match(r.verdict.next[0]!, /broken at the endpoints step: 0 of 2 endpoints ready/);
    } finally {
      await sick.close();
    }
  });

  test('kube-dns Service absent: the service step fails, even when the name itself resolves (exit 0)', async () => {
    const bare = await KubeApiServer.create();
    try {
      bare.apply(kubeDnsPod(0, true));
      const kc = writeKubeconfig(mkdtempSync(join(dir, 'bare-')), bare);
      const { r, code } = await report(['backend', '--resolv-conf', pod, ...at(cluster), '--kubeconfig', kc]);
      assert.equal(code, 0);
      assert.deepEqual(
        r.cluster!.checks.map((c) => [c.step, c.status]),
        [
          ['service', 'fail'],
          ['endpoints', 'skipped'],
          ['pods', 'ok'],
        ],
      );
      assert.equal(r.cluster!.broken, 'service');
    } finally {
      await bare.close();
    }
  });

  test("a kube-dns ClusterIP that is not the pod's nameserver is a warning", async () => {
    const other = resolvConf('other-ns.conf', POD_RESOLV.replace('10.96.0.10', '10.0.0.2'));
    const { r } = await report(['backend', '--resolv-conf', other, ...at(cluster), '--kubeconfig', kubeconfig]);
    assert.equal(r.cluster!.checks[0]!.status, 'warn');
  });

  test('an unreachable API server is reported per step; the DNS verdict stands', async () => {
    const gone = await KubeApiServer.create();
    const kc = writeKubeconfig(mkdtempSync(join(dir, 'gone-')), gone);
    await gone.close();
    const { r, code } = await report(['backend', '--resolv-conf', pod, ...at(cluster), '--kubeconfig', kc]);
    assert.equal(code, 0);
    assert.ok(r.cluster!.checks.every((c) => c.status === 'error'));
    const bad = await report([
      'backend',
      '--resolv-conf',
      pod,
      ...at(cluster),
      '--kubeconfig',
      join(dir, 'missing-kubeconfig'),
    ]);
    assert.equal(bad.code, 0);
    assert.match(bad.r.cluster!.error!, /missing-kubeconfig/);
    assert.deepEqual(bad.r.cluster!.checks, []);
  });

  test('nothing listens on the server: "unreachable" at once, exit 1', async () => {
    const { r, code } = await report(['backend', '--resolv-conf', pod, '--server', `127.0.0.1:${await freePort()}`]);
    assert.equal(code, 1);
    assert.equal(r.verdict.status, 'unreachable');
    assert.deepEqual(
      r.candidates.map((c) => c.sent),
      [true, false, false, false],
    );
    assert.ok(r.durationMs < 3000, `took ${r.durationMs} ms (a timeout would be 5000)`);
  });

  test('the terminal report: the candidates, the verdict and next steps, no colour when stdout is not a TTY', async () => {
    const out = await diagnose(['bakend', '--resolv-conf', pod, ...at(cluster), '--kubeconfig', kubeconfig]);
    assert.equal(out.code, 1);
    assert.ok(!out.stdout.includes('\x1b['), `no colour escapes: ${out.stdout}`);
    assert.match(out.stdout, /Search order: "bakend" has 0 dots, fewer than ndots:5/);
    assert.match(out.stdout, /1\. bakend\.default\.svc\.cluster\.local\./);
    assert.match(out.stdout, /Verdict: NXDOMAIN/);
    assert.match(out.stdout, /EAI_NONAME "Name or service not known"/);
    assert.match(out.stdout, /did you mean backend\.default\?/);
    assert.match(out.stdout, /ok {4}service/);
  });

  test('usage errors exit 2 with the usage; --help exits 0', async () => {
    for (const args of [
      [],
      ['a', 'b'],
      ['backend', '--type', 'BOGUS'],
      ['backend', '--server', 'dns.example'],
      ['backend', '--timeout', 'soon'],
      ['backend', '--bogus'],
    ]) {
      const out = await diagnose(args);
      assert.equal(out.code, 2, `${args.join(' ')}: ${out.stderr}`);
      assert.match(out.stderr, /^clusterdns diagnose: /);
    }
    const missing = await diagnose(['backend', '--resolv-conf', join(dir, 'nope.conf')]);
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /cannot read .*nope\.conf: no such file/);
    const help = await diagnose(['--help']);
    assert.equal(help.code, 0);
    assert.match(help.stdout, /Usage: clusterdns diagnose NAME/);
  });

  test('a CNAME with no address behind it is not resolved: NODATA, exit 1, the target named', async () => {
    const { r, code } = await report([
      'alias.example.com.',
      '--resolv-conf',
      pod,
      '--server',
      `127.0.0.1:${upstream.port}`,
    ]);
    assert.equal(code, 1);
    assert.equal(r.verdict.status, 'nodata');
    // What glibc's getaddrinfo(AF_UNSPEC) returns for it; with one family it is EAI_NODATA.
    assert.equal(r.verdict.applicationError!.gai, 'EAI_NONAME');
    assert.equal(
      (
        await report([
          'alias.example.com.',
          '--type',
          'A',
          '--resolv-conf',
          pod,
          '--server',
          `127.0.0.1:${upstream.port}`,
        ])
      ).r.verdict.applicationError!.gai,
      'EAI_NODATA',
    );
    assert.equal(
      r.verdict.summary,
      'alias.example.com. is a CNAME to gone.example.net. and no A/AAAA record came with it: the resolver stops there and the application gets no address',
    );
    assert.match(r.candidates[0]!.then!, /only a CNAME: the resolver stops here, with no address/);
    assert.ok(
      r.verdict.next.some((n) => n.startsWith('ask for the target itself: dig gone.example.net.')),
      r.verdict.next.join('\n'),
    );
  });

  test('an external name that does not exist gets no kubectl hint about Services', async () => {
    const { r, code } = await report(['example.com', '--resolv-conf', pod, ...at(cluster)]);
    assert.equal(code, 1);
    assert.equal(r.verdict.status, 'nxdomain');
    assert.ok(!r.verdict.next.some((n) => n.includes('kubectl get svc')), r.verdict.next.join('\n'));
    assert.ok(r.verdict.next.some((n) => n.includes('the upstream the cluster DNS forwards to')));
    // A two-label name that is not a public domain is still read as service.namespace.
    const svc = await report(['bakend.default', '--resolv-conf', pod, ...at(cluster)]);
    assert.ok(svc.r.verdict.next.some((n) => n.includes('kubectl get svc -A | grep bakend')));
  });

  test('options attempts:0: nothing is sent, and that is not reported as "connection refused"', async () => {
    const conf = resolvConf('attempts0.conf', `${POD_RESOLV}options attempts:0\n`);
    const { r, code } = await report(['backend', '--resolv-conf', conf, ...at(cluster)]);
    assert.equal(code, 1);
    assert.equal(r.verdict.status, 'error');
    assert.doesNotMatch(r.verdict.summary, /refused|nothing listens/);
    assert.match(r.verdict.summary, /no query was sent \(options attempts:0\)/);
    assert.match(r.verdict.next[0]!, /attempts:0/);
  });

  test('an unknown or misspelt flag is named plainly, with the likely one; --version', async () => {
    for (const flag of ['--typ', '-typ']) {
      const out = await diagnose(['backend', flag, 'A']);
      assert.equal(out.code, 2);
      assert.match(out.stderr, /^clusterdns diagnose: unknown flag --typ \(did you mean --type\?\)\n/);
      assert.doesNotMatch(out.stderr, /positional argument|'-- "/);
    }
    // One Go-style flag reading for every role: -Typ is a long flag here as it is for the server.
    const upper = await diagnose(['backend', '-Typ', 'A']);
    assert.match(upper.stderr, /^clusterdns diagnose: unknown flag --Typ \(did you mean --type\?\)\n/);
    const v = await diagnose(['--version']);
    assert.equal(v.code, 0);
    assert.match(v.stdout, /^clusterdns-\d+\.\d+\.\d+ diagnose\n$/);
  });

  test('README: the demo typo example (`diagnose bakend` against `npm start`) is what the demo gives', async () => {
    const server = demo;
    {
      const out = await diagnose(['bakend', '--resolv-conf', pod, ...at(server)]);
      assert.equal(out.code, 1);
      const readme = readFileSync('src/diagnose/README.md', 'utf8');
      const block =
        /\$ clusterdns diagnose bakend --resolv-conf pod\.conf --server 127\.0\.0\.1:1053\n([\s\S]*?)~~~/.exec(readme);
      assert.ok(block, 'the README shows the demo example');
      const norm = (t: string) =>
        t
          .replaceAll(`127.0.0.1:${server.port}`, '127.0.0.1:1053')
          .replace(/udp [\d.]+ ms/g, 'udp N ms')
          .split('\n');
      const shown = norm(block[1]!).filter((l) => l !== '...' && l !== '');
      const got = norm(out.stdout);
      for (const line of shown)
        assert.ok(got.includes(line), `README line not in the output: ${line}\n---\n${out.stdout}`);
    }
  });

  test('the JSON report has the documented top-level shape', async () => {
    const { r } = await report(['backend', '--resolv-conf', pod, ...at(cluster)]);
    assert.equal(r.version, 1);
    assert.deepEqual(Object.keys(r).sort(), [
      'candidates',
      'cluster',
      'durationMs',
      'name',
      'resolvConf',
      'rule',
      'servers',
      'serversFrom',
      'timeoutMs',
      'types',
      'verdict',
      'version',
    ]);
    assert.deepEqual(Object.keys(r.verdict).sort(), [
      'answers',
      'applicationError',
      'next',
      'notes',
      'resolvedAs',
      'status',
      'suggestions',
      'summary',
    ]);
    assert.deepEqual(Object.keys(r.candidates[0]!).sort(), [
      'elapsedMs',
      'name',
      'outcome',
      'phase',
      'queries',
      'reason',
      'sent',
      'skipped',
      'then',
    ]);
    assert.deepEqual(r.resolvConf.options, ['ndots:5', 'timeout:5', 'attempts:2']);
    assert.equal(r.serversFrom, '--server');
  });
});
