// The file plugin's master-file parser (RFC 1035 section 5) and its lookup, without sockets.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseZoneFile, ZoneFileError } from '../../src/plugins/file/zonefile.js';
import { parseTtl } from '../../src/dns/rrtext.js';
import { Zone } from '../../src/plugins/file/zone.js';
import { QType, Rcode } from '../../src/dns/constants.js';

const parse = (text: string, origin = 'example.org.') => parseZoneFile('/z.db', origin, text).records;

test('owner, TTL and class carry over; class and TTL in either order; @ and relative names', () => {
  const rrs = parse(
    '$TTL 1h\n@ IN SOA ns host 1 2 3 4 5\nwww 60 IN A 10.0.0.1\n     IN 30 AAAA fd00::1\nsub.www IN CNAME www\n$ORIGIN other.example.org.\nx A 10.0.0.2\n',
  );
  assert.deepEqual(
    rrs.map((r) => `${r.name} ${r.ttl} ${r.type}`),
    [
      'example.org. 3600 6',
      'www.example.org. 60 1',
      'www.example.org. 30 28',
      'sub.www.example.org. 3600 5',
      'x.other.example.org. 3600 1',
    ],
  );
  assert.deepEqual(rrs[3]!.data, { target: 'www.example.org.' });
});

test('parentheses join lines, comments are dropped, quoted strings keep spaces and escapes', () => {
  const rrs = parse(
    '$TTL 60\n@ IN SOA ( ns.example.org. ; primary\n  host.example.org. 2024010101 ; serial\n 1h 15m 1w 1d )\nt TXT "a b;c" "q\\"x" \\065B\n',
  );
  assert.deepEqual(rrs[0]!.data, {
    mname: 'ns.example.org.',
    rname: 'host.example.org.',
    serial: 2024010101,
    refresh: 3600,
    retry: 900,
    expire: 604800,
    minimum: 86400,
  });
  assert.deepEqual(rrs[1]!.data, { texts: ['a b;c', 'q"x', 'AB'] });
});

test('a zone file and a template record are one RDATA syntax: long TXT strings split at 255 octets, SOA timer units, class names', () => {
  const long = 'v=DKIM1; k=rsa; p=' + 'A'.repeat(400);
  const rrs = parse(`$TTL 60\n@ SOA ns host 1 1h 15m 1w 1d\ndkim CS TXT "${long}"\n`);
  assert.deepEqual(rrs[1]!.data, { texts: [long.slice(0, 255), long.slice(255)] });
  assert.equal(rrs[1]!.class, 2);
});

test('BIND TTL units', () => {
  assert.equal(parseTtl('1h30m'), 5400);
  assert.equal(parseTtl('2W'), 1209600);
  assert.equal(parseTtl('300'), 300);
  assert.equal(parseTtl('1x'), null);
});

test('RFC 3597 generic RDATA for any type, checked against its length', () => {
  const rrs = parse('$TTL 60\n@ SOA ns host 1 2 3 4 5\nw TYPE65280 \\# 3 abcdef\nv A \\# 4 0a000001\n');
  assert.deepEqual(rrs[1]!.data, { raw: Buffer.from('abcdef', 'hex') });
  assert.equal(rrs[1]!.type, 65280);
  assert.throws(() => parse('$TTL 60\nw TYPE1 \\# 3 abcd\n'), /\/z\.db:2 - /);
});

test('errors name the file and line, never the text found there', () => {
  const cases: Array<[string, RegExp]> = [
    ['$TTL 60\nwww IN A 999.1.1.1\n', /\/z\.db:2 - not an IPv4 address/],
    ['$TTL 60\nwww IN BOGUS x\n', /\/z\.db:2 - field 3: not a known type or class/],
    ['www IN A 10.0.0.1\n', /\/z\.db:1 - the record has no TTL/],
    ['$TTL 60\n@ SOA ( ns host 1 2 3 4 5\n', /unbalanced "\("/],
    ['$BOGUS x\n', /unknown \$ directive/],
  ];
  for (const [text, re] of cases) {
    assert.throws(
      () => parse(text),
      (e: unknown) =>
        e instanceof ZoneFileError && re.test(e.message) && !e.message.includes('BOGUS') && !e.message.includes('999'),
      text,
    );
  }
});

test('a zone without SOA, or with records outside it, is rejected', () => {
  assert.throws(() => new Zone('example.org.', parse('$TTL 60\nwww A 10.0.0.1\n')), /no SOA/);
  assert.throws(
    () => new Zone('example.org.', parse('$TTL 60\n@ SOA ns host 1 2 3 4 5\nwww.example.com. A 10.0.0.1\n')),
    /outside the zone/,
  );
});

test('lookup: a CNAME loop inside the zone ends instead of spinning', () => {
  const z = new Zone('example.org.', parse('$TTL 60\n@ SOA ns host 1 2 3 4 5\na CNAME b\nb CNAME a\n'));
  const r = z.lookup('a.example.org.', QType.A);
  assert.equal(r.rcode, Rcode.NOERROR);
  assert.equal(r.answers.length, 2);
});
