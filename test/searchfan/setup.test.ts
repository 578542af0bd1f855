// Parsing `searchfan [TO...] { search ...; ndots N; timeout DURATION }`.
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { parseCorefile } from '../../src/corefile/parser.js';
import { parseSearchFan, type SearchFanConfig } from '../../src/plugins/searchfan/setup.js';

function parse(line: string, dir = mkdtempSync(join(tmpdir(), 'clusterdns-fan-setup-'))): SearchFanConfig {
  const corefile = join(dir, 'Corefile');
  return parseSearchFan(parseCorefile(`. {\n${line}\n}\n`, corefile)[0]!.directives[0]!, corefile);
}

describe('searchfan: setup', () => {
  it('takes upstreams as forward does: IP, IP:PORT, [IPv6]:PORT, dns://', () => {
    const c = parse(
      'searchfan 10.0.0.10 127.0.0.1:5353 [::1]:53 dns://192.0.2.1:54 {\n search default.svc.cluster.local svc.cluster.local\n ndots 5\n}',
    );
    assert.deepEqual(
      c.upstreams.map((u) => u.addr),
      ['10.0.0.10:53', '127.0.0.1:5353', '[::1]:53', '192.0.2.1:54'],
    );
    assert.deepEqual(c.search, ['default.svc.cluster.local', 'svc.cluster.local']);
    assert.equal(c.ndots, 5);
    assert.equal(c.timeoutMs, 5000, "KubeVPN's 5 s deadline by default");
    assert.equal(c.maxConcurrent, 1000);
  });

  it("takes nameservers, search list and ndots from a resolv.conf TO, the block's options winning", () => {
    const dir = mkdtempSync(join(tmpdir(), 'clusterdns-fan-setup-'));
    writeFileSync(
      join(dir, 'pod-resolv.conf'),
      'nameserver 10.96.0.10\nnameserver 10.96.0.11\nsearch kubevpn.svc.cluster.local svc.cluster.local cluster.local us-west-2.compute.internal\noptions ndots:5\n',
    );
    const c = parse('searchfan pod-resolv.conf', dir);
    assert.deepEqual(
      c.upstreams.map((u) => u.addr),
      ['10.96.0.10:53', '10.96.0.11:53'],
    );
    assert.deepEqual(c.search, [
      'kubevpn.svc.cluster.local',
      'svc.cluster.local',
      'cluster.local',
      'us-west-2.compute.internal',
    ]);
    assert.equal(c.ndots, 5);
    const o = parse('searchfan pod-resolv.conf {\n search Other.Example.\n ndots 2\n timeout 1500ms\n}', dir);
    assert.deepEqual(o.search, ['other.example']);
    assert.equal(o.ndots, 2);
    assert.equal(o.timeoutMs, 1500);
    assert.deepEqual(
      parse('searchfan pod-resolv.conf {\n search\n}', dir).search,
      [],
      'an empty search line turns searching off',
    );
  });

  it('rejects what it cannot use, naming the Corefile line', () => {
    const cases: Array<[string, RegExp]> = [
      ['searchfan 10.0.0.1 {\n bogus 1\n}', /Corefile:3 - Error during parsing: searchfan: unknown property 'bogus'/],
      ['searchfan 10.0.0.1 {\n ndots 16\n}', /Corefile:3 - .*ndots: 16 is out of range \[0, 15\]/],
      ['searchfan 10.0.0.1 {\n timeout 0\n}', /timeout must be more than 0/],
      ['searchfan 10.0.0.1 {\n max_concurrent 0\n}', /max_concurrent: 0 is out of range/],
      ['searchfan 10.0.0.1 {\n search bad..name\n}', /invalid search domain 'bad\.\.name'/],
      ['searchfan tls://10.0.0.1', /only plain DNS upstreams/],
      ['searchfan 10.0.0.1:99999', /invalid port '99999'/],
      ['searchfan no-such-file.conf', /'no-such-file\.conf' is not an IP address or an existing resolv\.conf file/],
      [`searchfan ${Array.from({ length: 16 }, (_, i) => `10.0.0.${i + 1}`).join(' ')}`, /more than 15 upstreams/],
    ];
    for (const [line, re] of cases) assert.throws(() => parse(line), re, line);
  });
});
