import { test } from 'node:test';
import assert from 'node:assert/strict';
import { NodeCacheFlagError, parseNodeCacheFlags, parseSyncInterval } from '../../src/nodecache/flags.js';

const none = () => false;
const parse = (...argv: string[]) => parseNodeCacheFlags(argv, none);

test('the addon DaemonSet args parse with upstream defaults for the rest', () => {
  const f = parse(
    '-localip',
    '169.254.20.10,10.96.0.10',
    '-conf',
    '/etc/Corefile',
    '-upstreamsvc',
    'kube-dns-upstream',
    '-pidfile',
    '/tmp/node-cache.pid',
  );
  assert.deepEqual(f.localIPs, ['169.254.20.10', '10.96.0.10']);
  assert.equal(f.family, 4);
  assert.equal(f.corefile, '/etc/Corefile');
  assert.equal(f.upstreamService, 'kube-dns-upstream');
  assert.equal(f.pidfile, '/tmp/node-cache.pid');
  assert.equal(f.setupInterface, true);
  assert.equal(f.setupIptables, true);
  assert.equal(f.interfaceName, 'nodelocaldns');
  assert.equal(f.syncIntervalMs, 60_000);
  assert.equal(f.healthPort, 8080);
  assert.equal(f.dnsPort, 53);
  assert.equal(f.metricsListenAddress, '0.0.0.0:9353');
  assert.equal(f.baseCorefile, '/etc/coredns/Corefile.base');
  assert.equal(f.baseCorefileExplicit, false);
  assert.equal(f.skipTeardown, false);
  assert.equal(f.kubeDnsConfigDir, '');
  assert.equal(f.resolvConf, '/etc/resolv.conf');
  assert.equal(f.clusterDomain, 'cluster.local');
});

test('Go flag syntax: -name=value, --name, and booleans only as -name or -name=false', () => {
  const f = parse(
    '--localip=169.254.20.10',
    '-setupinterface=false',
    '-setupiptables=0',
    '-skipteardown',
    '-health-port=8081',
    '-interfacename',
    'nlcache0',
  );
  assert.equal(f.setupInterface, false);
  assert.equal(f.setupIptables, false);
  assert.equal(f.skipTeardown, true);
  assert.equal(f.healthPort, 8081);
  assert.equal(f.interfaceName, 'nlcache0');
  assert.throws(() => parse('-localip', '169.254.20.10', '-setupinterface', 'false'), /unexpected argument "false"/);
  assert.throws(() => parse('-localip', '169.254.20.10', '-skipteardown=maybe'), /invalid boolean value "maybe"/);
  assert.throws(() => parse('-localip', '169.254.20.10', '-nosuch'), /flag provided but not defined: -nosuch/);
  assert.throws(() => parse('-localip'), /flag needs an argument: -localip/);
});

test("-conf wins over -corefile, which is upstream's older name for the generated file", () => {
  assert.equal(parse('-localip', '169.254.20.10', '-corefile', '/a').corefile, '/a');
  assert.equal(parse('-localip', '169.254.20.10', '-corefile', '/a', '-conf', '/b').corefile, '/b');
});

test('-localip is required, every entry an IP, one family, no repeats', () => {
  assert.throws(() => parse(), /-localip is required/);
  assert.throws(() => parse('-localip', '169.254.20.10,kube-dns'), /"kube-dns" is not an IP address/);
  assert.throws(() => parse('-localip', '169.254.20.10,fd00::10'), /mixes IPv4 and IPv6/);
  assert.throws(() => parse('-localip', '169.254.20.10,169.254.20.10'), /given twice/);
  const v6 = parse('-localip', 'fd00::10,fd00:10:96::a');
  assert.equal(v6.family, 6);
  assert.deepEqual(v6.localIPs, ['fd00::10', 'fd00:10:96::a']);
});

test('-syncinterval takes Go durations and plain seconds, unlike upstream which only took nanoseconds', () => {
  assert.equal(parseSyncInterval('60').ms, 60_000);
  assert.equal(parseSyncInterval('60s').ms, 60_000);
  assert.equal(parseSyncInterval('1m30s').ms, 90_000);
  assert.equal(parseSyncInterval('2.5').ms, 2500);
  assert.equal(parseSyncInterval('1s').ms, 1000);
  // Upstream's only working spelling keeps its meaning (seconds), with a note saying so.
  const ns = parseSyncInterval('30ns');
  assert.equal(ns.ms, 30_000);
  assert.match(ns.note ?? '', /read as 30s/);
  assert.equal(parseSyncInterval('30s').note, undefined);
  assert.throws(() => parseSyncInterval('500ms'), /too short/);
  assert.throws(() => parseSyncInterval('soon'), NodeCacheFlagError);
  assert.throws(() => parseSyncInterval('48h'), /too long/);
  assert.equal(parse('-localip', '169.254.20.10', '-syncinterval', '5').syncIntervalMs, 5000);
});

test('values that would reach ip/iptables or the API are validated first', () => {
  assert.throws(() => parse('-localip', '169.254.20.10', '-interfacename', 'x; rm -rf /'), /-interfacename/);
  assert.throws(() => parse('-localip', '169.254.20.10', '-interfacename', 'averyveryverylongname'), /-interfacename/);
  assert.throws(() => parse('-localip', '169.254.20.10', '-health-port', '80a'), /-health-port/);
  assert.throws(() => parse('-localip', '169.254.20.10', '-dns.port', '70000'), /-dns.port/);
  assert.throws(() => parse('-localip', '169.254.20.10', '-upstreamsvc', 'Kube_DNS'), /-upstreamsvc/);
  assert.equal(
    parse('-localip', '169.254.20.10', '-upstreamsvc', 'kube-system/kube-dns-upstream').upstreamService,
    'kube-system/kube-dns-upstream',
  );
  assert.throws(() => parse('-localip', '169.254.20.10', '-metrics-listen-address', 'nope'), /HOST:PORT/);
  assert.equal(parse('-localip', '169.254.20.10', '-metrics-listen-address', '').metricsListenAddress, '');
});

test('-kubednscm defaults to /etc/kube-dns only when that directory exists, as upstream', () => {
  assert.equal(
    parseNodeCacheFlags(['-localip', '169.254.20.10'], (p) => p === '/etc/kube-dns').kubeDnsConfigDir,
    '/etc/kube-dns',
  );
  assert.equal(parse('-localip', '169.254.20.10', '-kubednscm', '/cm').kubeDnsConfigDir, '/cm');
});

test('-h and -version need no -localip', () => {
  assert.equal(parse('-h').help, true);
  assert.equal(parse('-version').version, true);
});
