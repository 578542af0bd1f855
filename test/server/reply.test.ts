// Truncation of wire replies without decoding (cutWire, recordsReply): the result must be what
// decoding and re-encoding with a size limit gives, and a valid message to an independent decoder.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import * as dnsPacket from 'dns-packet';
import { QClass, QType } from '../../src/dns/constants.js';
import { decodeMessage, emptyMessage, encodeMessage, type Message } from '../../src/dns/message.js';
import { parseQuery } from '../../src/dns/query.js';
import { Request, type ClientInfo } from '../../src/server/request.js';
import { cutWire, recordsReply } from '../../src/server/reply.js';
import { buildQuery } from '../helpers/dns.js';

const udp: ClientInfo = {
  proto: 'udp',
  remoteAddress: '127.0.0.1',
  remotePort: 1,
  family: 1,
  localAddress: '127.0.0.1',
  localPort: 53,
};

function request(edns: number | undefined): Request {
  const raw = buildQuery('svc.example.', QType.SRV, { id: 4242, edns });
  const q = parseQuery(raw);
  assert.ok(typeof q !== 'number');
  return new Request(raw, q, udp);
}

/** An answer with SRV records (compressed names), an NS authority, A additionals and an OPT with an option. */
function bigAnswer(withOpt: boolean): Message {
  const m = emptyMessage(4242);
  m.qr = true;
  m.aa = true;
  m.questions.push({ name: 'svc.example.', type: QType.SRV, class: QClass.IN });
  for (let i = 0; i < 40; i++) {
    m.answers.push({
      name: 'svc.example.',
      type: QType.SRV,
      class: QClass.IN,
      ttl: 5,
      data: { priority: 0, weight: 10, port: 8000 + i, target: `pod-${i}.svc.example.` },
    });
    m.additionals.push({
      name: `pod-${i}.svc.example.`,
      type: QType.A,
      class: QClass.IN,
      ttl: 5,
      data: { address: `10.0.0.${i}` },
    });
  }
  m.authorities.push({ name: 'example.', type: QType.NS, class: QClass.IN, ttl: 5, data: { target: 'ns.example.' } });
  if (withOpt)
    m.edns = {
      udpSize: 1232,
      version: 0,
      do: false,
      zflags: 0,
      options: [{ code: 10, data: Buffer.from('0123456789abcdef') }],
    };
  return m;
}

const sections = (m: Message) => ({
  tc: m.tc,
  id: m.id,
  an: m.answers,
  ns: m.authorities,
  ar: m.additionals,
  edns: m.edns,
  q: m.questions,
});

describe('cutWire', () => {
  for (const withOpt of [true, false]) {
    test(`cuts at record boundaries exactly as decode + encode with a limit would (${withOpt ? 'the reply has an OPT' : "no OPT in the reply: the request's is echoed"})`, () => {
      const req = request(1232);
      const full = encodeMessage(bigAnswer(withOpt));
      for (const max of [100, 300, 512, 777, 1232, 1500, 2000]) {
        const cut = cutWire(req, full, max);
        assert.ok(cut !== null);
        assert.ok(cut.length <= max, `${cut.length} > ${max}`);
        const expected = decodeMessage(full);
        if (!expected.edns) expected.edns = { udpSize: 1232, version: 0, do: false, zflags: 0, options: [] };
        const want = decodeMessage(encodeMessage(expected, { maxSize: max }));
        const got = decodeMessage(cut);
        assert.deepEqual(sections(got), sections(want), `limit ${max}`);
        assert.equal(got.tc, true);
        assert.ok(got.edns, 'the OPT is kept');
        // An independent decoder reads every kept record.
        const p = dnsPacket.decode(cut);
        assert.equal((p.answers ?? []).length, got.answers.length);
      }
    });
  }

  test('a client without EDNS gets no OPT, and at most 512 octets', () => {
    const req = request(undefined);
    const cut = cutWire(req, encodeMessage(bigAnswer(true)), req.maxSize)!;
    assert.ok(cut.length <= 512);
    const m = decodeMessage(cut);
    assert.equal(m.edns, null);
    assert.ok(m.answers.length > 5);
  });

  test('an OPT that is not the last record is left to the decoder (null)', () => {
    const full = encodeMessage(bigAnswer(true));
    // Move the OPT in front of the last additional: cut the last A and append it after the OPT.
    const m = decodeMessage(full);
    const last = m.additionals.pop()!;
    const head = encodeMessage(m);
    const tail = encodeMessage({ ...emptyMessage(0), additionals: [last] }).subarray(12);
    const odd = Buffer.concat([head, tail]);
    odd.writeUInt16BE(odd.readUInt16BE(10) + 1, 10);
    assert.equal(cutWire(request(1232), odd, 512), null);
  });
});

describe('recordsReply', () => {
  test('a prepared answer too big for the client keeps the records that fit and sets TC', () => {
    const req = request(600);
    const full = encodeMessage(bigAnswer(false));
    const body = full.subarray(req.questionEnd);
    const m = decodeMessage(full);
    const out = recordsReply(req, 0, 0x0400, body, m.answers.length, m.authorities.length, m.additionals.length);
    assert.ok(out.length <= 600 && out.length > 500, `${out.length} octets`);
    const got = decodeMessage(out);
    assert.equal(got.tc, true);
    assert.ok(got.answers.length > 5);
    assert.deepEqual(got.answers, m.answers.slice(0, got.answers.length));
    assert.equal(got.edns?.udpSize, 600);
  });
});
