// Names as text, as miekg/dns (and so CoreDNS's log, errors and dig-like output) writes them:
// `. space ' @ ; ( ) " \` get a backslash, octets below 0x20 or above 0x7e become \DDD,
// everything else (`$`, `~`, `-`, `*`...) stays as it is.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { decodeName, nameToLabels, quotedCharacterString } from '../../src/dns/name.js';
import { parseQuery } from '../../src/dns/query.js';

/** A query for one name given as wire labels. */
function queryFor(labels: number[][]): Buffer {
  const name = Buffer.concat([...labels.map((l) => Buffer.from([l.length, ...l])), Buffer.from([0])]);
  const header = Buffer.from([0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
  return Buffer.concat([header, name, Buffer.from([0, 1, 0, 1])]);
}

const bytes = (s: string) => [...Buffer.from(s, 'latin1')];

// Hand-written vectors from miekg/dns's isDomainNameLabelSpecial and escapeByte.
const VECTORS: Array<[number[][], string]> = [
  [[bytes('a"b'), bytes('test')], 'a\\"b.test.'],
  [[bytes("it's")], "it\\'s."],
  [[bytes('(x)')], '\\(x\\).'],
  [[bytes('a;b@c')], 'a\\;b\\@c.'],
  [[bytes('a b')], 'a\\ b.'],
  [[bytes('a.b'), bytes('c')], 'a\\.b.c.'],
  [[bytes('back\\slash')], 'back\\\\slash.'],
  [[bytes('$dollar~tilde*-_+=!#%&,/:<>?[]^`{|}')], '$dollar~tilde*-_+=!#%&,/:<>?[]^`{|}.'],
  [[[0x00, 0x1f, 0x7f, 0x80, 0xff]], '\\000\\031\\127\\128\\255.'],
  [[[0x21, 0x7e]], '!~.'],
  [[bytes('\n')], '\\010.'],
];

test("query names are written with miekg/dns's escapes, on the hot path and in the full decoder alike", () => {
  for (const [labels, text] of VECTORS) {
    const wire = queryFor(labels);
    assert.equal(decodeName(wire, 12).name, text, `decodeName ${JSON.stringify(labels)}`);
    const q = parseQuery(wire);
    assert.ok(typeof q === 'object', 'parsed');
    assert.equal(q.qname, text, `parseQuery ${JSON.stringify(labels)}`);
    // And the text reads back to the same octets.
    assert.deepEqual(
      nameToLabels(text).map((l) => [...l]),
      labels,
    );
  }
});

test("every octet is either itself, backslash-escaped or \\DDD, by miekg's rule", () => {
  const special = new Set([...'. \'@;()"\\'].map((c) => c.charCodeAt(0)));
  for (let b = 0; b < 256; b++) {
    const want = special.has(b)
      ? '\\' + String.fromCharCode(b)
      : b < 0x20 || b > 0x7e
        ? '\\' + String(b).padStart(3, '0')
        : String.fromCharCode(b);
    const wire = queryFor([[0x61, b]]);
    assert.equal(decodeName(wire, 12).name, `a${want}.`, `octet ${b}`);
    assert.equal((parseQuery(wire) as { qname: string }).qname, `a${want}.`, `octet ${b} (hot path)`);
  }
});

test('TXT strings are quoted as miekg/dns quotes them: " and \\ escaped, the unprintable as \\DDD', () => {
  assert.equal(quotedCharacterString("plain text; with (parens) @ 's"), '"plain text; with (parens) @ \'s"');
  assert.equal(quotedCharacterString('say "hi" \\ bye'), '"say \\"hi\\" \\\\ bye"');
  assert.equal(quotedCharacterString('\n\x00\x7f\xff~'), '"\\010\\000\\127\\255~"');
});
