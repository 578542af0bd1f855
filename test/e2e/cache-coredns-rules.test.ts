// cache's rules from CoreDNS 1.14.7, through the real binary and dig: what is kept, what is
// asked again. An upstream the test controls counts what reaches it.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { QType, Rcode } from '../../src/dns/constants.js';
import type { Message } from '../../src/dns/message.js';
import { dig } from '../helpers/dns.js';
import { startServer, type RunningServer } from '../helpers/server.js';
import { answerTo, rr, startUpstream, type Upstream } from '../cache/harness.js';

/** An RRSIG over A valid from `inception` to `expiration` (seconds since 1970). */
function rrsig(name: string, inception: number, expiration: number) {
  const raw = Buffer.alloc(18 + 13 + 64);
  raw.writeUInt16BE(QType.A, 0);
  raw[2] = 13; // ECDSAP256SHA256
  raw[3] = 3;
  raw.writeUInt32BE(300, 4);
  raw.writeUInt32BE(expiration >>> 0, 8);
  raw.writeUInt32BE(inception >>> 0, 12);
  raw.writeUInt16BE(12345, 16);
  Buffer.from('\x07example\x03org\x00', 'latin1').copy(raw, 18);
  return rr(name, QType.RRSIG, 300, { raw });
}

function upstream(q: Message): Message {
  const name = q.questions[0]!.name.toLowerCase();
  const label = name.split('.')[0]!;
  const a = (owner: string, ip = '192.0.2.1') => rr(owner, QType.A, 300, { address: ip });
  const cname = (owner: string, target: string) => rr(owner, QType.CNAME, 300, { target });
  const m = answerTo(q);
  const now = Math.floor(Date.now() / 1000);
  switch (label) {
    case 'notimp':
      return answerTo(q, Rcode.NOTIMP);
    case 'chain': // a good chain: cached
      m.answers.push(cname(name, 'target.example.net.'), a('target.example.net.'));
      break;
    case 'offchain': // the A belongs to a name the chain never reaches
      m.answers.push(cname(name, 'target.example.net.'), a('other.example.net.'));
      break;
    case 'twotargets':
      m.answers.push(
        cname(name, 't1.example.net.'),
        cname(name, 't2.example.net.'),
        a('t1.example.net.'),
        a('t2.example.net.'),
      );
      break;
    case 'twotargets-reversed':
      m.answers.push(
        cname(name, 't2.example.net.'),
        cname(name, 't1.example.net.'),
        a('t1.example.net.'),
        a('t2.example.net.'),
      );
      break;
    case 'loop': // alias -> b -> alias, with an address at the alias
      m.answers.push(cname(name, 'b.example.net.'), cname('b.example.net.', name), a(name));
      break;
    case 'signed':
      m.answers.push(a(name), rrsig(name, now - 3600, now + 3600));
      break;
    case 'expired':
      m.answers.push(a(name), rrsig(name, now - 7200, now - 3600));
      break;
    default:
      m.answers.push(a(name));
  }
  return m;
}

describe('cache follows CoreDNS 1.14.7 on what it keeps', () => {
  let up: Upstream;
  let s: RunningServer;
  before(async () => {
    up = await startUpstream(upstream);
    s = await startServer({
      corefile: `.:PORT {\n    bind 127.0.0.1\n    cache 30\n    forward . 127.0.0.1:${up.port}\n}\n`,
    });
  });
  after(async () => {
    await s?.stop();
    await up?.close();
  });

  async function twice(name: string, ...args: string[]): Promise<number> {
    const first = await dig(s.port, [name, 'A', ...args]);
    const second = await dig(s.port, [name, 'A', ...args]);
    assert.equal(second.status, first.status, name);
    return up.count(`${name}.`);
  }

  it('keeps NOTIMP (a server error, like SERVFAIL)', async () => {
    assert.equal((await dig(s.port, ['notimp.example.org', 'A'])).status, 'NOTIMP');
    assert.equal(await twice('notimp.example.org'), 1);
  });

  it('keeps a CNAME chain that ends at the asked type', async () => {
    assert.equal(await twice('chain.example.org'), 1);
  });

  it('asks again for a chain whose only address is off the chain', async () => {
    assert.equal(await twice('offchain.example.org'), 2);
  });

  it('asks again when one owner has two CNAME targets, in either order', async () => {
    assert.equal(await twice('twotargets.example.org'), 2);
    assert.equal(await twice('twotargets-reversed.example.org'), 2);
  });

  it('asks again for a CNAME loop even with an address at the alias', async () => {
    assert.equal(await twice('loop.example.org'), 2);
  });

  it('with DO, keeps a reply whose RRSIG is valid and asks again for one whose RRSIG expired', async () => {
    assert.equal(await twice('signed.example.org', '+dnssec'), 1);
    const r = await dig(s.port, ['expired.example.org', 'A', '+dnssec']);
    assert.equal(r.answer.length, 2, 'the reply itself is passed on');
    assert.equal(await twice('expired.example.org', '+dnssec'), 3, 'never served from the cache');
  });
});
