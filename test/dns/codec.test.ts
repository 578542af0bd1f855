// Round trips of the codec, checked against dns-packet (an independent implementation).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as dnsPacket from 'dns-packet';
import {
  decodeMessage,
  emptyMessage,
  encodeMessage,
  type Message,
  type ResourceRecord,
} from '../../src/dns/message.js';
import { QType, QClass, Rcode } from '../../src/dns/constants.js';
import { decodeName } from '../../src/dns/name.js';
import { parseQuery, QueryProblem } from '../../src/dns/query.js';

function rr(name: string, type: number, data: ResourceRecord['data'], ttl = 300): ResourceRecord {
  return { name, type, class: QClass.IN, ttl, data };
}

function sample(): Message {
  const m = emptyMessage(0x1234);
  m.qr = true;
  m.aa = true;
  m.rd = true;
  m.questions.push({ name: 'svc1.testns.svc.cluster.local.', type: QType.SRV, class: QClass.IN });
  m.answers.push(
    rr(
      'svc1.testns.svc.cluster.local.',
      QType.SRV,
      { priority: 0, weight: 100, port: 80, target: 'svc1.testns.svc.cluster.local.' },
      5,
    ),
  );
  m.answers.push(rr('svc1.testns.svc.cluster.local.', QType.A, { address: '10.0.0.1' }, 5));
  m.answers.push(rr('svc1.testns.svc.cluster.local.', QType.AAAA, { address: 'fd00::1' }, 5));
  m.answers.push(rr('alias.example.org.', QType.CNAME, { target: 'svc1.testns.svc.cluster.local.' }));
  m.answers.push(rr('example.org.', QType.MX, { preference: 10, exchange: 'mail.example.org.' }));
  m.answers.push(rr('example.org.', QType.TXT, { texts: ['v=spf1 -all', 'second string'] }));
  m.answers.push(rr('1.0.0.10.in-addr.arpa.', QType.PTR, { target: 'svc1.testns.svc.cluster.local.' }));
  m.authorities.push(
    rr(
      'cluster.local.',
      QType.SOA,
      {
        mname: 'ns.dns.cluster.local.',
        rname: 'hostmaster.cluster.local.',
        serial: 1700000000,
        refresh: 7200,
        retry: 1800,
        expire: 86400,
        minimum: 5,
      },
      5,
    ),
  );
  m.authorities.push(rr('cluster.local.', QType.NS, { target: 'ns.dns.cluster.local.' }));
  m.additionals.push(rr('example.org.', 65280, { raw: Buffer.from([1, 2, 3, 4, 5]) }));
  m.edns = {
    udpSize: 1232,
    version: 0,
    do: true,
    zflags: 0,
    options: [{ code: 10, data: Buffer.from('0102030405060708', 'hex') }],
  };
  return m;
}

test('a message with every supported type survives encode then decode unchanged', () => {
  const m = sample();
  const back = decodeMessage(encodeMessage(m));
  assert.deepEqual(back, m);
});

test('dns-packet decodes what we encode to the same records', () => {
  const wire = encodeMessage(sample());
  const p = dnsPacket.decode(wire);
  assert.equal(p.id, 0x1234);
  assert.equal(p.answers!.length, 7);
  const srv = p.answers![0] as dnsPacket.SrvAnswer;
  assert.deepEqual(srv.data, { priority: 0, weight: 100, port: 80, target: 'svc1.testns.svc.cluster.local' });
  assert.equal((p.answers![1] as dnsPacket.StringAnswer).data, '10.0.0.1');
  assert.equal((p.answers![2] as dnsPacket.StringAnswer).data, 'fd00::1');
  assert.equal((p.answers![3] as dnsPacket.StringAnswer).data, 'svc1.testns.svc.cluster.local');
  const txt = p.answers![5] as dnsPacket.TxtAnswer;
  assert.deepEqual(
    (txt.data as Buffer[]).map((b) => b.toString()),
    ['v=spf1 -all', 'second string'],
  );
  const soa = p.authorities![0] as dnsPacket.SoaAnswer;
  assert.equal(soa.data.mname, 'ns.dns.cluster.local');
  assert.equal(soa.data.minimum, 5);
  const opt = p.additionals!.find((a) => a.type === 'OPT') as dnsPacket.OptAnswer;
  assert.equal(opt.udpPayloadSize, 1232);
  assert.equal((opt.flags ?? 0) & 0x8000, 0x8000);
});

test('we decode what dns-packet encodes', () => {
  const wire = dnsPacket.encode({
    type: 'response',
    id: 7,
    flags: dnsPacket.AUTHORITATIVE_ANSWER,
    questions: [{ type: 'A', name: 'backend.default.svc.cluster.local' }],
    answers: [
      { type: 'A', name: 'backend.default.svc.cluster.local', ttl: 30, data: '10.96.120.15' },
      { type: 'AAAA', name: 'backend.default.svc.cluster.local', ttl: 30, data: '2001:db8::15' },
      {
        type: 'SRV',
        name: '_http._tcp.backend.default.svc.cluster.local',
        ttl: 30,
        data: { priority: 0, weight: 100, port: 8080, target: 'backend.default.svc.cluster.local' },
      },
    ],
  });
  const m = decodeMessage(wire);
  assert.equal(m.id, 7);
  assert.equal(m.aa, true);
  assert.equal(m.answers[0]!.name, 'backend.default.svc.cluster.local.');
  assert.deepEqual(m.answers[0]!.data, { address: '10.96.120.15' });
  assert.deepEqual(m.answers[1]!.data, { address: '2001:db8::15' });
  assert.deepEqual(m.answers[2]!.data, {
    priority: 0,
    weight: 100,
    port: 8080,
    target: 'backend.default.svc.cluster.local.',
  });
});

test('names are compressed on encode: the answer owner is a pointer to the question', () => {
  const m = emptyMessage(1);
  m.qr = true;
  m.questions.push({ name: 'backend.default.svc.cluster.local.', type: QType.A, class: QClass.IN });
  m.answers.push(rr('backend.default.svc.cluster.local.', QType.A, { address: '10.96.120.15' }));
  const wire = encodeMessage(m);
  // header 12 + qname 35 + 4, then the answer's owner is c0 0c.
  assert.equal(wire.length, 12 + 35 + 4 + 2 + 10 + 4);
  assert.equal(wire.readUInt16BE(12 + 35 + 4), 0xc00c);
  // dns-packet has no compression; the same message from it is longer.
  const theirs = dnsPacket.encode({
    type: 'response',
    id: 1,
    questions: [{ type: 'A', name: 'backend.default.svc.cluster.local' }],
    answers: [{ type: 'A', name: 'backend.default.svc.cluster.local', ttl: 300, data: '10.96.120.15' }],
  });
  assert.ok(theirs.length > wire.length);
});

test('compression reuses only a suffix spelled byte for byte the same: every name keeps its letter case', () => {
  const m = emptyMessage(1);
  m.questions.push({ name: 'Ext-Internal.default.SVC.cluster.local.', type: QType.A, class: QClass.IN });
  m.answers.push(rr('Ext-Internal.default.SVC.cluster.local.', QType.CNAME, { target: 'api.prod.svc.cluster.local.' }));
  m.answers.push(rr('b.example.org.', QType.CNAME, { target: 'c.EXAMPLE.org.' }));
  const wire = encodeMessage(m);
  const back = decodeMessage(wire);
  assert.deepEqual(back.answers[0]!.data, { target: 'api.prod.svc.cluster.local.' });
  assert.equal(back.answers[1]!.name, 'b.example.org.');
  assert.deepEqual(back.answers[1]!.data, { target: 'c.EXAMPLE.org.' });
  // "cluster.local." is spelt the same in the question and the target: that suffix is a pointer.
  assert.ok(wire.includes(Buffer.from('\x04prod\x03svc\xc0', 'latin1')), wire.toString('hex'));
});

test('extended rcode BADVERS is split between the header and the OPT record', () => {
  const m = emptyMessage(9);
  m.qr = true;
  m.rcode = Rcode.BADVERS;
  m.edns = { udpSize: 1232, version: 0, do: false, zflags: 0, options: [] };
  const wire = encodeMessage(m);
  assert.equal(wire[3]! & 0xf, 0);
  const back = decodeMessage(wire);
  assert.equal(back.rcode, Rcode.BADVERS);
  const p = dnsPacket.decode(wire);
  const opt = p.additionals!.find((a) => a.type === 'OPT') as dnsPacket.OptAnswer;
  assert.equal(opt.extendedRcode, 1);
});

test('pointer loops, forward pointers, long labels and long names are rejected', () => {
  const header = Buffer.alloc(12);
  header.writeUInt16BE(1, 4);
  const selfLoop = Buffer.concat([header, Buffer.from([0xc0, 12, 0, 1, 0, 1])]);
  assert.throws(() => decodeMessage(selfLoop), /pointer/);
  const forward = Buffer.concat([header, Buffer.from([0xc0, 20, 0, 1, 0, 1, 0, 0, 1, 0x61, 0])]);
  assert.throws(() => decodeMessage(forward), /pointer/);
  const twoStep = Buffer.concat([header, Buffer.from([1, 0x61, 0xc0, 14, 0, 1, 0, 1])]);
  assert.throws(() => decodeMessage(twoStep), /pointer/);
  const longLabel = Buffer.concat([header, Buffer.from([64]), Buffer.alloc(64, 0x61), Buffer.from([0, 0, 1, 0, 1])]);
  assert.throws(() => decodeMessage(longLabel));
  const parts: number[] = [];
  for (let i = 0; i < 5; i++) parts.push(63, ...new Array<number>(63).fill(0x61));
  const longName = Buffer.concat([header, Buffer.from(parts), Buffer.from([0, 0, 1, 0, 1])]);
  assert.throws(() => decodeMessage(longName), /255/);
  assert.throws(() => decodeMessage(Buffer.alloc(5)), /header/);
});

test('counts that lie are caught instead of read past the end', () => {
  const m = emptyMessage(3);
  m.questions.push({ name: 'example.org.', type: QType.A, class: QClass.IN });
  const wire = encodeMessage(m);
  wire.writeUInt16BE(5, 6); // claims 5 answers, has none
  assert.throws(() => decodeMessage(wire), /past the end/);
});

test('labels with dots, backslashes and binary bytes are escaped in presentation form and round-trip', () => {
  const name = 'a\\.b.c\\\\d.\\000\\255x.example.';
  const m = emptyMessage(1);
  m.questions.push({ name, type: QType.TXT, class: QClass.IN });
  const back = decodeMessage(encodeMessage(m));
  assert.equal(back.questions[0]!.name, name);
  const raw = encodeMessage(m);
  assert.equal(decodeName(raw, 12).name, name);
});

test('encoding with a size limit drops records from the end and sets TC', () => {
  const m = emptyMessage(1);
  m.qr = true;
  m.questions.push({ name: 'big.example.', type: QType.A, class: QClass.IN });
  for (let i = 0; i < 100; i++) m.answers.push(rr('big.example.', QType.A, { address: `10.0.${i >> 8}.${i & 255}` }));
  m.edns = { udpSize: 512, version: 0, do: false, zflags: 0, options: [] };
  const wire = encodeMessage(m, { maxSize: 512 });
  assert.ok(wire.length <= 512);
  const back = decodeMessage(wire);
  assert.equal(back.tc, true);
  assert.ok(back.answers.length > 20 && back.answers.length < 100);
  assert.ok(back.edns, 'the OPT record is kept when records are dropped');
  const full = decodeMessage(encodeMessage(m));
  assert.equal(full.tc, false);
  assert.equal(full.answers.length, 100);
});

test('parseQuery reads the question, keeps the letter case and finds the OPT record', () => {
  const wire = dnsPacket.encode({
    type: 'query',
    id: 42,
    flags: dnsPacket.RECURSION_DESIRED,
    questions: [{ type: 'AAAA', name: 'BackEnd.Default.svc.cluster.local' }],
    additionals: [{ type: 'OPT', name: '.', udpPayloadSize: 4096, flags: dnsPacket.DNSSEC_OK } as dnsPacket.Answer],
  });
  const q = parseQuery(wire);
  assert.ok(typeof q !== 'number');
  assert.equal(q.id, 42);
  assert.equal(q.qname, 'BackEnd.Default.svc.cluster.local.');
  assert.equal(q.qnameLower, 'backend.default.svc.cluster.local.');
  assert.equal(q.qtype, QType.AAAA);
  assert.equal(q.edns?.udpSize, 4096);
  assert.equal(q.edns?.do, true);
});

test('parseQuery sorts bad messages into drop, FORMERR and NOTIMP', () => {
  assert.equal(parseQuery(Buffer.alloc(11)), QueryProblem.Drop);
  const resp = dnsPacket.encode({ type: 'response', id: 1, questions: [{ type: 'A', name: 'x' }] });
  assert.equal(parseQuery(resp), QueryProblem.Drop);
  const update = dnsPacket.encode({ type: 'query', id: 1, questions: [{ type: 'A', name: 'x' }] });
  update.writeUInt16BE(5 << 11, 2); // opcode UPDATE
  assert.equal(parseQuery(update), QueryProblem.NotImp);
  const noQuestion = Buffer.alloc(12);
  assert.equal(parseQuery(noQuestion), QueryProblem.FormErr);
  const truncated = dnsPacket
    .encode({ type: 'query', id: 1, questions: [{ type: 'A', name: 'example.org' }] })
    .subarray(0, 20);
  assert.equal(parseQuery(truncated), QueryProblem.FormErr);
  const rootQuery = dnsPacket.encode({ type: 'query', id: 1, questions: [{ type: 'NS', name: '.' }] });
  const q = parseQuery(rootQuery);
  assert.ok(typeof q !== 'number');
  assert.equal(q.qname, '.');
});
