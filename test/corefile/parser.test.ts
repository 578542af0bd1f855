import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

import { CorefileError, directiveError } from '../../src/corefile/errors.js';
import { lex, replaceEnv } from '../../src/corefile/lexer.js';
import {
  corefileFiles,
  parseCorefile,
  parseCorefileFile,
  parseCorefileFileWithFiles,
  type ParseOptions,
} from '../../src/corefile/parser.js';
import type { Directive, ServerBlock } from '../../src/corefile/types.js';

// ---------- helpers ----------

interface Shape {
  n: string;
  a: string[];
  b?: Shape[];
}

/** Compact view of directives: name, arg texts, nested block. */
function shape(ds: Directive[]): Shape[] {
  return ds.map((d) =>
    d.block === null
      ? { n: d.name, a: d.args.map((t) => t.text) }
      : { n: d.name, a: d.args.map((t) => t.text), b: shape(d.block) },
  );
}

function keys(b: ServerBlock): string[] {
  return b.keys.map((k) => `${k.scheme}://${k.zone}:${k.port}`);
}

const noEnv: ParseOptions = { env: {} };

/** Parses a Corefile the test expects to hold at least one server block. */
function parse(text: string, opts: ParseOptions = noEnv): [ServerBlock, ...ServerBlock[]] {
  const blocks = parseCorefile(text, 'Corefile', { env: {}, ...opts });
  assert.ok(blocks.length > 0, 'no server block parsed');
  return blocks as [ServerBlock, ...ServerBlock[]];
}

/** Asserts that parsing throws a CorefileError with exactly this message. */
function parseErr(text: string, message: string, opts: ParseOptions = noEnv): CorefileError {
  let caught: unknown;
  try {
    parse(text, opts);
  } catch (e) {
    caught = e;
  }
  assert.ok(caught instanceof CorefileError, `expected CorefileError, got ${String(caught)}`);
  assert.equal(caught.message, message);
  return caught;
}

function tmpDir(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'clusterdns-corefile-'));
}

const KUBEADM = `.:53 {
    errors
    health {
       lameduck 5s
    }
    ready
    kubernetes cluster.local in-addr.arpa ip6.arpa {
       pods insecure
       fallthrough in-addr.arpa ip6.arpa
       ttl 30
    }
    prometheus :9153
    forward . /etc/resolv.conf {
       max_concurrent 1000
    }
    cache 30 {
       disable success cluster.local
       disable denial cluster.local
    }
    loop
    reload
    loadbalance
}
`;

const KNOWN = new Set([
  'errors',
  'health',
  'ready',
  'kubernetes',
  'prometheus',
  'forward',
  'cache',
  'loop',
  'reload',
  'loadbalance',
  'log',
  'whoami',
  'hosts',
]);

// ---------- errors ----------

test('CorefileError message format and directiveError', () => {
  const e = new CorefileError('Corefile', 3, 'boom');
  assert.equal(e.message, 'Corefile:3 - Error during parsing: boom');
  assert.equal(e.file, 'Corefile');
  assert.equal(e.line, 3);
  assert.equal(e.what, 'boom');
  assert.ok(e instanceof Error);
  const [b] = parse('.:53 {\n  cache 30 {\n    bogus 1\n  }\n}\n');
  const inner = b.directives[0]!.block?.[0];
  assert.ok(inner);
  assert.equal(
    directiveError(inner, "unknown property 'bogus'").message,
    "Corefile:3 - Error during parsing: unknown property 'bogus'",
  );
  assert.equal(directiveError(inner.args[0]!, 'bad').message, 'Corefile:3 - Error during parsing: bad');
});

// ---------- kubeadm default ----------

test('kubeadm default Corefile', () => {
  const blocks = parse(KUBEADM, { knownDirectives: KNOWN });
  assert.equal(blocks.length, 1);
  const b = blocks[0];
  assert.deepEqual(b.keys, [{ scheme: 'dns', zone: '.', port: 53, raw: '.:53' }]);
  assert.equal(b.file, 'Corefile');
  assert.equal(b.line, 1);
  assert.deepEqual(
    b.directives.map((d) => [d.name, d.line]),
    [
      ['errors', 2],
      ['health', 3],
      ['ready', 6],
      ['kubernetes', 7],
      ['prometheus', 12],
      ['forward', 13],
      ['cache', 16],
      ['loop', 20],
      ['reload', 21],
      ['loadbalance', 22],
    ],
  );
  const k = b.directives[3]!;
  assert.deepEqual(
    k.args.map((t) => t.text),
    ['cluster.local', 'in-addr.arpa', 'ip6.arpa'],
  );
  assert.deepEqual(k.args[0], { text: 'cluster.local', file: 'Corefile', line: 7, quoted: false });
  assert.deepEqual(shape(k.block ?? []), [
    { n: 'pods', a: ['insecure'] },
    { n: 'fallthrough', a: ['in-addr.arpa', 'ip6.arpa'] },
    { n: 'ttl', a: ['30'] },
  ]);
  assert.deepEqual(
    k.block?.map((d) => d.line),
    [8, 9, 10],
  );
  assert.deepEqual(shape(b.directives), [
    { n: 'errors', a: [] },
    { n: 'health', a: [], b: [{ n: 'lameduck', a: ['5s'] }] },
    { n: 'ready', a: [] },
    {
      n: 'kubernetes',
      a: ['cluster.local', 'in-addr.arpa', 'ip6.arpa'],
      b: [
        { n: 'pods', a: ['insecure'] },
        { n: 'fallthrough', a: ['in-addr.arpa', 'ip6.arpa'] },
        { n: 'ttl', a: ['30'] },
      ],
    },
    { n: 'prometheus', a: [':9153'] },
    { n: 'forward', a: ['.', '/etc/resolv.conf'], b: [{ n: 'max_concurrent', a: ['1000'] }] },
    {
      n: 'cache',
      a: ['30'],
      b: [
        { n: 'disable', a: ['success', 'cluster.local'] },
        { n: 'disable', a: ['denial', 'cluster.local'] },
      ],
    },
    { n: 'loop', a: [] },
    { n: 'reload', a: [] },
    { n: 'loadbalance', a: [] },
  ]);
  assert.equal(b.directives[0]!.block, null);
});

// ---------- lexer ----------

test('lexer: whitespace, quotes, backticks, comments, lines', () => {
  const toks = lex('a  "b c"\t`d\ne`\n\n"x\\"y\\\\z\\n" f#g h\n# full\ni # tail\r\nj', 'F');
  assert.deepEqual(
    toks.map((t) => [t.text, t.line, t.quoted, t.lineStart]),
    [
      ['a', 1, false, true],
      ['b c', 1, true, false],
      ['d\ne', 1, true, false],
      ['x"y\\z\\n', 4, true, true],
      ['f', 4, false, false],
      ['i', 6, false, true],
      ['j', 7, false, true],
    ],
  );
  assert.equal(toks[2]!.endLine, 2);
  // A quote in the middle of a token is literal; a closing quote ends the token.
  assert.deepEqual(
    lex('a"b"c "d"e', 'F').map((t) => t.text),
    ['a"b"c', 'd', 'e'],
  );
  assert.deepEqual(
    lex('""', 'F').map((t) => [t.text, t.quoted]),
    [['', true]],
  );
});

test('lexer: unterminated quotes are errors at the opening line', () => {
  assert.throws(() => lex('a\n"bc\n\n', 'F'), { message: 'F:2 - Error during parsing: Unterminated quoted string' });
  assert.throws(() => lex('a `b', 'F'), { message: 'F:1 - Error during parsing: Unterminated backtick string' });
});

test('replaceEnv: both syntaxes, unset is empty, no rescan', () => {
  const env = { A: 'x', B: 'has space', C: '{$A}' };
  assert.equal(replaceEnv('{$A}', env), 'x');
  assert.equal(replaceEnv('{%A%}', env), 'x');
  assert.equal(replaceEnv('pre{$A}mid{%B%}post', env), 'prexmidhas spacepost');
  assert.equal(replaceEnv('{$NOPE}', env), '');
  assert.equal(replaceEnv('{$C}', env), '{$A}');
  assert.equal(replaceEnv('{$}', env), '{$}');
  assert.equal(replaceEnv('{$A', env), '{$A');
});

// ---------- comments ----------

test('comments everywhere', () => {
  const text = `# leading comment
.:53 { # after brace
  # own line
  errors#glued
  forward . 1.1.1.1 { # after nested brace
    policy sequential # trailing
  } # after close
  log "#not a comment" # but this is
} # end
# trailing comment`;
  const [b] = parse(text);
  assert.deepEqual(shape(b.directives), [
    { n: 'errors', a: [] },
    { n: 'forward', a: ['.', '1.1.1.1'], b: [{ n: 'policy', a: ['sequential'] }] },
    { n: 'log', a: ['#not a comment'] },
  ]);
  assert.equal(b.line, 2);
  assert.deepEqual(
    b.directives.map((d) => d.line),
    [4, 5, 8],
  );
  assert.equal(b.directives[2]!.args[0]!.quoted, true);
});

test('a comment inside a token ends it (foo#bar is foo)', () => {
  const [b] = parse('. {\n  hosts foo#bar baz\n  whoami\n}');
  assert.deepEqual(shape(b.directives), [
    { n: 'hosts', a: ['foo'] },
    { n: 'whoami', a: [] },
  ]);
});

// ---------- quoted strings ----------

test('quoted strings with spaces and newlines stay one token; lines continue after them', () => {
  const text =
    '. {\n  log . "{remote} - {name} {type}"\n  template IN A {\n    answer "{{ .Name }} 60 IN A\n1.2.3.4"\n  }\n  errors\n}';
  const [b] = parse(text);
  assert.deepEqual(
    b.directives[0]!.args.map((t) => t.text),
    ['.', '{remote} - {name} {type}'],
  );
  const tmpl = b.directives[1]!;
  assert.deepEqual(shape(tmpl.block ?? []), [{ n: 'answer', a: ['{{ .Name }} 60 IN A\n1.2.3.4'] }]);
  assert.equal(tmpl.block?.[0]?.args[0]?.line, 4);
  assert.equal(b.directives[2]?.name, 'errors');
  assert.equal(b.directives[2]?.line, 7);
});

test('escaped quotes and backslashes in quoted strings; backtick strings', () => {
  const [b] = parse('. {\n  x "say \\"hi\\"" "a\\\\b" "c\\d" `raw "q" \\n`\n}');
  assert.deepEqual(
    b.directives[0]!.args.map((t) => t.text),
    ['say "hi"', 'a\\b', 'c\\d', 'raw "q" \\n'],
  );
  assert.ok(b.directives[0]!.args.every((t) => t.quoted));
});

test('quoted braces are plain arguments', () => {
  const [b] = parse('. {\n  x "{" "}"\n}');
  assert.deepEqual(shape(b.directives), [{ n: 'x', a: ['{', '}'] }]);
});

// ---------- env ----------

test('environment variables in keys, names and args (both syntaxes)', () => {
  const env = { ZONE: 'Example.ORG', PORT: '1053', UP: '8.8.8.8 8.8.4.4', DIR: 'forward', EMPTY: '' };
  const text = '{$ZONE}:{%PORT%} {\n  {$DIR} . {$UP}\n  log {$UNSET}x{%EMPTY%}\n}';
  const [b] = parse(text, { env });
  assert.deepEqual(b.keys, [{ scheme: 'dns', zone: 'example.org.', port: 1053, raw: 'Example.ORG:1053' }]);
  assert.deepEqual(shape(b.directives), [
    { n: 'forward', a: ['.', '8.8.8.8 8.8.4.4'] }, // a value with spaces stays one token
    { n: 'log', a: ['x'] },
  ]);
});

test('environment defaults to process.env', () => {
  const name = `CLUSTERDNS_TEST_${process.pid}`;
  process.env[name] = 'cluster.local';
  try {
    const [b] = parseCorefile(`{$${name}} {\n whoami\n}`, 'Corefile');
    assert.equal(b?.keys[0]?.zone, 'cluster.local.');
  } finally {
    delete process.env[name];
  }
});

test('unset variable in a key gives an empty key, which is skipped', () => {
  const [b] = parse('{$NOPE} example.org {\n whoami\n}');
  assert.deepEqual(keys(b), ['dns://example.org.:53']);
  parseErr(
    '\n{$NOPE} "" {\n whoami\n}',
    'Corefile:2 - Error during parsing: Server block without an address (the keys are empty)',
  );
});

// ---------- keys ----------

test('server keys: schemes, ports, default port, lowercasing, fqdn', () => {
  const text = `.:53 {\n}\nCluster.Local:1053 {\n}\ndns://.:1054 {\n}\nexample.org {\n}\ntls://example.net {\n}\ngrpc://a.example {\n}\nhttps://b.example {\n}\nquic://c.example:8853 {\n}\nfqdn.example. {\n}\n`;
  const blocks = parse(text);
  assert.deepEqual(blocks.flatMap(keys), [
    'dns://.:53',
    'dns://cluster.local.:1053',
    'dns://.:1054',
    'dns://example.org.:53',
    'tls://example.net.:853',
    'grpc://a.example.:443',
    'https://b.example.:443',
    'quic://c.example.:8853',
    'dns://fqdn.example.:53',
  ]);
  assert.equal(blocks[2]?.keys[0]?.raw, 'dns://.:1054');
  const withPort = parse('example.org {\n}\ntls://x.org {\n}\n', { defaultPort: 1053 });
  assert.deepEqual(withPort.flatMap(keys), ['dns://example.org.:1053', 'tls://x.org.:853']);
  assert.deepEqual(parse(':1053 {\n}').flatMap(keys), ['dns://.:1053']);
});

test('bad keys', () => {
  parseErr('.:abc {\n}', "Corefile:1 - Error during parsing: invalid port 'abc' in '.:abc'");
  parseErr('.:70000 {\n}', "Corefile:1 - Error during parsing: invalid port '70000' in '.:70000'");
  parseErr(
    '\nfoo://example.org {\n}',
    "Corefile:2 - Error during parsing: unsupported scheme 'foo' in 'foo://example.org'",
  );
  parseErr(
    'constructor://x {\n}',
    "Corefile:1 - Error during parsing: unsupported scheme 'constructor' in 'constructor://x'",
  );
  parseErr('10.0.0.0/33 {\n}', "Corefile:1 - Error during parsing: invalid CIDR '10.0.0.0/33' in '10.0.0.0/33'");
});

test('comma-separated keys, trailing comma continues the line', () => {
  const [b] = parse('a.org, b.org,c.org\tD.org {\n  whoami\n}');
  assert.deepEqual(keys(b), ['dns://a.org.:53', 'dns://b.org.:53', 'dns://c.org.:53', 'dns://d.org.:53']);
  const [c] = parse('a.org,\n  b.org:1053,\n  c.org {\n  whoami\n}');
  assert.deepEqual(keys(c), ['dns://a.org.:53', 'dns://b.org.:1053', 'dns://c.org.:53']);
  assert.deepEqual(shape(c.directives), [{ n: 'whoami', a: [] }]);
  assert.deepEqual(
    c.keys.map((k) => k.raw),
    ['a.org', 'b.org:1053', 'c.org'],
  );
  parseErr(
    'a.org, {\n}',
    "Corefile:1 - Error during parsing: Expected another address but had '{' - check for extra comma",
  );
  parseErr(
    'a.org,',
    'Corefile:1 - Error during parsing: Unexpected EOF, expecting another address after the trailing comma',
  );
});

test('CIDR keys expand to reverse zones', () => {
  const blocks = parse(
    '10.0.0.0/24 {\n whoami\n}\n10.1.0.0/17:1053 {\n whoami\n}\n10.0.0.0/8 fd00::/64 {\n whoami\n}\ndns://172.16.0.0/16 {\n}\n',
  );
  assert.deepEqual(keys(blocks[0]), ['dns://0.0.10.in-addr.arpa.:53']);
  assert.equal(blocks[0]?.keys[0]?.raw, '10.0.0.0/24');
  assert.equal(blocks[1]?.keys.length, 128);
  assert.equal(keys(blocks[1])[0], 'dns://0.1.10.in-addr.arpa.:1053');
  assert.equal(keys(blocks[1])[127], 'dns://127.1.10.in-addr.arpa.:1053');
  assert.ok(blocks[1].keys.every((k) => k.raw === '10.1.0.0/17:1053'));
  assert.deepEqual(keys(blocks[2]!), [
    'dns://10.in-addr.arpa.:53',
    'dns://0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa.:53',
  ]);
  assert.deepEqual(keys(blocks[3]!), ['dns://16.172.in-addr.arpa.:53']);
});

test('duplicate zone+port is an error at the second occurrence', () => {
  parseErr(
    '.:53 {\n whoami\n}\n\n.:53 {\n whoami\n}',
    'Corefile:5 - Error during parsing: cannot serve dns://.:53 - it is already defined',
  );
  parseErr(
    'example.org {\n}\nEXAMPLE.org.:53 {\n}',
    'Corefile:3 - Error during parsing: cannot serve dns://example.org.:53 - it is already defined',
  );
  parseErr(
    'a.org a.org {\n}',
    'Corefile:1 - Error during parsing: cannot serve dns://a.org.:53 - it is already defined',
  );
  parseErr(
    '10.0.0.0/24 {\n}\n10.0.0.0/17 {\n}',
    'Corefile:3 - Error during parsing: cannot serve dns://0.0.10.in-addr.arpa.:53 - it is already defined',
  );
  // Same zone, different port or scheme: fine.
  assert.equal(parse('.:53 {\n}\n.:1053 {\n}\ntls://.:53 {\n}').length, 3);
  // Default port applies to the duplicate check.
  parseErr(
    '.:1053 {\n}\n. {\n}',
    'Corefile:3 - Error during parsing: cannot serve dns://.:1053 - it is already defined',
    { defaultPort: 1053 },
  );
});

// ---------- blocks ----------

test('single server block without braces', () => {
  const [b, ...rest] = parse('example.org\nwhoami\nlog\n');
  assert.equal(rest.length, 0);
  assert.deepEqual(keys(b), ['dns://example.org.:53']);
  assert.deepEqual(shape(b.directives), [
    { n: 'whoami', a: [] },
    { n: 'log', a: [] },
  ]);
  const [c] = parse('example.org\nforward . 1.1.1.1 {\n  policy random\n}\n');
  assert.deepEqual(shape(c.directives), [{ n: 'forward', a: ['.', '1.1.1.1'], b: [{ n: 'policy', a: ['random'] }] }]);
  const [d] = parse('example.org');
  assert.deepEqual(d.directives, []);
  parseErr(
    'example.org\nwhoami\n}',
    "Corefile:3 - Error during parsing: Unexpected '}' because no matching opening brace",
  );
});

test('braces on the same line; nested blocks; empty blocks', () => {
  const [b] = parse('. { whoami }\n');
  assert.deepEqual(shape(b.directives), [{ n: 'whoami', a: [] }]);
  const [c] = parse(
    '.:53 {\n  health { lameduck 5s }\n  forward . 1.1.1.1 { policy sequential }\n  a { b { c 1 } }\n  e {\n  }\n}',
  );
  assert.deepEqual(shape(c.directives), [
    { n: 'health', a: [], b: [{ n: 'lameduck', a: ['5s'] }] },
    { n: 'forward', a: ['.', '1.1.1.1'], b: [{ n: 'policy', a: ['sequential'] }] },
    { n: 'a', a: [], b: [{ n: 'b', a: [], b: [{ n: 'c', a: ['1'] }] }] },
    { n: 'e', a: [], b: [] },
  ]);
  const [d] = parse('. { health { lameduck 5s } }');
  assert.deepEqual(shape(d.directives), [{ n: 'health', a: [], b: [{ n: 'lameduck', a: ['5s'] }] }]);
  assert.equal(parse('. {\n}')[0].directives.length, 0);
  // Two server blocks on one line (caddy accepts it).
  assert.deepEqual(parse('a.org { whoami } b.org { log }').map(keys), [['dns://a.org.:53'], ['dns://b.org.:53']]);
});

test('nested kubernetes block with multi-line options', () => {
  const [b] = parse(
    'cluster.local {\n  kubernetes cluster.local {\n    pods insecure\n    fallthrough in-addr.arpa\n  }\n}',
  );
  assert.deepEqual(shape(b.directives), [
    {
      n: 'kubernetes',
      a: ['cluster.local'],
      b: [
        { n: 'pods', a: ['insecure'] },
        { n: 'fallthrough', a: ['in-addr.arpa'] },
      ],
    },
  ]);
});

test('unbalanced braces', () => {
  parseErr('.:53 {\n  whoami\n', "Corefile:1 - Error during parsing: Unexpected EOF: '{' is never closed");
  // The only '}' closes the inner block, so the server block is the one left open.
  parseErr(
    '.:53 {\n  forward . 1.1.1.1 {\n    policy random\n}\n',
    "Corefile:1 - Error during parsing: Unexpected EOF: '{' is never closed",
  );
  parseErr(
    '.:53 {\n  forward . 1.1.1.1 {\n    policy random\n',
    "Corefile:2 - Error during parsing: Unexpected EOF: '{' is never closed",
  );
  parseErr(
    '.:53 {\n  whoami\n}\n}\n',
    "Corefile:4 - Error during parsing: Unexpected '}' because no matching opening brace",
  );
  parseErr('}', "Corefile:1 - Error during parsing: Unexpected '}' because no matching opening brace");
  parseErr(
    '.:53 {\n  health { lameduck 5s } ready\n}',
    "Corefile:2 - Error during parsing: Unexpected token 'ready' after '}', expecting a new line",
  );
});

test("a directive's '{' must not start a line; a server block's may, as in CoreDNS", () => {
  parseErr(
    '.:53 {\n  forward . 1.1.1.1\n  {\n    policy random\n  }\n}',
    "Corefile:3 - Error during parsing: Unexpected token '{', expecting argument",
  );
  const [b] = parse('.:53\n{\n  whoami\n}');
  assert.deepEqual(
    b.directives.map((d) => d.name),
    ['whoami'],
  );
  parseErr('{\n  whoami\n}', "Corefile:1 - Error during parsing: Unexpected token '{', expecting argument");
  parseErr('. {\n  { whoami }\n}', "Corefile:2 - Error during parsing: Unexpected token '{', expecting argument");
});

test('directive order is preserved, repeated directives kept', () => {
  const [b] = parse('. {\n  forward a.org 1.1.1.1\n  cache\n  forward . 8.8.8.8\n  log\n}');
  assert.deepEqual(
    b.directives.map((d) => d.name),
    ['forward', 'cache', 'forward', 'log'],
  );
});

test('unknown directive', () => {
  parseErr('.:53 {\n  whoami\n  bogus 1 2\n}', "Corefile:3 - Error during parsing: Unknown directive 'bogus'", {
    knownDirectives: KNOWN,
  });
  parseErr('example.org\nwhoami\nfoo', "Corefile:3 - Error during parsing: Unknown directive 'foo'", {
    knownDirectives: KNOWN,
  });
  // Only top-level directives are checked; sub-directives are the plugin's business.
  const [b] = parse('. {\n  health {\n    whatever 1\n  }\n}', { knownDirectives: KNOWN });
  assert.equal(b.directives[0]?.block?.[0]?.name, 'whatever');
  // Env substitution happens before the check.
  assert.equal(
    parse('. {\n  {$D}\n}', { knownDirectives: KNOWN, env: { D: 'whoami' } })[0].directives[0]?.name,
    'whoami',
  );
});

// ---------- snippets ----------

test('snippets: defined at top level, imported at top level and in blocks', () => {
  const text = `(common) {
  errors
  cache 30 {
    denial 100
  }
}
(srv) {
  b.org {
    import common
  }
}
a.org {
  whoami
  import common
  log
}
import srv
c.org { import common }
`;
  const blocks = parse(text, { knownDirectives: KNOWN });
  assert.deepEqual(blocks.map(keys), [['dns://a.org.:53'], ['dns://b.org.:53'], ['dns://c.org.:53']]);
  const common = [
    { n: 'errors', a: [] },
    { n: 'cache', a: ['30'], b: [{ n: 'denial', a: ['100'] }] },
  ];
  assert.deepEqual(shape(blocks[0].directives), [{ n: 'whoami', a: [] }, ...common, { n: 'log', a: [] }]);
  assert.deepEqual(shape(blocks[1]!.directives), common);
  assert.deepEqual(shape(blocks[2]!.directives), common);
  // Snippet tokens keep the lines of the snippet definition.
  assert.deepEqual(
    blocks[0].directives.map((d) => d.line),
    [13, 2, 3, 15],
  );
});

test('snippet on one line with args after the import on the next line', () => {
  const [b] = parse('(s) { errors }\n. {\n  import s\n  forward . 1.1.1.1\n}');
  assert.deepEqual(shape(b.directives), [
    { n: 'errors', a: [] },
    { n: 'forward', a: ['.', '1.1.1.1'] },
  ]);
});

test('snippet errors', () => {
  parseErr(
    '(s) {\n  errors\n}\n(s) {\n  log\n}',
    'Corefile:4 - Error during parsing: redeclaration of previously declared snippet s',
  );
  parseErr(
    '(s) {\n  import s\n}\n. {\n  import s\n}',
    'Corefile:2 - Error during parsing: Import cycle detected: (s) -> (s)',
  );
  parseErr(
    '(a) {\n  import b\n}\n(b) {\n  import a\n}\n. {\n  import b\n}',
    'Corefile:2 - Error during parsing: Import cycle detected: (b) -> (a) -> (b)',
  );
  parseErr('(s) {\n  errors\n', "Corefile:1 - Error during parsing: Unexpected EOF: '{' is never closed");
  parseErr('(s)\nerrors', "Corefile:1 - Error during parsing: Snippet (s) must be followed by '{' on the same line");
});

test('snippet expansion cap', () => {
  // 10 levels, each importing the previous one 4 times: 4^9 expansions > 10,000.
  let text = '(s0) {\n  errors\n}\n';
  for (let i = 1; i < 10; i++)
    text += `(s${i}) {\n${'  import s' + (i - 1) + '\n'}${'  import s' + (i - 1) + '\n'}${'  import s' + (i - 1) + '\n'}${'  import s' + (i - 1) + '\n'}}\n`;
  text += '. {\n  import s9\n}\n';
  let caught: unknown;
  try {
    parse(text);
  } catch (e) {
    caught = e;
  }
  assert.ok(caught instanceof CorefileError);
  assert.match(caught.message, /maximum snippet import depth \(10000\) exceeded$/);
});

test('import syntax errors', () => {
  parseErr(
    '. {\n  import\n  whoami\n}',
    "Corefile:2 - Error during parsing: Wrong argument count or unexpected line ending after 'import'",
  );
  parseErr(
    '(s) {\n errors\n}\n. {\n  import s extra\n}',
    'Corefile:5 - Error during parsing: Import takes only one argument (glob pattern or file)',
  );
  parseErr('. {\n  import ""\n}', 'Corefile:2 - Error during parsing: Import requires a non-empty filepath');
  parseErr('. {\n  import {$NOPE}\n}', 'Corefile:2 - Error during parsing: Import requires a non-empty filepath');
});

// ---------- file imports ----------

test('import a file relative to the Corefile; tokens keep their own file and lines', () => {
  const dir = tmpDir();
  try {
    fs.writeFileSync(path.join(dir, 'common.conf'), '# common\nerrors\ncache 30 {\n  denial 5\n}\n');
    fs.mkdirSync(path.join(dir, 'sub'));
    fs.writeFileSync(path.join(dir, 'sub', 'servers.conf'), 'b.org {\n  import ../common.conf\n}\n');
    const core = path.join(dir, 'Corefile');
    fs.writeFileSync(
      core,
      `a.org {\n  whoami\n  import common.conf\n}\nimport sub/servers.conf\nc.org {\n  import ${path.join(dir, 'common.conf')}\n}\n`,
    );
    const seen: string[] = [];
    const blocks = parseCorefileFile(core, { env: {}, onFile: (p) => seen.push(p) });
    assert.deepEqual(blocks.map(keys), [['dns://a.org.:53'], ['dns://b.org.:53'], ['dns://c.org.:53']]);
    const common = [
      { n: 'errors', a: [] },
      { n: 'cache', a: ['30'], b: [{ n: 'denial', a: ['5'] }] },
    ];
    assert.deepEqual(shape(blocks[0]!.directives), [{ n: 'whoami', a: [] }, ...common]);
    assert.deepEqual(shape(blocks[1]!.directives), common);
    assert.deepEqual(shape(blocks[2]!.directives), common);
    const imported = blocks[0]!.directives[1]!;
    assert.equal(imported.file, path.join(dir, 'common.conf'));
    assert.equal(imported.line, 2);
    assert.equal(blocks[0]?.directives[2]?.block?.[0]?.line, 4);
    assert.equal(blocks[0]?.directives[0]?.file, core);
    assert.equal(blocks[1]?.file, path.join(dir, 'sub', 'servers.conf'));
    assert.equal(blocks[1]?.line, 1);
    assert.deepEqual(seen, [core, path.join(dir, 'common.conf'), path.join(dir, 'sub', 'servers.conf')]);
    assert.deepEqual(corefileFiles(core, { env: {} }), seen);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('errors inside imported files report the imported file and line, not its text', () => {
  const dir = tmpDir();
  try {
    fs.writeFileSync(path.join(dir, 'bad.conf'), 'errors\n\nbogus\n');
    const core = path.join(dir, 'Corefile');
    fs.writeFileSync(core, '. {\n  import bad.conf\n}\n');
    assert.throws(() => parseCorefileFile(core, { env: {}, knownDirectives: KNOWN }), {
      name: 'CorefileError',
      message: `${path.join(dir, 'bad.conf')}:3 - Error during parsing: Unknown directive '…'`,
    });
    fs.writeFileSync(path.join(dir, 'bad.conf'), 'a.org {\n  errors\n');
    fs.writeFileSync(core, 'import bad.conf\n');
    assert.throws(() => parseCorefileFile(core, { env: {} }), {
      message: `${path.join(dir, 'bad.conf')}:1 - Error during parsing: Unexpected EOF: '{' is never closed`,
    });
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('import a glob; empty glob is a warning; missing file is an error', () => {
  const dir = tmpDir();
  try {
    fs.mkdirSync(path.join(dir, 'conf.d'));
    fs.mkdirSync(path.join(dir, 'conf.d', 'adir.conf')); // directories never match a file glob
    fs.writeFileSync(path.join(dir, 'conf.d', 'b.conf'), 'b.org {\n  log\n}\n');
    fs.writeFileSync(path.join(dir, 'conf.d', 'a.conf'), 'a.org {\n  whoami\n}\n');
    fs.writeFileSync(path.join(dir, 'conf.d', 'c.txt'), 'c.org {\n}\n');
    fs.mkdirSync(path.join(dir, 'zones'));
    fs.mkdirSync(path.join(dir, 'zones', 'one'));
    fs.mkdirSync(path.join(dir, 'zones', 'two'));
    fs.writeFileSync(path.join(dir, 'zones', 'one', 'p.inc'), 'errors\n');
    fs.writeFileSync(path.join(dir, 'zones', 'two', 'q.inc'), 'loop\n');
    const core = path.join(dir, 'Corefile');
    fs.writeFileSync(
      core,
      'import conf.d/*.conf\nd.org {\n  import zones/*/?.inc\n  import nothing/*.conf\n  import conf.d/[!ab].txt.none\n}\n',
    );
    const res = parseCorefileFileWithFiles(core, { env: {} });
    assert.deepEqual(res.blocks.map(keys), [['dns://a.org.:53'], ['dns://b.org.:53'], ['dns://d.org.:53']]);
    assert.deepEqual(shape(res.blocks[2]!.directives), [
      { n: 'errors', a: [] },
      { n: 'loop', a: [] },
    ]);
    assert.deepEqual(res.warnings, [
      'No files matching import glob pattern: nothing/*.conf',
      'No files matching import glob pattern: conf.d/[!ab].txt.none',
    ]);
    assert.deepEqual(res.files, [
      core,
      path.join(dir, 'conf.d', 'a.conf'),
      path.join(dir, 'conf.d', 'b.conf'),
      path.join(dir, 'zones', 'one', 'p.inc'),
      path.join(dir, 'zones', 'two', 'q.inc'),
    ]);
    // Character classes.
    fs.writeFileSync(core, 'import conf.d/[!a].conf\n');
    assert.deepEqual(parseCorefileFile(core, { env: {} }).map(keys), [['dns://b.org.:53']]);
    fs.writeFileSync(core, 'import conf.d/[ac].*\n');
    assert.deepEqual(parseCorefileFile(core, { env: {} }).map(keys), [['dns://a.org.:53'], ['dns://c.org.:53']]);
    // Missing non-glob file.
    fs.writeFileSync(core, '. {\n  whoami\n  import missing.conf\n}\n');
    assert.throws(() => parseCorefileFile(core, { env: {} }), {
      message: `${core}:3 - Error during parsing: File to import not found: missing.conf`,
    });
    // A directory named explicitly.
    fs.writeFileSync(core, '. {\n  import zones\n}\n');
    assert.throws(() => parseCorefileFile(core, { env: {} }), {
      message: `${core}:2 - Error during parsing: Could not import ${path.join(dir, 'zones')}: is a directory`,
    });
    // Env var in the import pattern.
    fs.writeFileSync(core, 'import {$CONFD}/a.conf\n');
    assert.deepEqual(parseCorefileFile(core, { env: { CONFD: 'conf.d' } }).map(keys), [['dns://a.org.:53']]);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('import cycles are errors', () => {
  const dir = tmpDir();
  try {
    const core = path.join(dir, 'Corefile');
    const a = path.join(dir, 'a.conf');
    const b = path.join(dir, 'b.conf');
    fs.writeFileSync(core, '. {\n  import Corefile\n}\n');
    assert.throws(() => parseCorefileFile(core, { env: {} }), {
      message: `${core}:2 - Error during parsing: Import cycle detected: ${core} -> ${core}`,
    });
    fs.writeFileSync(core, '. {\n  import a.conf\n}\n');
    fs.writeFileSync(a, 'errors\nimport b.conf\n');
    fs.writeFileSync(b, '\nimport a.conf\n');
    assert.throws(() => parseCorefileFile(core, { env: {} }), {
      message: `${b}:2 - Error during parsing: Import cycle detected: ${a} -> ${b} -> ${a}`,
    });
    // Glob that matches the importing file itself.
    fs.writeFileSync(a, 'errors\n');
    fs.writeFileSync(b, 'import *.conf\n');
    fs.writeFileSync(core, '. {\n  import b.conf\n}\n');
    assert.throws(() => parseCorefileFile(core, { env: {} }), {
      message: `${b}:1 - Error during parsing: Import cycle detected: ${b} -> ${b}`,
    });
    // Importing the same file twice (not a cycle) is fine.
    fs.writeFileSync(core, 'a.org {\n  import a.conf\n  import a.conf\n}\n');
    const files: string[] = [];
    const [blk] = parseCorefileFile(core, { env: {}, onFile: (p) => files.push(p) });
    assert.deepEqual(shape(blk!.directives), [
      { n: 'errors', a: [] },
      { n: 'errors', a: [] },
    ]);
    assert.deepEqual(files, [core, a]);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('parseCorefile uses options.readFile for imports, relative to the given file name', () => {
  const reads: string[] = [];
  const files: Record<string, string> = { [path.resolve('/virtual/conf/extra.conf')]: 'log\n' };
  const [b] = parseCorefile('. {\n  import extra.conf\n}\n', '/virtual/conf/Corefile', {
    env: {},
    readFile: (p) => {
      reads.push(p);
      const t = files[p];
      if (t === undefined) throw Object.assign(new Error(`ENOENT: ${p}`), { code: 'ENOENT' });
      return t;
    },
  });
  assert.deepEqual(shape(b!.directives), [{ n: 'log', a: [] }]);
  assert.deepEqual(reads, [path.resolve('/virtual/conf/extra.conf')]);
});

test('parseCorefileFile: unreadable Corefile', () => {
  assert.throws(
    () => parseCorefileFile('/nonexistent/clusterdns/Corefile', { env: {} }),
    (e: unknown) => {
      assert.ok(e instanceof CorefileError);
      assert.equal(e.file, '/nonexistent/clusterdns/Corefile');
      assert.match(e.what, /^Could not read Corefile: /);
      return true;
    },
  );
});

test('CRLF line endings and a BOM', () => {
  const [b] = parse('\ufeff.:53 {\r\n  health {\r\n    lameduck 5s\r\n  }\r\n  errors\r\n}\r\n');
  assert.deepEqual(shape(b.directives), [
    { n: 'health', a: [], b: [{ n: 'lameduck', a: ['5s'] }] },
    { n: 'errors', a: [] },
  ]);
  assert.equal(b.directives[1]?.line, 5);
});

test('empty input and comment-only input give no blocks', () => {
  assert.deepEqual(parseCorefile('', 'Corefile', noEnv), []);
  assert.deepEqual(parseCorefile('# nothing\n\n   \n', 'Corefile', noEnv), []);
});

test('built-in default Corefile', () => {
  const [b] = parse('. {\n  whoami\n  log\n}', { knownDirectives: KNOWN });
  assert.deepEqual(keys(b), ['dns://.:53']);
  assert.deepEqual(shape(b.directives), [
    { n: 'whoami', a: [] },
    { n: 'log', a: [] },
  ]);
});

test('import followed by a closing brace on the same line', () => {
  const [b] = parse('(opts) {\n  lameduck 5s\n}\n. {\n  health { import opts }\n  errors\n}');
  assert.deepEqual(shape(b.directives), [
    { n: 'health', a: [], b: [{ n: 'lameduck', a: ['5s'] }] },
    { n: 'errors', a: [] },
  ]);
});

test('file import expansion cap (100,000)', () => {
  // f0..f4 each import the next file 10 times: 10 + 100 + ... + 100,000 expansions.
  const vfs: Record<string, string> = {};
  for (let i = 0; i < 5; i++) vfs[path.resolve(`/v/f${i}`)] = `import f${i + 1}\n`.repeat(10);
  vfs[path.resolve('/v/f5')] = 'errors\n';
  const started = Date.now();
  let caught: unknown;
  try {
    parseCorefile('. {\n  import f0\n}\n', '/v/Corefile', {
      env: {},
      readFile: (p) => {
        const t = vfs[p];
        if (t === undefined) throw Object.assign(new Error('ENOENT'), { code: 'ENOENT' });
        return t;
      },
    });
  } catch (e) {
    caught = e;
  }
  assert.ok(caught instanceof CorefileError);
  assert.equal(caught.what, 'maximum file import depth (100000) exceeded');
  assert.match(caught.file, /f[0-4]$/);
  assert.ok(Date.now() - started < 10_000, 'expansion stays fast');
});

test('glob characters in the Corefile directory itself are literal', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'clusterdns-[x]*-'));
  try {
    fs.mkdirSync(path.join(dir, 'conf.d'));
    fs.writeFileSync(path.join(dir, 'conf.d', 'a.conf'), 'a.org {\n}\n');
    fs.writeFileSync(path.join(dir, 'plain.conf'), 'b.org {\n}\n');
    const core = path.join(dir, 'Corefile');
    fs.writeFileSync(core, 'import conf.d/*.conf\nimport plain.conf\n');
    assert.deepEqual(parseCorefileFile(core, { env: {} }).map(keys), [['dns://a.org.:53'], ['dns://b.org.:53']]);
    fs.writeFileSync(core, `import ${path.join(dir, 'conf.d')}/?.conf\n`);
    // An absolute pattern is globbed as written: '[x]*' in it is a wildcard and does not match the directory name.
    const warnings: string[] = [];
    assert.deepEqual(parseCorefileFile(core, { env: {}, onWarning: (w) => warnings.push(w) }), []);
    assert.equal(warnings.length, 1);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
