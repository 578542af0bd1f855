// Parsing of `forward FROM TO... { ... }`: CoreDNS's syntax, defaults, and errors that name file:line.
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { parseCorefile } from '../../src/corefile/parser.js';
import { parseForward } from '../../src/plugins/forward/setup.js';
import { buildForwards } from './harness.js';

const dir = mkdtempSync(join(tmpdir(), 'clusterdns-fwd-setup-'));
const corefile = join(dir, 'Corefile');

function parse(body: string) {
  const blocks = parseCorefile(`. {\n${body}\n}\n`, corefile);
  return blocks[0]!.directives.filter((d) => d.name === 'forward').map((d) => parseForward(d, corefile));
}

function parseError(body: string): string {
  try {
    parse(body);
  } catch (e) {
    return (e as Error).message;
  }
  return 'no error';
}

describe('forward setup', () => {
  it('has CoreDNS defaults: random policy, max_fails 2, 0.5 s checks with RD on ".", expire 10 s, 2 s reads', () => {
    const [c] = parse('forward . 10.0.0.1');
    assert.equal(c!.from, '.');
    assert.deepEqual(c!.to, [{ host: '10.0.0.1', port: 53, tls: false, serverName: undefined }]);
    assert.equal(c!.policy, 'random');
    assert.equal(c!.maxFails, 2);
    assert.equal(c!.healthCheckMs, 500);
    assert.equal(c!.healthCheckRecursion, true);
    assert.equal(c!.healthCheckDomain, '.');
    assert.equal(c!.expireMs, 10_000);
    assert.equal(c!.readTimeoutMs, 2000);
    assert.equal(c!.maxConcurrent, 0);
    assert.equal(c!.forceTcp, false);
    assert.equal(c!.preferUdp, false);
  });

  it('reads every TO form: IP, IP:port, [v6]:port, v6, dns://, tls:// (853), tls://IP%name:port', () => {
    const [c] = parse(
      'forward example.ORG 10.0.0.1 10.0.0.2:5353 [::1]:5300 2001:db8::1 dns://10.0.0.3 tls://10.0.0.4 tls://10.0.0.5%dns.test:8853',
    );
    assert.equal(c!.from, 'example.org.');
    assert.deepEqual(
      c!.to.map((u) => [u.host, u.port, u.tls, u.serverName]),
      [
        ['10.0.0.1', 53, false, undefined],
        ['10.0.0.2', 5353, false, undefined],
        ['::1', 5300, false, undefined],
        ['2001:db8::1', 53, false, undefined],
        ['10.0.0.3', 53, false, undefined],
        ['10.0.0.4', 853, true, undefined],
        ['10.0.0.5', 8853, true, 'dns.test'],
      ],
    );
  });

  it('expands a resolv.conf path to its nameserver lines', () => {
    writeFileSync(
      join(dir, 'resolv.conf'),
      '# comment\nsearch svc.cluster.local\nnameserver 10.96.0.10\nnameserver ::1 ; v6\noptions ndots:5\nnameserver bogus\n',
    );
    const [c] = parse(`forward . ${join(dir, 'resolv.conf')}`);
    assert.deepEqual(
      c!.to.map((u) => `${u.host}:${u.port}`),
      ['10.96.0.10:53', '::1:53'],
    );
    const [rel] = parse('forward . resolv.conf');
    assert.equal(rel!.to.length, 2);
  });

  it('reads resolv.conf as CoreDNS does: indented lines and a fourth nameserver count, a comment glued to an address spoils it', () => {
    writeFileSync(
      join(dir, 'resolv-go.conf'),
      'nameserver 10.0.0.1\n  nameserver 10.0.0.2\nnameserver 10.0.0.3\nnameserver 10.0.0.4\nnameserver 10.0.0.5#old\n; nameserver 10.0.0.6\n',
    );
    const warnings: string[] = [];
    const blocks = parseCorefile(`. {\nforward . ${join(dir, 'resolv-go.conf')}\n}\n`, corefile);
    const c = parseForward(blocks[0]!.directives[0]!, corefile, (m) => warnings.push(m));
    assert.deepEqual(
      c.to.map((u) => u.host),
      ['10.0.0.1', '10.0.0.2', '10.0.0.3', '10.0.0.4'],
    );
    assert.deepEqual(warnings, [`${join(dir, 'resolv-go.conf')}:5: "10.0.0.5#old" is not an IP address; line skipped`]);
  });

  it('takes every option of the expanded syntax', () => {
    writeFileSync(join(dir, 'ca.pem'), 'not really a CA');
    const [c] = parse(`forward . 10.0.0.1 tls://10.0.0.2 {
      except example.com 10.0.0.0/8
      force_tcp
      prefer_udp
      expire 30s
      max_idle_conns 4
      read_timeout 750ms
      max_fails 5
      max_connect_attempts 3
      tls ca.pem
      tls_servername dns.test
      policy sequential
      health_check 2s no_rec domain Example.NET
      max_concurrent 1000
      next NXDOMAIN servfail
      next_on_nodata
      failover REFUSED
      failfast_all_unhealthy_upstreams
    }`);
    assert.deepEqual(c!.except, ['example.com.', '10.in-addr.arpa.']);
    assert.equal(c!.forceTcp, true);
    assert.equal(c!.preferUdp, true);
    assert.equal(c!.expireMs, 30_000);
    assert.equal(c!.maxIdleConns, 4);
    assert.equal(c!.readTimeoutMs, 750);
    assert.equal(c!.maxFails, 5);
    assert.equal(c!.maxConnectAttempts, 3);
    assert.equal(c!.tls?.ca?.toString(), 'not really a CA');
    assert.equal(c!.tlsServerName, 'dns.test');
    assert.equal(c!.policy, 'sequential');
    assert.equal(c!.healthCheckMs, 2000);
    assert.equal(c!.healthCheckRecursion, false);
    assert.equal(c!.healthCheckDomain, 'example.net.');
    assert.equal(c!.maxConcurrent, 1000);
    assert.equal(c!.nextRcodes, (1 << 3) | (1 << 2));
    assert.equal(c!.nextOnNodata, true);
    assert.equal(c!.failoverRcodes, 1 << 5);
    assert.equal(c!.failfastAllUnhealthy, true);
  });

  it('makes one instance per forward line, in the order written, and only non-last lines pass `next` on', () => {
    const fwds = buildForwards('forward example.org 10.0.0.1 {\n next NXDOMAIN\n }\n forward . 10.0.0.2', corefile);
    assert.equal(fwds.length, 2);
    assert.equal(fwds[0]!.opts.from, 'example.org.');
    assert.equal(fwds[0]!.opts.nextIsForward, true);
    assert.equal(fwds[1]!.opts.from, '.');
    assert.equal(fwds[1]!.opts.nextIsForward, false);
  });

  it('matches FROM and its subdomains, minus except zones, but always FROM itself', () => {
    const f = buildForwards('forward example.org 10.0.0.1 {\n except example.org sub.example.org\n }', corefile)[0]!;
    assert.equal(f.matches('example.org.'), true);
    assert.equal(f.matches('www.example.org.'), false);
    assert.equal(f.matches('a.sub.example.org.'), false);
    assert.equal(f.matches('example.com.'), false);
    const f2 = buildForwards('forward example.org 10.0.0.1 {\n except sub.example.org\n }', corefile)[0]!;
    assert.equal(f2.matches('www.example.org.'), true);
    assert.equal(f2.matches('x.sub.example.org.'), false);
  });

  const bad: Array<[string, string, RegExp]> = [
    ['no TO', 'forward .', /Corefile:2 - Error during parsing: forward: wrong argument count/],
    [
      '16 upstreams',
      `forward . ${Array.from({ length: 16 }, (_, i) => `10.0.0.${i + 1}`).join(' ')}`,
      /Corefile:2 - .*more than 15 TOs configured: 16/,
    ],
    ['unknown option', 'forward . 10.0.0.1 {\n  bogus 1\n}', /Corefile:3 - .*forward: unknown property 'bogus'/],
    ['bad policy', 'forward . 10.0.0.1 {\n  policy fastest\n}', /Corefile:3 - .*unknown policy 'fastest'/],
    ['bad duration', 'forward . 10.0.0.1 {\n  expire soon\n}', /Corefile:3 - .*expire: invalid duration "soon"/],
    ['negative max_fails', 'forward . 10.0.0.1 {\n  max_fails -1\n}', /Corefile:3 - .*max_fails/],
    ['bad rcode', 'forward . 10.0.0.1 {\n  next NOPE\n}', /Corefile:3 - .*NOPE is not a valid rcode/],
    [
      'failover NOERROR',
      'forward . 10.0.0.1 {\n  failover NOERROR\n}',
      /Corefile:3 - .*NoError cannot be used in failover/,
    ],
    [
      'health_check option',
      'forward . 10.0.0.1 {\n  health_check 1s sometimes\n}',
      /Corefile:3 - .*health_check: unknown option sometimes/,
    ],
    [
      'two server names',
      'forward . tls://10.0.0.1%a.test {\n  tls_servername b.test\n}',
      /Corefile:2 - .*both forward \('b.test'\) and proxy level \('a.test'\)/,
    ],
    ['DoH', 'forward . https://10.0.0.1', /Corefile:2 - .*DNS over HTTPS/],
    ['grpc', 'forward . grpc://10.0.0.1', /Corefile:2 - .*'grpc' is not supported as a destination protocol/],
    ['host name', 'forward . dns.google', /Corefile:2 - .*'dns.google' is not an IP address or file/],
    ['missing file', 'forward . /nonexistent/resolv.conf', /Corefile:2 - .*cannot read \/nonexistent\/resolv.conf/],
    ['bad port', 'forward . 10.0.0.1:99999', /Corefile:2 - .*invalid port '99999'/],
    [
      'missing TLS file',
      'forward . tls://10.0.0.1 {\n  tls missing.pem\n}',
      /Corefile:3 - .*cannot read TLS file .*missing.pem: ENOENT/,
    ],
    [
      'force_tcp with an argument',
      'forward . 10.0.0.1 {\n  force_tcp yes\n}',
      /Corefile:3 - .*unexpected argument "yes"/,
    ],
  ];
  for (const [what, body, re] of bad) {
    it(`rejects ${what} with file:line`, () => {
      assert.match(parseError(body), re);
    });
  }

  it('reports an empty resolv.conf', () => {
    writeFileSync(join(dir, 'empty.conf'), 'search example.org\n');
    assert.match(parseError(`forward . ${join(dir, 'empty.conf')}`), /no nameservers found in/);
  });
});
