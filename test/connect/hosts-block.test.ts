import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import {
  BLOCK_BEGIN,
  BLOCK_END,
  HostsBlockError,
  hostsEntries,
  renderBlock,
  searchNamespaces,
  spliceBlock,
} from '../../src/connect/hosts-block.js';
import { parseRoute, parseRouteEvent, RouteEventError } from '../../src/connect/routes.js';

const naming = {
  clusterDomain: 'cluster.local',
  searchDomains: ['default.svc.cluster.local', 'svc.cluster.local', 'cluster.local'],
};
const r = (namespace: string, name: string, ...ips: string[]) => ({
  name,
  namespace,
  clusterIP: ips[0] ?? '',
  clusterIPs: ips,
});

describe('hosts entries from routes', () => {
  test('each ClusterIP gets name, name.ns, name.ns.svc and the FQDN', () => {
    assert.deepEqual(hostsEntries([r('default', 'backend', '10.96.120.15')], naming), [
      '10.96.120.15 backend backend.default backend.default.svc backend.default.svc.cluster.local',
    ]);
  });

  test('dual-stack Services get one line per family', () => {
    assert.deepEqual(hostsEntries([r('default', 'web', '10.96.0.20', 'fd00::20')], naming), [
      '10.96.0.20 web web.default web.default.svc web.default.svc.cluster.local',
      'fd00::20 web web.default web.default.svc web.default.svc.cluster.local',
    ]);
  });

  test('the bare name goes only to the namespace the search list reaches first', () => {
    const n = {
      clusterDomain: 'cluster.local',
      searchDomains: ['team-b.svc.cluster.local', 'default.svc.cluster.local', 'svc.cluster.local'],
    };
    assert.deepEqual(searchNamespaces(n), ['team-b', 'default']);
    const lines = hostsEntries(
      [r('default', 'api', '10.96.0.1'), r('team-b', 'api', '10.96.0.2'), r('other', 'api', '10.96.0.3')],
      n,
    );
    assert.deepEqual(lines, [
      '10.96.0.1 api.default api.default.svc api.default.svc.cluster.local',
      '10.96.0.3 api.other api.other.svc api.other.svc.cluster.local',
      '10.96.0.2 api api.team-b api.team-b.svc api.team-b.svc.cluster.local',
    ]);
  });

  test('headless Services (no ClusterIP) get no line', () => {
    assert.deepEqual(
      hostsEntries([parseRoute({ name: 'db', namespace: 'default', clusterIP: 'None', clusterIPs: ['None'] })], naming),
      [],
    );
  });

  test('a custom cluster domain is used in the FQDN', () => {
    assert.deepEqual(
      hostsEntries([r('prod', 'x', '10.0.0.9')], { clusterDomain: 'corp.k8s', searchDomains: ['prod.svc.corp.k8s'] }),
      ['10.0.0.9 x x.prod x.prod.svc x.prod.svc.corp.k8s'],
    );
  });
});

describe('route stream events', () => {
  test('names that could inject into /etc/hosts are refused', () => {
    for (const name of ['a b', 'evil\n1.2.3.4 bank.com', 'A', 'x#y', '-x', '', 'a'.repeat(64)]) {
      assert.throws(
        () => parseRoute({ name, namespace: 'default', clusterIP: '10.0.0.1' }),
        RouteEventError,
        JSON.stringify(name),
      );
    }
    assert.throws(() => parseRoute({ name: 'ok', namespace: 'bad ns', clusterIP: '10.0.0.1' }), RouteEventError);
  });

  test('invalid IPs are dropped, valid ones kept', () => {
    const route = parseRoute({
      name: 'a',
      namespace: 'b',
      clusterIP: '10.0.0.1',
      clusterIPs: ['10.0.0.1', '1.2.3.4 evil', 'fd00::1', 7],
    });
    assert.deepEqual(route.clusterIPs, ['10.0.0.1', 'fd00::1']);
  });

  test('a SNAPSHOT keeps the valid routes and reports the rest', () => {
    const ev = parseRouteEvent(
      JSON.stringify({
        type: 'SNAPSHOT',
        resourceVersion: '5',
        routes: [r('d', 'ok', '10.0.0.1'), { name: 'Bad!', namespace: 'd' }],
      }),
    );
    assert.equal(ev.type, 'SNAPSHOT');
    if (ev.type !== 'SNAPSHOT') return;
    assert.equal(ev.routes.length, 1);
    assert.equal(ev.skipped.length, 1);
  });

  test('garbage, unknown types and missing resourceVersion are errors, not crashes', () => {
    for (const line of [
      '{',
      '[]',
      '{"type":"WHAT","resourceVersion":"1"}',
      '{"type":"ADDED"}',
      '{"type":"DELETED","resourceVersion":"1"}',
    ]) {
      assert.throws(() => parseRouteEvent(line), RouteEventError, line);
    }
  });
});

describe('splicing the marked block', () => {
  const block = renderBlock(['10.96.0.1 a a.default a.default.svc a.default.svc.cluster.local'], '\n');

  test('appends after the last line and removes back to the exact original bytes', () => {
    const original = '127.0.0.1 localhost\n# my comment\n\n192.168.1.5  nas  # keep spacing\n';
    const added = spliceBlock(original, block, false);
    assert.equal(added.text, original + block);
    assert.equal(added.addedNewline, false);
    const removed = spliceBlock(added.text, null, added.addedNewline);
    assert.equal(removed.text, original);
  });

  test('a file without a final line break gets it back without one', () => {
    const original = '127.0.0.1 localhost\n::1 localhost';
    const added = spliceBlock(original, block, false);
    assert.equal(added.text, original + '\n' + block);
    assert.equal(added.addedNewline, true);
    const updated = spliceBlock(added.text, renderBlock([], '\n'), added.addedNewline);
    assert.equal(updated.addedNewline, true);
    assert.equal(spliceBlock(updated.text, null, updated.addedNewline).text, original);
  });

  test('replacing keeps the block where it is and lines after it untouched', () => {
    const text = `a\n${block}b\n`;
    const next = renderBlock(['10.0.0.2 x'], '\n');
    assert.equal(spliceBlock(text, next, false).text, `a\n${next}b\n`);
    assert.equal(spliceBlock(text, null, false).text, 'a\nb\n');
  });

  test('CRLF files keep CRLF', () => {
    const original = '127.0.0.1 localhost\r\n';
    const crlf = renderBlock(['10.0.0.1 a'], '\r\n');
    const added = spliceBlock(original, crlf, false);
    assert.match(added.text, new RegExp(`${BLOCK_BEGIN}\\r\\n`));
    assert.equal(spliceBlock(added.text, null, false).text, original);
  });

  test('duplicate blocks collapse into one', () => {
    const text = `x\n${block}y\n${block}z\n`;
    assert.equal(spliceBlock(text, null, false).text, 'x\ny\nz\n');
  });

  test('unbalanced markers are refused rather than guessed at', () => {
    assert.throws(() => spliceBlock(`a\n${BLOCK_BEGIN}\nb\n`, null, false), HostsBlockError);
    assert.throws(() => spliceBlock(`a\n${BLOCK_END}\n`, block, false), HostsBlockError);
    assert.throws(() => spliceBlock(`${BLOCK_BEGIN}\n${BLOCK_BEGIN}\n${BLOCK_END}\n`, null, false), HostsBlockError);
  });

  test('nothing to remove leaves the text as it is', () => {
    assert.equal(spliceBlock('a\nb', null, false).text, 'a\nb');
  });
});
