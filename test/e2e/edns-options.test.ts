// EDNS options answered as a modern server does (RFC 7873 cookies, RFC 7828 keepalive on TCP,
// RFC 8467 padding), BADVERS as CoreDNS writes it, all seen through dig.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startServer, type RunningServer } from '../helpers/server.js';
import { dig } from '../helpers/dns.js';

describe('EDNS options', () => {
  let s: RunningServer;
  before(async () => {
    s = await startServer({ corefile: '.:PORT {\n    bind 127.0.0.1\n    whoami\n}\n' });
  });
  after(async () => {
    await s.stop();
  });

  test('a client cookie gets a server cookie back (RFC 7873), with the client part echoed', async () => {
    const r = await dig(s.port, ['who.test', '+cookie=0102030405060708']);
    assert.equal(r.status, 'NOERROR');
    // 8 octets of client cookie, then RFC 9018's 16: version 1, 3 reserved, a timestamp, the MAC.
    assert.match(r.raw, /; COOKIE: 0102030405060708 ?01000000[0-9a-f]{24} \(good\)/);
  });

  test('a COOKIE option of an impossible length is FORMERR', async () => {
    const r = await dig(s.port, ['who.test', '+nocookie', '+ednsopt=10:0102']);
    assert.equal(r.status, 'FORMERR');
  });

  test('edns-tcp-keepalive is answered over TCP only (RFC 7828)', async () => {
    const tcp = await dig(s.port, ['who.test', '+tcp', '+keepalive']);
    assert.match(tcp.raw, /; TCP KEEPALIVE: 10\.0 secs/);
    const udp = await dig(s.port, ['who.test', '+keepalive']);
    assert.equal(udp.status, 'NOERROR');
    assert.doesNotMatch(udp.raw, /KEEPALIVE/);
  });

  test('a padded query gets a reply padded to a multiple of 468 octets (RFC 8467)', async () => {
    const r = await dig(s.port, ['who.test', '+padding=128']);
    assert.match(r.raw, /; PAD: \(\d+ bytes\)/);
    assert.match(r.raw, /MSG SIZE {2}rcvd: 468\n/);
  });

  test('a query without options gets an OPT without options', async () => {
    const r = await dig(s.port, ['who.test', '+nocookie']);
    assert.doesNotMatch(r.raw, /COOKIE|PAD|KEEPALIVE/);
  });

  test('BADVERS says udp 0 in its OPT, as CoreDNS, and carries no options', async () => {
    const r = await dig(s.port, ['who.test', '+edns=1', '+noednsnegotiation', '+cookie']);
    assert.equal(r.status, 'BADVERS');
    assert.match(r.raw, /; EDNS: version: 0, flags:; udp: 0\n/);
    assert.doesNotMatch(r.raw, /COOKIE:/);
  });
});
