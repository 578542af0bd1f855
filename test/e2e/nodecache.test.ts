// `clusterdns nodecache` for real, inside network namespaces this test creates:
//
//   [cdns-test-X-node]  agent (nodecache) on interface nodelocaldns: 169.254.20.10, 10.96.0.10
//         cdv0 10.250.N.1/30   ── veth ──   cdv1 10.250.N.2/30   [cdns-test-X-dns]
//         clients: dig via `ip netns exec`                       cluster DNS: clusterdns serving
//         kube-proxy stand-in: nat OUTPUT DNAT                   the demo cluster on 10.250.N.2:53
//           10.96.0.10:53 → 10.250.N.2:53
//
// Only those addresses are used, only inside those namespaces; after() deletes both.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { randomInt } from 'node:crypto';
import { BIN } from '../helpers/server.js';
import { DEFAULT_BASE_COREFILE } from '../../src/nodecache/template.js';
import { Iptables, nodeCacheRules } from '../../src/nodecache/iptables.js';
import { promtoolProblems } from '../helpers/promtool.js';
import { linkNamespaces, netnsUnavailable, randomTag, spawnIn, TestNetns, type NsProcess } from '../nodecache/netns.js';

const unavailable = await netnsUnavailable();
if (unavailable) process.stderr.write(`SKIP nodecache namespace tests: ${unavailable}\n`);

const LINK_LOCAL = '169.254.20.10';
const KUBE_DNS = '10.96.0.10';
const COMMENT = 'NodeLocal DNS Cache';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(what: string, fn: () => Promise<boolean>, timeoutMs = 8000): Promise<void> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    if (await fn().catch(() => false)) return;
    if (Date.now() > end) throw new Error(`timed out: ${what}`);
    await sleep(50);
  }
}

describe('clusterdns nodecache in a test network namespace', { skip: unavailable ?? false, timeout: 120_000 }, () => {
  const tag = randomTag();
  const subnet = `10.250.${randomInt(0, 256)}.${randomInt(0, 64) * 4}`;
  const base = subnet.split('.').map(Number);
  const nodeAddr = `${base[0]}.${base[1]}.${base[2]}.${base[3]! + 1}`;
  const dnsAddr = `${base[0]}.${base[1]}.${base[2]}.${base[3]! + 2}`;
  const dir = mkdtempSync(join(tmpdir(), 'nodecache-e2e-'));
  const baseCorefile = join(dir, 'Corefile.base');
  const pidfile = join(dir, 'node-cache.pid');
  let node: TestNetns;
  let dns: TestNetns;
  let cluster: NsProcess;
  let agent: NsProcess | null = null;

  const env: NodeJS.ProcessEnv = { ...process.env, KUBE_DNS_UPSTREAM_SERVICE_HOST: dnsAddr };
  delete env.KUBERNETES_SERVICE_HOST;
  delete env.KUBERNETES_SERVICE_PORT;

  const agentArgs = (localIPs: string, extra: string[] = []) => [
    BIN,
    'nodecache',
    '-localip',
    localIPs,
    '-conf',
    join(dir, 'Corefile'),
    '-basecorefile',
    baseCorefile,
    '-upstreamsvc',
    'kube-dns-upstream',
    '-resolvconf',
    join(dir, 'resolv.conf'),
    '-syncinterval',
    '1s',
    '-pidfile',
    pidfile,
    ...extra,
  ];

  /** Starts the agent and resolves when its pidfile appears (rules are in place by then). */
  async function startAgent(localIPs = `${LINK_LOCAL},${KUBE_DNS}`, extra: string[] = []): Promise<NsProcess> {
    const p = spawnIn(node, process.execPath, agentArgs(localIPs, extra), env);
    agent = p;
    await until(
      'the agent writes its pidfile',
      async () => {
        if (p.proc.exitCode !== null) throw new Error(`agent exited:\n${p.output()}`);
        return existsSync(pidfile) && readFileSync(pidfile, 'utf8').trim() === String(p.proc.pid);
      },
      15_000,
    ).catch((e: Error) => {
      throw new Error(`${e.message}\n${p.output()}`);
    });
    return p;
  }

  /** Our rules in the node namespace, as iptables-save prints them, prefixed by table. */
  async function ourRules(): Promise<string[]> {
    const out = await node.must('iptables-save', []);
    let table = '';
    const rules: string[] = [];
    for (const line of out.split('\n')) {
      if (line.startsWith('*')) table = line.slice(1);
      else if (line.startsWith('-A') && line.includes(COMMENT)) rules.push(`${table} ${line}`);
    }
    return rules;
  }

  async function dig(server: string, name: string, ...opts: string[]): Promise<string[]> {
    const r = await node.exec('dig', [`@${server}`, '+tries=1', '+time=2', '+short', ...opts, name, 'A']);
    if (r.code !== 0) throw new Error(`dig @${server} ${name}: exit ${r.code}: ${r.stdout}${r.stderr}`);
    return r.stdout.trim().split('\n').filter(Boolean);
  }

  async function linkInfo(): Promise<{ kind: string; addrs: string[] } | null> {
    const r = await node.exec('ip', ['-j', '-d', 'addr', 'show', 'dev', 'nodelocaldns']);
    if (r.code !== 0) return null;
    const [l] = JSON.parse(r.stdout) as Array<{
      linkinfo?: { info_kind?: string };
      addr_info: Array<{ family: string; local: string }>;
    }>;
    return {
      kind: l?.linkinfo?.info_kind ?? '',
      addrs: (l?.addr_info ?? [])
        .filter((a) => a.family === 'inet')
        .map((a) => a.local)
        .sort(),
    };
  }

  /** Lines the cluster DNS logged for `name` with transport `proto`. */
  const upstreamLog = (name: string, proto: 'udp' | 'tcp') =>
    cluster
      .output()
      .split('\n')
      .filter((l) => l.includes(`"A IN ${name}. ${proto} `));

  before(async () => {
    node = await TestNetns.create(`cdns-test-${tag}-node`);
    dns = await TestNetns.create(`cdns-test-${tag}-dns`);
    await linkNamespaces(node, dns, `${nodeAddr}/30`, `${dnsAddr}/30`);
    // Everything the node sends goes to the cluster-DNS namespace, which forwards nothing.
    await node.must('ip', ['route', 'add', 'default', 'via', dnsAddr]);
    // kube-proxy (iptables mode) stand-in: the kube-dns ClusterIP is DNATed to its endpoint.
    // It also turns conntrack on in this namespace, as on a real node.
    for (const proto of ['udp', 'tcp']) {
      await node.must('iptables', [
        '-w',
        '5',
        '-t',
        'nat',
        '-A',
        'OUTPUT',
        '-d',
        `${KUBE_DNS}/32`,
        '-p',
        proto,
        '--dport',
        '53',
        '-j',
        'DNAT',
        '--to-destination',
        `${dnsAddr}:53`,
      ]);
    }
    await node.must('iptables', [
      '-w',
      '5',
      '-A',
      'INPUT',
      '-m',
      'conntrack',
      '--ctstate',
      'ESTABLISHED,RELATED',
      '-j',
      'ACCEPT',
    ]);

    writeFileSync(
      join(dir, 'cluster.Corefile'),
      `.:53 {
    bind ${dnsAddr}
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        manifests ${resolve('examples/demo/cluster.yaml')}
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
    whoami
    errors
    log
}
`,
    );
    cluster = spawnIn(dns, process.execPath, [BIN, '-conf', join(dir, 'cluster.Corefile'), '-workers', '1'], env);
    await cluster.waitFor(/clusterdns-\d/, 15_000);
    writeFileSync(join(dir, 'resolv.conf'), `# the node's resolvers\nnameserver ${dnsAddr}\n`);
    writeFileSync(baseCorefile, DEFAULT_BASE_COREFILE);
  });

  after(async () => {
    await agent?.stop('SIGKILL');
    await cluster?.stop();
    await node?.destroy();
    await dns?.destroy();
  });

  test('start-up: interface (bridge where there is no dummy driver) with both IPs, and all 24 rules in place when the pidfile appears', async () => {
    const started = Date.now();
    const a = await startAgent();
    const rules = await ourRules();
    assert.equal(rules.length, 24, rules.join('\n'));
    assert.equal(rules.filter((r) => r.startsWith('raw ') && r.includes('-j NOTRACK')).length, 16);
    assert.equal(rules.filter((r) => r.startsWith('filter ') && r.includes('-j ACCEPT')).length, 8);
    assert.ok(
      rules.every(
        (r) =>
          r.includes('"NodeLocal DNS Cache: skip conntrack"') || r.includes('"NodeLocal DNS Cache: allow DNS traffic"'),
      ),
    );
    assert.ok(Date.now() - started < 10_000, 'rules installed at start-up, not a sync interval later');
    const link = await linkInfo();
    assert.deepEqual(link?.addrs, [KUBE_DNS, LINK_LOCAL]);
    if (link?.kind === 'bridge')
      assert.match(a.output(), /no dummy interface driver .*created nodelocaldns as an empty bridge/);
    else assert.equal(link?.kind, 'dummy');
    const generated = readFileSync(join(dir, 'Corefile'), 'utf8');
    assert.match(generated, new RegExp(`bind ${LINK_LOCAL} ${KUBE_DNS}\\n`));
    assert.match(generated, new RegExp(`forward \\. ${dnsAddr.replaceAll('.', '\\.')} \\{\\n\\s+force_tcp`));
    // Health on the link-local IP; setup-error metrics on :9353 with every label at 0.
    assert.equal((await node.must('curl', ['-s', '--max-time', '3', `http://${LINK_LOCAL}:8080/health`])).trim(), 'OK');
    const metrics = await node.must('curl', ['-s', '--max-time', '3', 'http://127.0.0.1:9353/metrics']);
    for (const t of ['iptables', 'iptables_lock', 'interface_add', 'interface_check', 'configmap']) {
      assert.match(metrics, new RegExp(`coredns_nodecache_setup_errors_total\\{errortype="${t}"\\} 0`));
    }
    // Both of the role's /metrics pass promtool (prom-client's default metrics included).
    assert.equal(await promtoolProblems(metrics), '');
    assert.equal(
      await promtoolProblems(await node.must('curl', ['-s', '--max-time', '3', 'http://127.0.0.1:9253/metrics'])),
      '',
    );
  });

  test('a client in the namespace is answered on 10.96.0.10 and 169.254.20.10; cluster names go upstream over TCP', async () => {
    assert.deepEqual(await dig(KUBE_DNS, 'backend.default.svc.cluster.local'), ['10.96.120.15']);
    assert.deepEqual(await dig(LINK_LOCAL, 'backend.default.svc.cluster.local'), ['10.96.120.15']);
    assert.deepEqual(await dig(LINK_LOCAL, 'frontend.default.svc.cluster.local', '+tcp'), ['10.96.120.16']);
    // Other names go to the node's resolvers (the resolv.conf given), here answered by whoami.
    const who = await node.must('dig', [`@${KUBE_DNS}`, '+tries=1', '+time=2', 'whoami.example', 'A']);
    assert.match(who, /status: NOERROR/);
    assert.match(who, new RegExp(`whoami\\.example\\.\\s+\\d+\\s+IN\\s+A\\s+${nodeAddr.replaceAll('.', '\\.')}`), who);
    assert.ok(upstreamLog('backend.default.svc.cluster.local', 'tcp').length >= 1, cluster.output());
    assert.equal(
      upstreamLog('backend.default.svc.cluster.local', 'udp').length,
      0,
      'force_tcp: nothing reached the cluster DNS over UDP',
    );
    // The agent answered (through its cache), not kube-proxy's DNAT: one upstream query for two lookups.
    assert.equal(upstreamLog('backend.default.svc.cluster.local', 'tcp').length, 1);
  });

  test('client queries to the local IPs leave no conntrack entry, while other traffic is tracked', async () => {
    // Fixed client ports, so the client's flows are told apart from the agent's own start-up probe.
    const udpPort = randomInt(20000, 30000);
    const tcpPort = udpPort + 1;
    for (const server of [KUBE_DNS, LINK_LOCAL]) {
      assert.deepEqual(await dig(server, 'backend.default.svc.cluster.local', '-b', `0.0.0.0#${udpPort}`), [
        '10.96.120.15',
      ]);
      assert.deepEqual(await dig(server, 'backend.default.svc.cluster.local', '+tcp', '-b', `0.0.0.0#${tcpPort}`), [
        '10.96.120.15',
      ]);
    }
    const r = await node.exec('conntrack', ['-L']);
    assert.equal(r.code, 0, `conntrack -L: ${r.stderr}`);
    const entries = r.stdout.split('\n').filter((l) => l.trim() !== '');
    const client = entries.filter((l) =>
      [udpPort, tcpPort].some((p) => l.includes(`sport=${p} `) || l.includes(`dport=${p} `)),
    );
    assert.deepEqual(client, []);
    assert.deepEqual(
      entries.filter((l) => l.includes(`dst=${KUBE_DNS} `)),
      [],
    );
    // Control: the agent's own TCP connection to the cluster DNS is tracked, so conntrack is on.
    assert.ok(
      entries.some((l) => l.startsWith('tcp') && l.includes(`dst=${dnsAddr} `) && l.includes('dport=53 ')),
      entries.join('\n'),
    );
    // And the NOTRACK rules counted the client's packets.
    const raw = await node.must('iptables', ['-w', '5', '-t', 'raw', '-L', 'OUTPUT', '-v', '-n', '-x']);
    const hits = raw
      .split('\n')
      .filter((l) => l.includes(`${KUBE_DNS} `) && l.includes('udp dpt:53') && l.includes('skip conntrack'));
    assert.equal(hits.length, 1, raw);
    assert.ok(Number(hits[0]!.trim().split(/\s+/)[0]) > 0, raw);
  });

  test('a change to the base Corefile is picked up: the Corefile is rewritten and the server reloaded', async () => {
    const changed = DEFAULT_BASE_COREFILE.replace(
      '.:53 {\n    errors\n',
      '.:53 {\n    errors\n    hosts {\n        10.1.2.3 reloaded.nodecache.test\n        fallthrough\n    }\n',
    );
    assert.notEqual(changed, DEFAULT_BASE_COREFILE);
    writeFileSync(baseCorefile, changed);
    await until(
      'the new template answers',
      async () => (await dig(LINK_LOCAL, 'reloaded.nodecache.test')).join() === '10.1.2.3',
    );
    assert.match(readFileSync(join(dir, 'Corefile'), 'utf8'), /10\.1\.2\.3 reloaded\.nodecache\.test/);
    assert.match(agent!.output(), /Corefile\.base changed; wrote .*Corefile, reloading/);
    assert.deepEqual(await dig(KUBE_DNS, 'backend.default.svc.cluster.local'), ['10.96.120.15']);

    // A broken template: logged, counted, and the running configuration keeps answering.
    writeFileSync(baseCorefile, changed.replace('    errors\n', '    errors\n    nosuchplugin\n'));
    await agent!.waitFor(
      /was not loaded \(see the reload error above\); still serving the previous configuration/,
      8000,
    );
    assert.deepEqual(await dig(LINK_LOCAL, 'reloaded.nodecache.test'), ['10.1.2.3']);
    const metrics = await node.must('curl', ['-s', '--max-time', '3', 'http://127.0.0.1:9353/metrics']);
    assert.match(metrics, /coredns_nodecache_setup_errors_total\{errortype="configmap"\} 1/);
    writeFileSync(baseCorefile, changed);
  });

  test('rules and addresses someone deletes are put back within -syncinterval', async () => {
    const ipt = new Iptables(4, node.runner, node.runnerSync);
    const rules = nodeCacheRules([LINK_LOCAL, KUBE_DNS], 53, 8080);
    const victims = [rules[13]!, rules[2]!]; // raw PREROUTING udp → 10.96.0.10; filter INPUT tcp → 169.254.20.10
    for (const v of victims) assert.equal(await ipt.delete(v), 1);
    await node.must('ip', ['addr', 'del', `${KUBE_DNS}/32`, 'dev', 'nodelocaldns']);
    await until(
      'rules re-added',
      async () => (await ourRules()).length === 24 && (await linkInfo())?.addrs.length === 2,
      5000,
    );
    for (const v of victims) assert.equal(await ipt.exists(v), true);
    assert.match(agent!.output(), /Added back nodelocaldns rule - -t raw PREROUTING -p udp -d 10\.96\.0\.10/);
    assert.match(agent!.output(), /Added back interface nodelocaldns address 10\.96\.0\.10/);
    assert.deepEqual(await dig(KUBE_DNS, 'backend.default.svc.cluster.local'), ['10.96.120.15']);
  });

  test('kill -9 leaves the rules behind; a restart keeps exactly one copy of each', async () => {
    const r = await agent!.stop('SIGKILL');
    assert.equal(r.signal, 'SIGKILL');
    assert.equal((await ourRules()).length, 24, 'no teardown after SIGKILL');
    assert.notEqual(await linkInfo(), null);
    await startAgent();
    const rules = await ourRules();
    assert.equal(rules.length, 24, rules.join('\n'));
    assert.equal(new Set(rules).size, 24, 'no rule appears twice');
    assert.deepEqual(await dig(KUBE_DNS, 'backend.default.svc.cluster.local'), ['10.96.120.15']);
  });

  test("SIGTERM removes every rule and the interface; kube-proxy's DNAT then takes 10.96.0.10 to the cluster DNS", async () => {
    const r = await agent!.stop('SIGTERM');
    assert.equal(r.code, 0, agent!.output());
    assert.deepEqual(await ourRules(), []);
    assert.equal(await linkInfo(), null);
    assert.equal(existsSync(pidfile), false);
    assert.match(agent!.output(), /teardown: removed 24 iptables rules/);
    // frontend was only ever sent upstream by the agent, over TCP; now the client's UDP query
    // reaches the cluster DNS itself.
    assert.equal(upstreamLog('frontend.default.svc.cluster.local', 'udp').length, 0);
    assert.deepEqual(await dig(KUBE_DNS, 'frontend.default.svc.cluster.local'), ['10.96.120.16']);
    await until(
      'the cluster DNS logs the UDP query',
      async () => upstreamLog('frontend.default.svc.cluster.local', 'udp').length === 1,
      3000,
    );
  });

  test('-skipteardown leaves rules and interface on exit; the next agent adopts them without duplicates', async () => {
    const a = await startAgent(`${LINK_LOCAL},${KUBE_DNS}`, ['-skipteardown']);
    assert.equal((await a.stop('SIGTERM')).code, 0, a.output());
    assert.match(a.output(), /-skipteardown: leaving the interface and iptables rules in place/);
    assert.equal((await ourRules()).length, 24);
    assert.deepEqual((await linkInfo())?.addrs, [KUBE_DNS, LINK_LOCAL]);
    const b = await startAgent();
    const rules = await ourRules();
    assert.equal(rules.length, 24);
    assert.equal(new Set(rules).size, 24);
    assert.equal((await b.stop('SIGTERM')).code, 0, b.output());
    assert.deepEqual(await ourRules(), []);
    assert.equal(await linkInfo(), null);
  });

  test('IPVS mode (-localip with the link-local IP only): binds and intercepts only 169.254.20.10', async () => {
    const a = await startAgent(LINK_LOCAL);
    const rules = await ourRules();
    assert.equal(rules.length, 12);
    assert.ok(rules.every((r) => r.includes(LINK_LOCAL) && !r.includes(KUBE_DNS)));
    assert.deepEqual((await linkInfo())?.addrs, [LINK_LOCAL]);
    const generated = readFileSync(join(dir, 'Corefile'), 'utf8');
    assert.equal(generated.match(new RegExp(`bind ${LINK_LOCAL}\\n`, 'g'))?.length, 4);
    assert.doesNotMatch(generated, /bind .*10\.96\.0\.10/);
    assert.deepEqual(await dig(LINK_LOCAL, 'kubernetes.default.svc.cluster.local'), ['10.96.0.1']);
    // The ClusterIP stays kube-proxy's: answered by the cluster DNS itself, over UDP.
    const before = upstreamLog('kube-dns.kube-system.svc.cluster.local', 'udp').length;
    assert.deepEqual(await dig(KUBE_DNS, 'kube-dns.kube-system.svc.cluster.local'), [KUBE_DNS]);
    await until(
      'the cluster DNS answered directly',
      async () => upstreamLog('kube-dns.kube-system.svc.cluster.local', 'udp').length > before,
      3000,
    );
    assert.equal((await a.stop('SIGTERM')).code, 0, a.output());
    assert.deepEqual(await ourRules(), []);
  });

  test("a second agent that cannot start (ports held by the first, a typo in its template) leaves the running agent's interface, rules and files alone", async () => {
    const a = await startAgent();
    const rules = await ourRules();
    const link = await linkInfo();
    const generated = readFileSync(join(dir, 'Corefile'), 'utf8');
    assert.equal(rules.length, 24);
    const typo = join(dir, 'typo.Corefile.base');
    writeFileSync(
      typo,
      DEFAULT_BASE_COREFILE.replace('    health __PILLAR__LOCAL__DNS__:8080', '    healt __PILLAR__LOCAL__DNS__:8080'),
    );
    const cases: Array<{ extra: string[]; why: RegExp }> = [
      // Same flags as the running one (its own metrics port off): health, DNS and prometheus are taken.
      {
        extra: ['-metrics-listen-address', ''],
        why: /not starting; nothing on the node was changed: .*169\.254\.20\.10:(53|8080)\/(udp|tcp): address already in use/,
      },
      {
        extra: ['-metrics-listen-address', '', '-basecorefile', typo],
        why: /Corefile:\d+ - Error during parsing: Unknown directive 'healt'/,
      },
    ];
    try {
      for (const c of cases) {
        const b = spawnIn(node, process.execPath, agentArgs(`${LINK_LOCAL},${KUBE_DNS}`, c.extra), env);
        const r = await Promise.race([b.exited, sleep(20_000).then(() => ({ code: -1, signal: null }))]);
        if (r.code === -1) await b.stop('SIGKILL');
        assert.equal(r.code, 1, b.output());
        assert.match(b.output(), c.why);
        assert.deepEqual(await ourRules(), rules, `the running agent's rules are untouched:\n${b.output()}`);
        assert.deepEqual(await linkInfo(), link, 'its interface and addresses too');
        assert.equal(readFileSync(join(dir, 'Corefile'), 'utf8'), generated, 'and the Corefile it serves');
        assert.equal(readFileSync(pidfile, 'utf8').trim(), String(a.proc.pid), 'and its pidfile');
        assert.deepEqual(await dig(LINK_LOCAL, 'kubernetes.default.svc.cluster.local'), ['10.96.0.1']);
      }
    } finally {
      // The next tests start from a clean node either way.
      assert.equal((await a.stop('SIGTERM')).code, 0, a.output());
    }
    assert.deepEqual(await ourRules(), []);
  });

  test('a fatal exit (the loop plugin finding a forwarding loop) still removes the rules and the interface', async () => {
    // The classic node mistake: the node's resolv.conf names the cache itself. (This template
    // has no `cache` in the `.` block: with it, clusterdns's cache coalesces the looping probe
    // with itself and the loop plugin never sees it come back — reported to the cache plugin.)
    writeFileSync(join(dir, 'loop-resolv.conf'), `nameserver ${LINK_LOCAL}\n`);
    const loopBase = join(dir, 'loop.Corefile.base');
    writeFileSync(
      loopBase,
      '.:53 {\n    errors\n    loop\n    bind __PILLAR__LOCAL__DNS__ __PILLAR__DNS__SERVER__\n    forward . __PILLAR__UPSTREAM__SERVERS__\n}\n',
    );
    const p = spawnIn(
      node,
      process.execPath,
      agentArgs(`${LINK_LOCAL},${KUBE_DNS}`, ['-resolvconf', join(dir, 'loop-resolv.conf'), '-basecorefile', loopBase]),
      env,
    );
    agent = p;
    const r = await Promise.race([p.exited, sleep(15_000).then(() => ({ code: -1, signal: null }))]);
    assert.equal(r.code, 1, p.output());
    assert.match(p.output(), /\[FATAL\] plugin\/loop: Loop .* detected for zone "\."/);
    assert.match(p.output(), /teardown on exit: removed \d+ iptables rules and interface nodelocaldns/);
    assert.deepEqual(await ourRules(), []);
    assert.equal(await linkInfo(), null);
  });

  test('a DNS port already taken is found before the node changes: no rules, exit 1, the interface as it was', async () => {
    // Something else already holds 169.254.20.10:53/udp.
    await node.exec('ip', ['link', 'del', 'nodelocaldns']);
    await node.must('ip', ['link', 'add', 'nodelocaldns', 'type', 'bridge']);
    await node.must('ip', ['addr', 'add', `${LINK_LOCAL}/32`, 'dev', 'nodelocaldns']);
    await node.must('ip', ['link', 'set', 'nodelocaldns', 'up']);
    const blocker = spawnIn(node, process.execPath, [
      '-e',
      `require('dgram').createSocket('udp4').bind(53, '${LINK_LOCAL}', () => console.log('bound'))`,
    ]);
    try {
      await blocker.waitFor('bound');
      const p = spawnIn(node, process.execPath, agentArgs(`${LINK_LOCAL},${KUBE_DNS}`), env);
      agent = p;
      const r = await p.exited;
      assert.equal(r.code, 1, p.output());
      assert.match(
        p.output(),
        /not starting; nothing on the node was changed: DNS: cannot listen on 169\.254\.20\.10:53\/udp: address already in use/,
      );
      assert.deepEqual(await ourRules(), []);
      assert.deepEqual(
        await linkInfo(),
        { kind: 'bridge', addrs: [LINK_LOCAL] },
        'the link that was there is left as it was',
      );
      assert.equal(existsSync(pidfile), false);
    } finally {
      await blocker.stop('SIGKILL');
    }
  });
});
