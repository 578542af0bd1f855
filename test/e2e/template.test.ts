// The template plugin through the real binary and dig: AKS's default Corefile blocks, the
// examples of CoreDNS's template README, every section, upstream, metrics, and start-up errors.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import { startServer, type RunningServer } from '../helpers/server.js';
import { dig, query } from '../helpers/dns.js';
import { freePort } from '../helpers/ports.js';
import { decodeMessage, emptyMessage, encodeMessage } from '../../src/dns/message.js';
import { QType, Rcode } from '../../src/dns/constants.js';

/** An upstream that answers every A query with 192.0.2.53 and counts what it got. */
async function upstream(): Promise<{ port: number; names: string[]; close: () => void }> {
  const s = dgram.createSocket('udp4');
  const names: string[] = [];
  s.on('message', (msg, r) => {
    const q = decodeMessage(msg);
    names.push(q.questions[0]!.name.toLowerCase());
    const a = emptyMessage(q.id);
    a.qr = true;
    a.rd = q.rd;
    a.ra = true;
    a.questions = q.questions;
    if (q.questions[0]!.type === QType.A)
      a.answers.push({ name: q.questions[0]!.name, type: QType.A, class: 1, ttl: 30, data: { address: '192.0.2.53' } });
    s.send(encodeMessage(a), r.port, r.address);
  });
  await new Promise<void>((r) => s.bind(0, '127.0.0.1', () => r()));
  return { port: s.address().port, names, close: () => s.close() };
}

describe('template', () => {
  let s: RunningServer;
  let up: Awaited<ReturnType<typeof upstream>>;
  let metricsPort: number;

  before(async () => {
    up = await upstream();
    metricsPort = await freePort();
    s = await startServer({
      corefile: `
.:PORT {
    bind 127.0.0.1
    prometheus 127.0.0.1:${metricsPort}
    forward . 127.0.0.1:${up.port}
    template ANY ANY internal.cloudapp.net {
      match "^(?:[^.]+\\.){4,}internal\\.cloudapp\\.net\\.$"
      rcode NXDOMAIN
      fallthrough
    }
    template ANY ANY reddog.microsoft.com {
      rcode NXDOMAIN
    }
    template IN A example {
      match "^ip-(?P<a>[0-9]*)-(?P<b>[0-9]*)-(?P<c>[0-9]*)-(?P<d>[0-9]*)[.]example[.]$"
      answer "{{ .Name }} 60 IN A {{ .Group.a }}.{{ .Group.b }}.{{ .Group.c }}.{{ .Group.d }}"
      fallthrough
    }
    template IN A example {
      match "^idx-([0-9]+)-([0-9]+)-([0-9]+)-([0-9]+)[.]example[.]$"
      answer "{{ .Name }} 60 IN A {{ index .Match 1 }}.{{ index .Match 2 }}.{{ index .Match 3 }}.{{ index .Match 4 }}"
      fallthrough
    }
    template IN A example {
      match "^ip0a(?P<b>[a-f0-9]{2})(?P<c>[a-f0-9]{2})(?P<d>[a-f0-9]{2})[.]example[.]$"
      answer "{{ .Name }} 60 IN A 10.{{ parseInt .Group.b 16 8 }}.{{ parseInt .Group.c 16 8 }}.{{ parseInt .Group.d 16 8 }}"
      fallthrough
    }
    template IN PTR 10.in-addr.arpa {
      match "^(?P<d>[0-9]*)[.](?P<c>[0-9]*)[.](?P<b>[0-9]*)[.]10[.]in-addr[.]arpa[.]$"
      answer "{{ .Name }} 60 IN PTR ip-10-{{ .Group.b }}-{{ .Group.c }}-{{ .Group.d }}.example."
    }
    template ANY ANY invalid {
      rcode NXDOMAIN
      authority "invalid. 60 {{ .Class }} SOA ns.invalid. hostmaster.invalid. (1 60 60 60 60)"
    }
    template IN SRV svc.test {
      match "^_(?P<svc>[a-z]+)[.]_tcp[.]svc[.]test[.]$"
      answer "{{ .Name }} 60 IN SRV 10 0 {{ if eq .Group.svc \\"http\\" }}80{{ else }}8080{{ end }} {{ .Group.svc | printf \\"%s-host\\" }}.svc.test."
      additional "{{ .Group.svc }}-host.svc.test. 60 IN A 10.9.9.9"
    }
    template IN TXT info.test {
      answer "{{ .Name }} 5 IN TXT \\"{{ .Type }} {{ .Class }} {{ .Zone }} {{ .Remote }}\\""
    }
    template IN A alias.test {
      match "^(?P<n>[a-z]+)[.]alias[.]test[.]$"
      answer "{{ .Name }} 60 IN CNAME {{ .Group.n }}.elsewhere.test."
      upstream
    }
    template IN A nofall.test {
      match "^yes[.]"
      answer "{{ .Name }} 60 IN A 10.0.0.1"
    }
    template IN A broken.test {
      answer "{{ .Name }} 60 IN A {{ index .Match 7 }}"
    }
    template IN A badrr.test {
      answer "{{ .Name }} 60 IN A not-an-address"
    }
}
`,
    });
  });

  after(async () => {
    await s?.stop();
    up?.close();
  });

  test("AKS's default blocks: deep internal.cloudapp.net names NXDOMAIN, others fall through to forward", async () => {
    const deep = await dig(s.port, ['a.b.c.d.internal.cloudapp.net', 'A']);
    assert.equal(deep.status, 'NXDOMAIN');
    assert.ok(!up.names.includes('a.b.c.d.internal.cloudapp.net.'), 'not forwarded');
    const shallow = await dig(s.port, ['vm1.internal.cloudapp.net', 'A']);
    assert.equal(shallow.status, 'NOERROR');
    assert.deepEqual(shallow.answer, ['vm1.internal.cloudapp.net. 30 IN A 192.0.2.53']);
    const reddog = await dig(s.port, ['anything.reddog.microsoft.com', 'AAAA']);
    assert.equal(reddog.status, 'NXDOMAIN');
  });

  test('CoreDNS README: ip-a-b-c-d.example by named groups, by index and by parseInt of hex', async () => {
    assert.deepEqual((await dig(s.port, ['ip-10-1-2-3.example'])).answer, ['ip-10-1-2-3.example. 60 IN A 10.1.2.3']);
    assert.deepEqual((await dig(s.port, ['idx-10-4-5-6.example'])).answer, ['idx-10-4-5-6.example. 60 IN A 10.4.5.6']);
    assert.deepEqual((await dig(s.port, ['ip0a0b0c0d.example'])).answer, ['ip0a0b0c0d.example. 60 IN A 10.11.12.13']);
    const r = await dig(s.port, ['ip-10-1-2-3.example']);
    assert.ok(r.flags.includes('aa'), 'authoritative');
    // Answered again from the rendered-answer cache: the question exactly as asked, the same record.
    const upper = await dig(s.port, ['IP-10-1-2-3.EXAMPLE']);
    assert.match(upper.raw, /;IP-10-1-2-3\.EXAMPLE\.\s+IN\s+A/);
    assert.deepEqual(
      upper.answer.map((l) => l.toLowerCase()),
      ['ip-10-1-2-3.example. 60 in a 10.1.2.3'],
    );
    assert.ok(upper.flags.includes('aa'));
  });

  test('CoreDNS README: reverse names of 10.0.0.0/8 answer PTR ip-10-b-c-d', async () => {
    const r = await dig(s.port, ['-x', '10.1.2.3']);
    assert.deepEqual(r.answer, ['3.2.1.10.in-addr.arpa. 60 IN PTR ip-10-1-2-3.example.']);
  });

  test('a regex miss without fallthrough is NXDOMAIN; with it the next plugin answers', async () => {
    const r = await dig(s.port, ['nope.example', 'A']);
    assert.deepEqual(r.answer, ['nope.example. 30 IN A 192.0.2.53'], 'all example templates fall through');
    assert.deepEqual((await dig(s.port, ['yes.nofall.test', 'A'])).answer, ['yes.nofall.test. 60 IN A 10.0.0.1']);
    const miss = await dig(s.port, ['no.nofall.test', 'A']);
    assert.equal(miss.status, 'NXDOMAIN');
    assert.ok(!up.names.includes('no.nofall.test.'), 'not forwarded');
  });

  test('CoreDNS README: .invalid is NXDOMAIN with an SOA in AUTHORITY (multi-line SOA syntax)', async () => {
    const r = await dig(s.port, ['foo.invalid', 'A']);
    assert.equal(r.status, 'NXDOMAIN');
    assert.deepEqual(r.authority, ['invalid. 60 IN SOA ns.invalid. hostmaster.invalid. 1 60 60 60 60']);
  });

  test('if/else, pipelines with printf, and the additional section', async () => {
    const http = await dig(s.port, ['_http._tcp.svc.test', 'SRV']);
    assert.deepEqual(http.answer, ['_http._tcp.svc.test. 60 IN SRV 10 0 80 http-host.svc.test.']);
    assert.deepEqual(http.additional, ['http-host.svc.test. 60 IN A 10.9.9.9']);
    const grpc = await dig(s.port, ['_grpc._tcp.svc.test', 'SRV']);
    assert.deepEqual(grpc.answer, ['_grpc._tcp.svc.test. 60 IN SRV 10 0 8080 grpc-host.svc.test.']);
  });

  test('.Type, .Class, .Zone and .Remote', async () => {
    const r = await dig(s.port, ['who.info.test', 'TXT']);
    assert.deepEqual(r.answer, ['who.info.test. 5 IN TXT "TXT IN info.test. 127.0.0.1"']);
  });

  test('upstream: a CNAME answer is followed through the server block', async () => {
    const r = await dig(s.port, ['web.alias.test', 'A']);
    assert.deepEqual(r.answer, [
      'web.alias.test. 60 IN CNAME web.elsewhere.test.',
      'web.elsewhere.test. 30 IN A 192.0.2.53',
    ]);
  });

  test('a template that fails to execute, or renders no valid record, is SERVFAIL and counted', async () => {
    assert.equal((await query(s.port, 'x.broken.test.', QType.A)).rcode, Rcode.SERVFAIL);
    assert.equal((await query(s.port, 'x.badrr.test.', QType.A)).rcode, Rcode.SERVFAIL);
    const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    assert.match(
      text,
      /coredns_template_matches_total\{server="dns:\/\/:\d+",zone="example\.",view="",class="IN",type="A"\} [1-9]/,
    );
    assert.match(
      text,
      /coredns_template_template_failures_total\{server="dns:\/\/:\d+",zone="broken\.test\.",view="",class="IN",type="A",section="answer",template="answer"\} 1/,
    );
    assert.match(
      text,
      /coredns_template_rr_failures_total\{server="dns:\/\/:\d+",zone="badrr\.test\.",view="",class="IN",type="A",section="answer",template="answer"\} 1/,
    );
  });
});

describe('template: a template that does not parse stops the start with FILE:LINE', () => {
  const cases: Array<[string, RegExp]> = [
    [
      'answer "{{ .Name 60 IN A 1.2.3.4"',
      /Corefile:4 - Error during parsing: template: could not compile template: .*unclosed action/,
    ],
    ['answer "{{ nosuch .Name }}"', /Corefile:4 - Error during parsing: .*function "nosuch" not defined/],
    ['answer "{{ if .Name }}x"', /Corefile:4 - .*unexpected EOF/],
    ['match "([a-z]"', /Corefile:4 - Error during parsing: template: could not parse regex/],
    ['rcode NOTACODE', /Corefile:4 - Error during parsing: template: unknown rcode/],
  ];
  for (const [line, re] of cases) {
    test(line, async () => {
      const s = await startServer({
        corefile: `.:PORT {\n    bind 127.0.0.1\n    template IN A {\n      ${line}\n    }\n}\n`,
        noWait: true,
      });
      const code = await new Promise<number | null>((r) => s.proc.on('exit', (c) => r(c)));
      assert.equal(code, 1);
      assert.match(s.output(), re);
    });
  }
});
