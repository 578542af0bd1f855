// resolv.conf read as glibc reads it, problems reported with their line.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { optionsText, parseResolvConf, resolvConfNameservers } from '../../src/sys/resolvconf.js';

const KUBELET = `search default.svc.cluster.local svc.cluster.local cluster.local
nameserver 10.96.0.10
options ndots:5
`;

describe('resolv.conf parser', () => {
  test("a kubelet-written pod resolv.conf: nameserver, search list, ndots, glibc's defaults for the rest", () => {
    const c = parseResolvConf(KUBELET, '/etc/resolv.conf');
    assert.deepEqual(c.nameservers, ['10.96.0.10']);
    assert.deepEqual(c.search, ['default.svc.cluster.local', 'svc.cluster.local', 'cluster.local']);
    assert.equal(c.searchSource, 'search');
    assert.equal(c.ndots, 5);
    assert.equal(c.timeout, 5);
    assert.equal(c.attempts, 2);
    assert.deepEqual(c.problems, []);
    assert.equal(optionsText(c), 'ndots:5 timeout:5 attempts:2');
  });

  test('every option glibc acts on is read', () => {
    const c = parseResolvConf(
      'nameserver 10.0.0.1\noptions timeout:1 attempts:3 rotate single-request single-request-reopen use-vc no-tld-query edns0 trust-ad no-aaaa\noptions ndots:2 debug\n',
      'f',
    );
    assert.equal(c.ndots, 2);
    assert.equal(c.timeout, 1);
    assert.equal(c.attempts, 3);
    for (const k of [
      'rotate',
      'singleRequest',
      'singleRequestReopen',
      'useVc',
      'noTldQuery',
      'edns0',
      'trustAd',
      'noAaaa',
    ] as const)
      assert.equal(c[k], true, k);
    assert.deepEqual(c.inertOptions, ['debug']);
    assert.deepEqual(c.problems, []);
  });

  test("values beyond glibc's limits are capped, and the cap is reported", () => {
    const c = parseResolvConf('nameserver 10.0.0.1\noptions ndots:20 timeout:60 attempts:9\n', 'f');
    assert.equal(c.ndots, 15);
    assert.equal(c.timeout, 30);
    assert.equal(c.attempts, 5);
    assert.equal(c.problems.length, 3);
    assert.ok(c.problems.every((p) => p.line === 2));
  });

  test('a non-number option value is read as atoi() would, with a warning', () => {
    const c = parseResolvConf('nameserver 10.0.0.1\noptions ndots:five\n', 'f');
    assert.equal(c.ndots, 0);
    assert.match(c.problems[0]!.message, /not a number/);
  });

  test('attempts:0 is reported: glibc then never sends a query', () => {
    const c = parseResolvConf('nameserver 10.0.0.1\noptions attempts:0\n', 'f');
    assert.equal(c.attempts, 0);
    assert.ok(c.problems.some((p) => /no query at all/.test(p.message)));
  });

  test('only the first three nameservers are used; host names and bad addresses are ignored with the line', () => {
    const c = parseResolvConf(
      'nameserver dns.example.com\nnameserver 10.0.0.1\nnameserver fe80::1%eth0\nnameserver 10.0.0.3\nnameserver 10.0.0.4\n',
      'f',
    );
    assert.deepEqual(c.nameservers, ['10.0.0.1', 'fe80::1%eth0', '10.0.0.3']);
    assert.deepEqual(
      c.problems.map((p) => p.line),
      [1, 5],
    );
  });

  test('no nameserver line: glibc asks 127.0.0.1', () => {
    const c = parseResolvConf('search example.com\n', 'f');
    assert.deepEqual(c.nameservers, ['127.0.0.1']);
    assert.equal(c.problems[0]!.line, 0);
  });

  test('the last search or domain line wins, and domain takes one domain', () => {
    const a = parseResolvConf('search a.example b.example\ndomain c.example d.example\nnameserver 10.0.0.1\n', 'f');
    assert.deepEqual(a.search, ['c.example']);
    assert.equal(a.searchSource, 'domain');
    assert.match(a.problems[0]!.message, /replaces the search line/);
    const b = parseResolvConf('domain c.example\nsearch a.example. b.example\nnameserver 10.0.0.1\n', 'f');
    assert.deepEqual(b.search, ['a.example', 'b.example'], 'trailing dots are dropped');
  });

  test('comments only at the start of a line: a # later on a search line is a domain', () => {
    const c = parseResolvConf('# generated\n; also a comment\nsearch a.example # note\nnameserver 10.0.0.1\n', 'f');
    assert.deepEqual(c.search, ['a.example', '#', 'note']);
    assert.ok(c.problems.some((p) => p.line === 3 && /comments must start the line/.test(p.message)));
  });

  test('an indented line is ignored, as glibc does, and said so', () => {
    const c = parseResolvConf('  nameserver 10.0.0.9\nnameserver 10.0.0.1\n', 'f');
    assert.deepEqual(c.nameservers, ['10.0.0.1']);
    assert.equal(c.problems[0]!.line, 1);
    assert.match(c.problems[0]!.message, /white space/);
  });

  test("without search or domain, the host name's domain is the search list", () => {
    assert.deepEqual(parseResolvConf('nameserver 10.0.0.1\n', 'f', { hostname: 'node1.corp.example' }).search, [
      'corp.example',
    ]);
    assert.deepEqual(parseResolvConf('nameserver 10.0.0.1\n', 'f', { hostname: 'node1' }).search, []);
  });

  test('unknown keywords and options are reported, CRLF line ends are accepted', () => {
    const c = parseResolvConf('nameserver 10.0.0.1\r\nsearchh x\r\noptions ndots:3 bogus\r\n', 'f');
    assert.equal(c.ndots, 3);
    assert.deepEqual(
      c.problems.map((p) => p.line),
      [2, 3],
    );
  });

  test("one file, two readers: glibc's (diagnose) and CoreDNS forward's (forward, nodecache)", () => {
    const text =
      '# comment\n; comment\nnameserver 10.0.0.1 # trailing comment\n\tnameserver 10.0.0.2\nnameserver fe80::1%eth0\nnameserver 10.0.0.3\nnameserver 10.0.0.4\nnameserver 10.0.0.5;x\nnameserver\n';
    const glibc = parseResolvConf(text, 'f');
    assert.deepEqual(glibc.nameservers, ['10.0.0.1', 'fe80::1%eth0', '10.0.0.3']);
    const go = resolvConfNameservers(text);
    assert.deepEqual(go.nameservers, ['10.0.0.1', '10.0.0.2', 'fe80::1%eth0', '10.0.0.3', '10.0.0.4']);
    assert.deepEqual(go.problems, [
      { line: 8, message: '"10.0.0.5;x" is not an IP address' },
      { line: 9, message: 'nameserver without an address' },
    ]);
  });

  test('a comment glued to a nameserver address makes the line unusable, as in glibc', () => {
    const c = parseResolvConf('nameserver 10.0.0.9#dns\nnameserver 10.0.0.1\n', 'f');
    assert.deepEqual(c.nameservers, ['10.0.0.1']);
    assert.equal(c.problems[0]!.line, 1);
    assert.match(c.problems[0]!.message, /"10\.0\.0\.9#dns" is not an IP address/);
  });

  test('no nameserver line: the forward reader finds none (forward then refuses the file) where glibc asks 127.0.0.1', () => {
    assert.deepEqual(resolvConfNameservers('search a.example\noptions ndots:5\n').nameservers, []);
    assert.deepEqual(parseResolvConf('search a.example\n', 'f').nameservers, ['127.0.0.1']);
  });
});
