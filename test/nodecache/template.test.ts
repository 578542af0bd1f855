import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEFAULT_BASE_COREFILE, renderCorefile, type TemplateValues } from '../../src/nodecache/template.js';
import { generateCorefile, type GeneratorOptions } from '../../src/nodecache/generator.js';
import { parseKubeDnsConfig } from '../../src/nodecache/kubedns.js';
import { parseConfig } from '../../src/server/runtime.js';

const iptablesMode: TemplateValues = {
  localIPs: ['169.254.20.10', '10.96.0.10'],
  clusterDns: '10.96.0.11',
  upstreamServers: ['192.0.2.53', '192.0.2.54'],
  upstreamFromKubeDns: false,
  dnsDomain: 'cluster.local',
  stubDomains: new Map(),
  dnsPort: 53,
};

/** The directive lines of the server block for `zone` (trimmed). */
function block(corefile: string, zone: string): string[] {
  const start = corefile.indexOf(`${zone} {`);
  assert.ok(start >= 0, `no block ${zone} in\n${corefile}`);
  const lines: string[] = [];
  let depth = 0;
  for (const line of corefile.slice(start).split('\n')) {
    if (line.includes('{')) depth++;
    if (line.includes('}')) depth--;
    lines.push(line.trim());
    if (depth === 0) break;
  }
  return lines;
}

test("the built-in template is the addon's: four blocks, cluster zone cached 30 s/5 s and forwarded over TCP", () => {
  const out = renderCorefile(DEFAULT_BASE_COREFILE, iptablesMode);
  const cluster = block(out, 'cluster.local:53');
  assert.ok(cluster.includes('success 9984 30'));
  assert.ok(cluster.includes('denial 9984 5'));
  assert.ok(cluster.includes('forward . 10.96.0.11 {'));
  assert.ok(cluster.includes('force_tcp'));
  assert.ok(cluster.includes('prometheus :9253'));
  for (const rev of ['in-addr.arpa:53', 'ip6.arpa:53']) {
    const b = block(out, rev);
    assert.ok(b.includes('cache 30'));
    assert.ok(b.includes('force_tcp'));
    assert.ok(b.includes('forward . 10.96.0.11 {'));
  }
  const dot = block(out, '.:53');
  assert.ok(dot.includes('cache 30'));
  assert.ok(dot.includes('forward . 192.0.2.53 192.0.2.54'), dot.join('\n'));
  assert.ok(!dot.includes('force_tcp'));
  for (const b of [cluster, dot])
    for (const p of ['errors', 'reload', 'loop']) assert.ok(b.includes(p), `${p} missing`);
  assert.doesNotMatch(out, /__PILLAR__/);
});

test('iptables mode: bind both local IPs; health on the link-local IP only', () => {
  const out = renderCorefile(DEFAULT_BASE_COREFILE, iptablesMode);
  assert.equal(out.match(/bind 169\.254\.20\.10 10\.96\.0\.10\n/g)?.length, 4);
  assert.match(out, /health 169\.254\.20\.10:8080\n/);
});

test('IPVS mode (one -localip): bind and health use only the link-local IP, no trailing blanks', () => {
  const out = renderCorefile(DEFAULT_BASE_COREFILE, { ...iptablesMode, localIPs: ['169.254.20.10'] });
  assert.equal(out.match(/bind 169\.254\.20\.10\n/g)?.length, 4);
  assert.doesNotMatch(out, /10\.96\.0\.10/);
  assert.doesNotMatch(out, /[ \t]\n/);
});

test('IPv6 local IPs are bracketed where a port follows', () => {
  const out = renderCorefile(DEFAULT_BASE_COREFILE, { ...iptablesMode, localIPs: ['fd00::10', 'fd00:10:96::a'] });
  assert.match(out, /health \[fd00::10\]:8080/);
  assert.match(out, /bind fd00::10 fd00:10:96::a\n/);
});

test('a template already sed-ed by the addon installer keeps its addresses; a lone __PILLAR__LOCAL__DNS__ gets them all', () => {
  const sedded = 'cluster.local:53 {\n    bind 169.254.20.10 10.96.0.10\n    forward . __PILLAR__CLUSTER__DNS__\n}\n';
  assert.equal(
    renderCorefile(sedded, iptablesMode),
    'cluster.local:53 {\n    bind 169.254.20.10 10.96.0.10\n    forward . 10.96.0.11\n}\n',
  );
  const lone = '.:53 {\n    bind __PILLAR__LOCAL__DNS__\n    forward . __PILLAR__UPSTREAM__SERVERS__\n}\n';
  assert.match(renderCorefile(lone, iptablesMode), /bind 169\.254\.20\.10 10\.96\.0\.10\n/);
});

test('kube-dns upstreamNameservers replace the node resolvers and lose force_tcp; stubDomains become blocks', () => {
  const base = '.:53 {\n    forward . __PILLAR__UPSTREAM__SERVERS__ {\n            force_tcp\n    }\n}\n';
  const out = renderCorefile(base, {
    ...iptablesMode,
    upstreamServers: ['203.0.113.1'],
    upstreamFromKubeDns: true,
    stubDomains: new Map([['acme.local', ['10.150.0.1', '10.150.0.2:5353']]]),
  });
  assert.match(out, /forward \. 203\.0\.113\.1\n\}/);
  assert.doesNotMatch(out, /force_tcp/);
  assert.match(
    out,
    /acme\.local:53 \{\n {4}errors\n {4}cache 30\n {4}bind 169\.254\.20\.10 10\.96\.0\.10\n {4}forward \. 10\.150\.0\.1 10\.150\.0\.2:5353\n\}\n/,
  );
});

test('kube-dns ConfigMap values are validated; bad entries are reported and skipped', () => {
  const c = parseKubeDnsConfig(
    new Map([
      [
        'stubDomains',
        '{"acme.local": ["1.2.3.4"], "bad domain": ["1.2.3.4"], "x.local": ["not-an-ip"], "y.local": []}',
      ],
      ['upstreamNameservers', '["8.8.8.8", "[2001:db8::1]:53"]'],
      ['federations', '{"myfed": "example.com"}'],
    ]),
  );
  assert.deepEqual([...c.stubDomains], [['acme.local', ['1.2.3.4']]]);
  assert.deepEqual(c.upstreamNameservers, ['8.8.8.8', '[2001:db8::1]:53']);
  assert.equal(c.problems.length, 4, c.problems.join('\n'));
  assert.match(parseKubeDnsConfig(new Map([['upstreamNameservers', '{']])).problems[0]!, /not JSON/);
});

function options(dir: string, over: Partial<GeneratorOptions> = {}): GeneratorOptions {
  return {
    baseCorefile: join(dir, 'Corefile.base'),
    baseCorefileExplicit: false,
    resolvConf: join(dir, 'resolv.conf'),
    kubeDnsConfigDir: '',
    localIPs: ['169.254.20.10', '10.96.0.10'],
    clusterDns: '10.96.0.11',
    dnsDomain: 'cluster.local',
    dnsPort: 53,
    ...over,
  };
}

test('the generated Corefile uses the resolv.conf nameservers and is one clusterdns accepts', () => {
  const dir = mkdtempSync(join(tmpdir(), 'nodecache-gen-'));
  writeFileSync(
    join(dir, 'resolv.conf'),
    '# node resolvers\nsearch example.internal\nnameserver 192.0.2.53\nnameserver 192.0.2.54\noptions ndots:1\n',
  );
  const g = generateCorefile(options(dir));
  assert.equal(g.baseFrom, 'built-in');
  assert.match(g.text, /forward \. 192\.0\.2\.53 192\.0\.2\.54\n/);
  const cfg = parseConfig({ file: join(dir, 'Corefile'), text: g.text, builtin: false }, 53);
  assert.deepEqual(
    cfg.blocks.map((b) => b.keys.map((k) => `${k.zone}:${k.port}`).join(' ')),
    ['cluster.local.:53', 'in-addr.arpa.:53', 'ip6.arpa.:53', '.:53'],
  );
});

test('generator errors name the file: no nameserver, missing explicit template, unknown placeholder; a loopback resolver is warned about', () => {
  const dir = mkdtempSync(join(tmpdir(), 'nodecache-gen-'));
  writeFileSync(join(dir, 'resolv.conf'), 'search x\n');
  assert.throws(() => generateCorefile(options(dir)), /resolv\.conf has no usable nameserver/);
  writeFileSync(join(dir, 'resolv.conf'), 'nameserver 127.0.0.53\n');
  assert.match(generateCorefile(options(dir)).warnings.join('\n'), /127\.0\.0\.53, a local stub/);
  assert.throws(
    () => generateCorefile(options(dir, { baseCorefileExplicit: true })),
    /-basecorefile .*Corefile\.base does not exist/,
  );
  writeFileSync(join(dir, 'Corefile.base'), '.:53 {\n    forward . __PILLAR__NOPE__\n}\n');
  assert.throws(() => generateCorefile(options(dir)), /unknown placeholder __PILLAR__NOPE__/);
});

test('fingerprint changes when the template, resolv.conf or kube-dns ConfigMap changes, and only then', () => {
  const dir = mkdtempSync(join(tmpdir(), 'nodecache-gen-'));
  const cm = join(dir, 'kube-dns');
  writeFileSync(join(dir, 'resolv.conf'), 'nameserver 192.0.2.53\n');
  writeFileSync(join(dir, 'Corefile.base'), DEFAULT_BASE_COREFILE);
  const o = options(dir, { kubeDnsConfigDir: cm });
  const a = generateCorefile(o).fingerprint;
  assert.equal(generateCorefile(o).fingerprint, a);
  writeFileSync(join(dir, 'resolv.conf'), 'nameserver 192.0.2.54\n');
  const b = generateCorefile(o).fingerprint;
  assert.notEqual(b, a);
  writeFileSync(join(dir, 'Corefile.base'), DEFAULT_BASE_COREFILE + '\n');
  const c = generateCorefile(o).fingerprint;
  assert.notEqual(c, b);
  // The ConfigMap directory appearing with an upstreamNameservers key.
  mkdirSync(cm, { recursive: true });
  writeFileSync(join(cm, 'upstreamNameservers'), '["203.0.113.9"]');
  const g = generateCorefile(o);
  assert.notEqual(g.fingerprint, c);
  assert.match(g.text, /forward \. 203\.0\.113\.9\n/);
});
