// Parsing `routes [ADDRESS] { ... }`.
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { parseCorefile } from '../../src/corefile/parser.js';
import { parseRoutes, type RoutesConfig } from '../../src/plugins/routes/setup.js';

const dir = mkdtempSync(join(tmpdir(), 'clusterdns-routes-setup-'));
writeFileSync(join(dir, 'token'), 's3cret\n');
writeFileSync(join(dir, 'empty'), '\n');

function parse(text: string): RoutesConfig {
  const corefile = join(dir, 'Corefile');
  return parseRoutes(parseCorefile(`. {\n${text}\n}\n`, corefile)[0]!.directives[0]!, corefile);
}

describe('routes: setup', () => {
  it('defaults: :9002, 30 s bookmarks, 1000 changes kept, the kubernetes plugin as the source', () => {
    const c = parse('routes {\n token abc\n}');
    assert.equal(c.address, ':9002');
    assert.equal(c.bookmarkMs, 30_000);
    assert.equal(c.history, 1000);
    assert.equal(c.source, null);
    assert.equal(c.zone, null);
    assert.deepEqual(c.token, { kind: 'literal', value: 'abc' });
  });

  it('reads every option', () => {
    const c = parse(
      'routes 127.0.0.1:9100 {\n tokenfile token\n namespaces default shop\n zone Cluster.Local\n bookmark 5s\n history 50\n}',
    );
    assert.equal(c.address, '127.0.0.1:9100');
    assert.deepEqual(c.token, { kind: 'file', path: join(dir, 'token') });
    assert.deepEqual([...c.namespaces], ['default', 'shop']);
    assert.equal(c.zone, 'cluster.local.');
    assert.equal(c.bookmarkMs, 5000);
    assert.equal(c.history, 50);
    assert.deepEqual(parse('routes {\n token t\n manifests cluster.yaml\n}').source, {
      kind: 'manifests',
      path: join(dir, 'cluster.yaml'),
    });
  });

  it('refuses to serve without a token, and other mistakes, naming the line', () => {
    const cases: Array<[string, RegExp]> = [
      ['routes', /Corefile:2 - Error during parsing: routes: a token or tokenfile is required/],
      ['routes {\n token a\n tokenfile token\n}', /Corefile:4 - .*give one of token or tokenfile/],
      ['routes {\n tokenfile missing\n}', /tokenfile: cannot read .*missing: ENOENT/],
      ['routes {\n tokenfile empty\n}', /is empty/],
      ['routes {\n token a\n namespaces Not_Valid\n}', /"Not_Valid" is not a namespace name/],
      [
        'routes {\n token a\n zone cluster.local\n manifests x.yaml\n}',
        /zone chooses a kubernetes plugin to follow; it cannot be used with manifests/,
      ],
      ['routes {\n token a\n endpoint ftp://x\n}', /is not an http\(s\) URL/],
      ['routes {\n token a\n bookmark 1ms\n}', /at least 10ms/],
      ['routes {\n token a\n other\n}', /unknown property 'other'/],
      ['routes :1 :2 {\n token a\n}', /takes at most one address/],
    ];
    for (const [text, re] of cases) assert.throws(() => parse(text), re, text);
  });
});
