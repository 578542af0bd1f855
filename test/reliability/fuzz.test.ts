// Property fuzzing of the wire codec and the Corefile parser. CI runs 200,000 cases of each;
// `npm run fuzz` runs 1,000,000 (FUZZ_CASES). A failure prints its seed and case number, and
// FUZZ_SEED=<seed> FUZZ_FROM=<case> replays it.
//
// Codec properties, for generated messages and for mutations of their bytes:
//  - parseQuery never throws; decodeMessage throws nothing but DecodeError;
//  - whatever decodes re-encodes (or fails with EncodeError), and decoding that gives the same
//    message back (names compared as DNS compares them: ASCII case folded, nothing else);
//  - encoding is a fixed point after one round: encode(decode(encode(m))) is encode(m);
//  - when both parse a query, parseQuery and decodeMessage agree on the question and EDNS.
// Corefile properties, for generated and mutated Corefiles: parseCorefile returns server
// blocks or throws a CorefileError with a file and line, never anything else, and never hangs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  decodeMessage,
  DecodeError,
  encodeMessage,
  EncodeError,
  type Message,
  type RecordData,
  type ResourceRecord,
} from '../../src/dns/message.js';
import { parseQuery } from '../../src/dns/query.js';
import { QType } from '../../src/dns/constants.js';
import { parseCorefile } from '../../src/corefile/parser.js';
import { CorefileError } from '../../src/corefile/errors.js';

const CASES = Number(process.env.FUZZ_CASES ?? 200_000);
const SEED = Number(process.env.FUZZ_SEED ?? 20261201);
const FROM = Number(process.env.FUZZ_FROM ?? 0);

/** xorshift32: deterministic, so a failing case can be replayed from its seed and index. */
function rng(seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5;
    s >>>= 0;
    return s / 0x100000000;
  };
}

type Rand = () => number;
const int = (r: Rand, n: number) => Math.floor(r() * n);
const pick = <T>(r: Rand, xs: readonly T[]): T => xs[int(r, xs.length)]!;

// ---------------------------------------------------------------- generated messages

// a\.b (one label holding a dot) against a + b (two labels): the same text, other names.
const WORDS = [
  'www',
  'example',
  'org',
  'cluster',
  'local',
  'svc',
  'default',
  'kube-dns',
  '_http',
  '_tcp',
  'a',
  'b',
  'a\\.b',
  'Mixed',
  'EXAMPLE',
];

function label(r: Rand): string {
  const kind = int(r, 10);
  if (kind < 6) return pick(r, WORDS);
  if (kind < 8) {
    // Any octet at all, escaped as presentation form (miekg/dns's) does: \DDD, and a backslash before . space ' @ ; ( ) " \.
    const len = 1 + int(r, kind === 6 ? 8 : 63);
    let s = '';
    for (let i = 0; i < len; i++) {
      const b = int(r, 256);
      if ('. \'@;()"\\'.includes(String.fromCharCode(b))) s += `\\${String.fromCharCode(b)}`;
      else if (b < 0x20 || b > 0x7e) s += `\\${String(b).padStart(3, '0')}`;
      else s += String.fromCharCode(b);
    }
    return s;
  }
  return 'x'.repeat(1 + int(r, 63));
}

function wireLength(name: string): number {
  // Presentation length minus escapes: good enough to keep generated names legal.
  return name.replace(/\\\d{3}|\\./g, 'x').length + 1;
}

function name(r: Rand): string {
  if (int(r, 12) === 0) return '.';
  let n = '';
  const labels = 1 + int(r, 6);
  for (let i = 0; i < labels; i++) {
    const next = `${label(r)}.`;
    if (wireLength(n + next) > 255) break;
    n += next;
  }
  return n === '' ? '.' : n;
}

/** The same name with letters' case swapped: ASCII, and Latin-1 octets (\\192 vs \\224), which DNS does not fold. */
function caseVariant(r: Rand, n: string): string {
  return n.replace(/\\(\d{3})|[A-Za-z]/g, (m: string, d: string | undefined) => {
    if (r() < 0.5) return m;
    if (d === undefined) return m === m.toLowerCase() ? m.toUpperCase() : m.toLowerCase();
    const v = Number(d);
    if (v >= 0xc0 && v <= 0xde && v !== 0xd7) return `\\${v + 0x20}`;
    if (v >= 0xe0 && v <= 0xfe && v !== 0xf7) return `\\${v - 0x20}`;
    return m;
  });
}

function ipv4(r: Rand): string {
  return `${int(r, 256)}.${int(r, 256)}.${int(r, 256)}.${int(r, 256)}`;
}

function ipv6(r: Rand): string {
  return Array.from({ length: 8 }, () => int(r, 0x10000).toString(16)).join(':');
}

function record(r: Rand, earlier: string[]): ResourceRecord {
  const types = [
    QType.A,
    QType.AAAA,
    QType.CNAME,
    QType.NS,
    QType.PTR,
    QType.MX,
    QType.TXT,
    QType.SRV,
    QType.SOA,
    99,
    65280,
    QType.HINFO,
  ];
  const type = pick(r, types);
  let data: RecordData;
  switch (type) {
    case QType.A:
      data = { address: ipv4(r) };
      break;
    case QType.AAAA:
      data = { address: ipv6(r) };
      break;
    case QType.CNAME:
    case QType.NS:
    case QType.PTR:
      data = { target: name(r) };
      break;
    case QType.MX:
      data = { preference: int(r, 65536), exchange: name(r) };
      break;
    case QType.TXT:
      data = {
        texts: Array.from({ length: 1 + int(r, 3) }, () =>
          String.fromCharCode(...Array.from({ length: int(r, 80) }, () => int(r, 256))),
        ),
      };
      break;
    case QType.SRV:
      data = { priority: int(r, 65536), weight: int(r, 65536), port: int(r, 65536), target: name(r) };
      break;
    case QType.SOA:
      data = {
        mname: name(r),
        rname: name(r),
        serial: int(r, 2 ** 32),
        refresh: int(r, 2 ** 32),
        retry: int(r, 2 ** 32),
        expire: int(r, 2 ** 32),
        minimum: int(r, 2 ** 32),
      };
      break;
    default:
      data = { raw: Buffer.from(Array.from({ length: int(r, 40) }, () => int(r, 256))) };
  }
  // Owners often repeat an earlier name, spelled differently: what compression has to get right.
  const owner = earlier.length > 0 && r() < 0.4 ? caseVariant(r, pick(r, earlier)) : name(r);
  earlier.push(owner);
  return { name: owner, type, class: int(r, 8) === 0 ? int(r, 65536) : 1, ttl: int(r, 2 ** 32), data };
}

function message(r: Rand): Message {
  const m: Message = {
    id: int(r, 65536),
    qr: r() < 0.5,
    opcode: pick(r, [0, 0, 0, 4, 5, int(r, 16)]),
    aa: r() < 0.5,
    tc: r() < 0.2,
    rd: r() < 0.5,
    ra: r() < 0.5,
    ad: r() < 0.2,
    cd: r() < 0.2,
    rcode: int(r, 16),
    questions: [],
    answers: [],
    authorities: [],
    additionals: [],
    edns: null,
  };
  const qd = int(r, 10) === 0 ? int(r, 3) : 1;
  for (let i = 0; i < qd; i++)
    m.questions.push({
      name: name(r),
      type: int(r, 4) === 0 ? int(r, 65536) : pick(r, [1, 28, 33, 12, 255, 5]),
      class: int(r, 10) === 0 ? int(r, 65536) : 1,
    });
  const earlier = m.questions.map((q) => q.name);
  for (const list of [m.answers, m.authorities, m.additionals]) {
    const n = int(r, 3) === 0 ? int(r, 6) : 0;
    for (let i = 0; i < n; i++) list.push(record(r, earlier));
  }
  if (r() < 0.5) {
    m.edns = {
      udpSize: pick(r, [512, 1232, 4096, 65535, int(r, 65536)]),
      version: int(r, 8) === 0 ? int(r, 256) : 0,
      do: r() < 0.5,
      zflags: int(r, 8) === 0 ? int(r, 0x8000) & 0x7fff : 0,
      options: Array.from({ length: int(r, 3) }, () => ({
        code: int(r, 65536),
        data: Buffer.from(Array.from({ length: int(r, 20) }, () => int(r, 256))),
      })),
    };
    if (int(r, 6) === 0) m.rcode = int(r, 4096);
  }
  return m;
}

// ---------------------------------------------------------------- mutations

function mutate(r: Rand, base: Buffer): Buffer {
  const b = Buffer.from(base);
  switch (int(r, 9)) {
    case 0: // flip bits
      for (let i = 0, n = 1 + int(r, 6); i < n && b.length; i++) b[int(r, b.length)]! ^= 1 << int(r, 8);
      return b;
    case 1: // overwrite bytes with values that mean something: pointers, big lengths
      for (let i = 0, n = 1 + int(r, 4); i < n && b.length; i++)
        b[int(r, b.length)] = pick(r, [0, 1, 0x3f, 0x40, 0x80, 0xc0, 0xc0 | int(r, 64), 0xff, int(r, 256)]);
      return b;
    case 2: // cut anywhere
      return b.subarray(0, int(r, b.length + 1));
    case 3: // counts that lie
      if (b.length >= 12) b.writeUInt16BE(pick(r, [0, 1, 2, 3, 0xffff, int(r, 65536)]), 4 + 2 * int(r, 4));
      return b;
    case 4: // a pointer somewhere
      if (b.length >= 14) b.writeUInt16BE(0xc000 | int(r, Math.min(b.length + 4, 0x3fff)), 12 + int(r, b.length - 13));
      return b;
    case 5: // junk appended
      return Buffer.concat([b, Buffer.from(Array.from({ length: 1 + int(r, 30) }, () => int(r, 256)))]);
    case 6: {
      // a slice duplicated into the middle (repeats records and names)
      if (b.length < 14) return b;
      const from = 12 + int(r, b.length - 12);
      const len = int(r, b.length - from + 1);
      const at = 12 + int(r, b.length - 12);
      return Buffer.concat([b.subarray(0, at), b.subarray(from, from + len), b.subarray(at)]);
    }
    case 7: // pure noise, sometimes with a plausible header
      return Buffer.from(Array.from({ length: int(r, 300) }, (_, i) => (i === 5 ? 1 : int(r, 256))));
    default: // several mutations in a row
      return mutate(r, mutate(r, b));
  }
}

// ---------------------------------------------------------------- comparison

/** DNS compares names with ASCII letters folded (RFC 4343), and nothing else. */
function foldName(n: string): string {
  return n.replace(/[A-Z]/g, (c) => c.toLowerCase());
}

function normalData(type: number, d: RecordData): unknown {
  if ('texts' in d) return { texts: d.texts.length === 0 ? [''] : d.texts }; // an empty TXT goes out as one empty string
  if ('raw' in d) return { raw: d.raw.toString('hex') };
  if ('target' in d) return { ...d, target: foldName(d.target) };
  if ('exchange' in d) return { ...d, exchange: foldName(d.exchange) };
  if ('mname' in d) return { ...d, mname: foldName(d.mname), rname: foldName(d.rname) };
  if ('address' in d && type === QType.AAAA) return { address: d.address }; // one canonical text form per address
  return d;
}

function normal(m: Message): unknown {
  const rr = (x: ResourceRecord) => ({
    name: foldName(x.name),
    type: x.type,
    class: x.class,
    ttl: x.ttl,
    data: normalData(x.type, x.data),
  });
  return {
    ...m,
    questions: m.questions.map((q) => ({ ...q, name: foldName(q.name) })),
    answers: m.answers.map(rr),
    authorities: m.authorities.map(rr),
    additionals: m.additionals.map(rr),
    edns: m.edns && { ...m.edns, options: m.edns.options.map((o) => ({ code: o.code, data: o.data.toString('hex') })) },
  };
}

/** The codec properties for one input; returns the encoded form of what decoded (to mutate further). */
function checkWire(buf: Buffer): Buffer | null {
  const pq = parseQuery(buf); // must never throw
  let m: Message;
  try {
    m = decodeMessage(buf);
  } catch (e) {
    if (e instanceof DecodeError) return null;
    throw e;
  }
  if (typeof pq !== 'number' && m.questions.length === 1) {
    const q = m.questions[0]!;
    assert.equal(pq.qname, q.name, 'parseQuery and decodeMessage disagree on the name');
    assert.equal(pq.qtype, q.type);
    assert.equal(pq.qclass, q.class);
    assert.equal(pq.edns?.udpSize, m.edns?.udpSize);
    assert.equal(pq.edns?.do, m.edns?.do);
  }
  let enc: Buffer;
  try {
    enc = encodeMessage(m);
  } catch (e) {
    if (e instanceof EncodeError) return null;
    throw e;
  }
  checkRoundTrip(m, enc);
  return enc;
}

function checkRoundTrip(m: Message, enc: Buffer): void {
  const back = decodeMessage(enc);
  if ((back.tc && !m.tc) || enc.length > 65535) return; // did not fit: truncated on purpose
  assert.deepEqual(normal(back), normal(m), 'decode(encode(m)) differs from m');
  assert.ok(encodeMessage(back).equals(enc), 'encoding is not a fixed point after one round');
}

function hex(b: Buffer): string {
  return b.toString('hex');
}

test(
  `codec: ${CASES.toLocaleString('en-US')} generated and mutated messages keep the properties`,
  { timeout: 600_000 },
  () => {
    let decoded = 0;
    let generated = 0;
    for (let i = FROM; i < FROM + CASES; i++) {
      const r = rng(SEED ^ Math.imul(i + 1, 0x9e3779b1));
      let input: Buffer = Buffer.alloc(0);
      try {
        if (i % 4 === 0) {
          // A generated message must encode (its parts are legal) and come back the same.
          const m = message(r);
          let enc: Buffer;
          try {
            enc = encodeMessage(m);
          } catch (e) {
            if (e instanceof EncodeError && m.rcode > 0xf && !m.edns) continue;
            throw e;
          }
          input = enc;
          generated++;
          checkRoundTrip(m, enc);
          if (checkWire(enc) !== null) decoded++;
        } else {
          input = mutate(r, encodeMessage(message(r)));
          if (checkWire(input) !== null) decoded++;
        }
      } catch (e) {
        assert.fail(
          `case ${i} (FUZZ_SEED=${SEED} FUZZ_FROM=${i} FUZZ_CASES=1), input ${hex(input)}:\n${(e as Error).stack}`,
        );
      }
    }
    // The mutations must not all be rejected, or the round trip would prove nothing (not judged on a replay).
    if (CASES >= 1000) {
      assert.ok(decoded > CASES / 5, `only ${decoded} of ${CASES} inputs decoded`);
      assert.ok(generated > CASES / 5);
    }
  },
);

// ---------------------------------------------------------------- Corefiles

const DIRECTIVES = [
  'whoami',
  'log',
  'errors',
  'cache 30',
  'forward . 127.0.0.1:53 {\n max_concurrent 10\n}',
  'hosts {\n 10.0.0.1 a.example\n fallthrough\n}',
  'kubernetes cluster.local in-addr.arpa {\n pods insecure\n fallthrough in-addr.arpa\n ttl 30\n}',
  'reload 2s',
  'health :8080 {\n lameduck 5s\n}',
  'ready',
  'prometheus :9153',
  'loop',
  'loadbalance',
  'bind 127.0.0.1',
  'import snip',
  'import *.conf',
  'import missing/*.db',
  '{$HOME}',
  '{%PATH%}',
  '"quoted arg" `back ticked`',
  '# a comment',
  'x\\\ny',
];
const KEYS = [
  '.',
  '.:53',
  'example.org',
  'dns://.:1053',
  'tls://.:853',
  'cluster.local:5353 in-addr.arpa',
  '10.0.0.0/24',
  'grpc://x',
  '[::1]:53',
  'a.b.c.d.e',
  'https://example.org',
  '*.example',
  '',
];
const PIECES = [
  '{',
  '}',
  '\n',
  ' ',
  '"',
  '`',
  '\\',
  '#',
  '(',
  ')',
  'import',
  '{$',
  '}',
  ':',
  '/',
  '.',
  '*',
  '?',
  '[',
  ']',
  '\t',
  '\r\n',
  '\u0000',
  'é',
  '\uffff',
  'import (snip)',
  '{$NOPE}',
  '{%X%}',
];

function corefile(r: Rand): string {
  let out = '';
  if (r() < 0.3) out += `(snip) {\n ${pick(r, DIRECTIVES)}\n ${pick(r, DIRECTIVES)}\n}\n`;
  const blocks = 1 + int(r, 3);
  for (let b = 0; b < blocks; b++) {
    out += `${pick(r, KEYS)}${r() < 0.3 ? ` ${pick(r, KEYS)}` : ''} {\n`;
    for (let d = 0, n = int(r, 6); d < n; d++) out += `    ${pick(r, DIRECTIVES)}\n`;
    out += '}\n';
  }
  return out;
}

function mutateText(r: Rand, text: string): string {
  let t = text;
  for (let i = 0, n = 1 + int(r, 4); i < n; i++) {
    const at = int(r, t.length + 1);
    switch (int(r, 4)) {
      case 0:
        t = t.slice(0, at) + pick(r, PIECES) + t.slice(at);
        break;
      case 1:
        t = t.slice(0, at) + t.slice(at + 1 + int(r, 10));
        break;
      case 2:
        t = t.slice(0, at) + String.fromCharCode(int(r, 0x3000)) + t.slice(at + 1);
        break;
      default:
        t = t.slice(0, at) + t.slice(int(r, t.length + 1), int(r, t.length + 1)) + t.slice(at);
    }
  }
  return t;
}

test(
  `Corefile parser: ${CASES.toLocaleString('en-US')} generated and mutated Corefiles parse or fail with FILE:LINE`,
  { timeout: 600_000 },
  () => {
    // Imports resolve against an in-memory tree: the fuzzer never reads the real disk.
    const files: Record<string, string> = {
      '/fuzz/a.conf': 'whoami\n',
      '/fuzz/b.conf': 'import a.conf\n',
      '/fuzz/self.conf': 'import self.conf\n',
    };
    const readFile = (p: string): string => {
      const f = files[p];
      if (f === undefined)
        throw Object.assign(new Error(`ENOENT: no such file or directory, open '${p}'`), { code: 'ENOENT' });
      return f;
    };
    let parsed = 0;
    let refused = 0;
    for (let i = FROM; i < FROM + CASES; i++) {
      const r = rng(SEED ^ Math.imul(i + 1, 0x85ebca6b));
      const text = i % 3 === 0 ? corefile(r) : mutateText(r, corefile(r));
      const t0 = performance.now();
      try {
        parseCorefile(text, '/fuzz/Corefile', {
          env: { HOME: '/root', PATH: 'a b {', X: '}' },
          readFile,
          onWarning: () => {},
        });
        parsed++;
      } catch (e) {
        if (!(e instanceof CorefileError)) {
          assert.fail(
            `case ${i} (FUZZ_SEED=${SEED} FUZZ_FROM=${i} FUZZ_CASES=1): ${(e as Error).stack}\n--- input ---\n${text}`,
          );
        }
        assert.match(
          e.message,
          /^\/fuzz\/[^:]+:\d+ - Error during parsing: ./,
          `case ${i}: an error without FILE:LINE: ${e.message}`,
        );
        refused++;
      }
      const ms = performance.now() - t0;
      assert.ok(ms < 1000, `case ${i} took ${ms.toFixed(0)} ms:\n${text}`);
    }
    if (CASES >= 1000)
      assert.ok(
        parsed > CASES / 10 && refused > CASES / 10,
        `parsed ${parsed}, refused ${refused}: the generator should make both`,
      );
  },
);
