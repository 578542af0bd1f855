// The Go text/template subset of the template plugin and the record-text parser, case by case.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  format,
  GoTemplate,
  goMap,
  sprintf,
  TemplateError,
  type Value,
} from '../../src/plugins/template/gotemplate.js';
import { parseRecordText, RecordTextError } from '../../src/dns/rrtext.js';
import { QClass, QType } from '../../src/dns/constants.js';

const data: Value = {
  Name: 'ip-10-1-2-3.example.',
  Zone: 'example.',
  Type: 'A',
  Match: ['ip-10-1-2-3.example.', '10', '1'],
  Group: goMap({ a: '10', b: '1' }),
  Meta: (k: Value) => (k === 'kubernetes/namespace' ? 'shop' : ''),
};
const run = (src: string, funcs = new Map()) => GoTemplate.parse('answer', src, funcs).execute(data);

test('fields, index, map groups and method calls with arguments', () => {
  assert.equal(
    run('{{ .Name }} {{ index .Match 1 }} {{ .Group.a }} {{ .Meta "kubernetes/namespace" }}'),
    'ip-10-1-2-3.example. 10 10 shop',
  );
  assert.equal(run('[{{ .Group.missing }}]'), '[<no value>]', 'a missing map key is "no value", as in Go');
  assert.equal(run('{{ len .Match }} {{ len .Name }}'), '3 20');
});

test('pipelines, parentheses, printf and comparisons', () => {
  assert.equal(run('{{ .Type | printf "%s-%s" "x" }}'), 'x-A');
  assert.equal(run('{{ printf "%03d|%x|%-4s|%q" 7 255 "ab" "q" }}'), '007|ff|ab  |"q"');
  assert.equal(run('{{ if eq (index .Match 1) "10" "11" }}y{{ else }}n{{ end }}'), 'y');
  assert.equal(run('{{ if and .Name (not .Group.missing) }}y{{ end }}'), 'y');
  assert.equal(run('{{ if lt 1 2 }}lt{{ end }}{{ if ge 2 3 }}ge{{ end }}'), 'lt');
});

test('if / else if / else / with, comments and {{- -}} trimming', () => {
  assert.equal(run('{{ if eq .Type "AAAA" }}six{{ else if eq .Type "A" }}four{{ else }}other{{ end }}'), 'four');
  assert.equal(
    run('{{ with .Group.a }}[{{ . }}]{{ end }}{{ with .Group.missing }}x{{ else }}none{{ end }}'),
    '[10]none',
  );
  assert.equal(run('a {{- /* gone */ -}} b'), 'ab');
  assert.equal(run('a  {{- .Type }}  b'), 'aA  b');
});

test('parseInt is the function a template gets, with errors that fail the execution', () => {
  const parseInt = (s: Value, b: Value) => Number.parseInt(format(s), Number(b));
  assert.equal(run('{{ parseInt "ff" 16 }}', new Map([['parseInt', parseInt]])), '255');
  assert.throws(() => run('{{ index .Match 9 }}'), /index out of range: 9/);
  assert.throws(() => run('{{ .Nope }}'), /can't evaluate field Nope/);
});

test('what does not parse is refused, with the template name', () => {
  for (const bad of [
    '{{ .Name',
    '{{ nosuch }}',
    '{{ if .Name }}x',
    '{{ end }}',
    '{{ else }}',
    '{{ range .Match }}{{ end }}',
    '{{ "unterminated }}',
  ]) {
    assert.throws(
      () => GoTemplate.parse('answer', bad),
      (e: unknown) => e instanceof TemplateError && /^template: answer: /.test(e.message),
      bad,
    );
  }
});

test('sprintf keeps Go verbs it does not know visible', () => {
  assert.equal(sprintf('%d %s %z', [1, 'a', 2]), '1 a %!z(2)');
  assert.equal(sprintf('%s %s', ['a']), 'a %!s(MISSING)');
});

test('record text: TTL and class in either order or left out, relative names, quoted TXT, SOA in parentheses', () => {
  assert.deepEqual(parseRecordText('a.example. 60 IN A 10.0.0.1'), {
    name: 'a.example.',
    type: QType.A,
    class: QClass.IN,
    ttl: 60,
    data: { address: '10.0.0.1' },
  });
  assert.equal(parseRecordText('a.example. in 60 A 10.0.0.1').ttl, 60);
  assert.equal(parseRecordText('a.example. A 10.0.0.1').ttl, 3600, "miekg/dns's default TTL");
  assert.deepEqual(parseRecordText('www 60 IN CNAME target').data, { target: 'target.' });
  assert.deepEqual(parseRecordText('t. 1 IN TXT "hello world" "x\\"y" plain').data, {
    texts: ['hello world', 'x"y', 'plain'],
  });
  assert.deepEqual(parseRecordText('x. 60 IN SOA ns.x. h.x. (1 2 3\n 4 5)').data, {
    mname: 'ns.x.',
    rname: 'h.x.',
    serial: 1,
    refresh: 2,
    retry: 3,
    expire: 4,
    minimum: 5,
  });
  assert.deepEqual(parseRecordText('x. 60 IN AAAA FD00::0001').data, { address: 'fd00::1' });
  assert.deepEqual(parseRecordText('x. 60 IN TYPE65280 \\# 2 abcd').data, { raw: Buffer.from([0xab, 0xcd]) });
  assert.equal(parseRecordText('x. 60 IN MX 10 mail.x.').type, QType.MX);
  assert.equal(parseRecordText('_s._tcp.x. 60 IN SRV 1 2 3 t.x.').type, QType.SRV);
});

test('record text reads TTL units and SOA timers as miekg/dns does, and splits a TXT string past 255 octets', () => {
  const soa = parseRecordText('x. 1h IN SOA ns.x. h.x. 7 1h 15m 1w 1d');
  assert.equal(soa.ttl, 3600);
  assert.deepEqual(soa.data, {
    mname: 'ns.x.',
    rname: 'h.x.',
    serial: 7,
    refresh: 3600,
    retry: 900,
    expire: 604800,
    minimum: 86400,
  });
  const long = 'k'.repeat(300);
  assert.deepEqual(parseRecordText(`t. 60 IN TXT "${long}" short`).data, {
    texts: ['k'.repeat(255), 'k'.repeat(45), 'short'],
  });
});

test('record text: what is not a record is refused', () => {
  for (const bad of [
    'x. 60 IN A 300.1.1.1',
    'x. 60 IN A',
    'x. 60 IN NOPE 1',
    'x. 60 IN MX ten mail.',
    `${'a'.repeat(64)}. 60 IN A 1.2.3.4`,
    'x. 60 IN TYPE65280 \\# 3 ab',
    'x. 60 IN TXT "open',
  ]) {
    assert.throws(() => parseRecordText(bad), RecordTextError, bad);
  }
});
