// The loop plugin's counting, in process (the real exit is tested in test/e2e/loop.test.ts).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { QType, Rcode } from '../../src/dns/constants.js';
import { parseQuery } from '../../src/dns/query.js';
import { LoopHandler, probeName } from '../../src/plugins/loop/handler.js';
import { Request, Response, type ClientInfo, type Next } from '../../src/server/request.js';
import { buildQuery } from '../helpers/dns.js';

const client: ClientInfo = {
  proto: 'udp',
  remoteAddress: '127.0.0.1',
  remotePort: 41234,
  family: 1,
  localAddress: '127.0.0.1',
  localPort: 53,
};
const next: Next = () => Response.rcode(Rcode.SERVFAIL, 'next');

function req(name: string, type: number): Request {
  const raw = buildQuery(name, type);
  const q = parseQuery(raw);
  if (typeof q === 'number') throw new Error('bad query');
  return new Request(raw, q, client);
}

describe('loop', () => {
  it('builds <random>.<random>.<zone> names', () => {
    assert.match(probeName('.'), /^\d+\.\d+\.$/);
    assert.match(probeName('example.org.'), /^\d+\.\d+\.example\.org\.$/);
    assert.notEqual(probeName('.'), probeName('.'));
  });

  it('exits on the third sighting of its own HINFO probe, with CoreDNS message', () => {
    const exits: string[] = [];
    const l = new LoopHandler('.', (m) => exits.push(m));
    l.address = ':1053';
    // The loop check runs before any answer exists: the answers (void) are not under test here.
    for (let i = 0; i < 2; i++) void l.serveDNS(req(l.qname, QType.HINFO), next);
    assert.equal(exits.length, 0);
    void l.serveDNS(req(l.qname.toUpperCase(), QType.A), next); // another type: not counted
    void l.serveDNS(req(`1.${l.qname}`, QType.HINFO), next); // another name: not counted
    assert.equal(exits.length, 0);
    void l.serveDNS(req(l.qname, QType.HINFO), next);
    assert.deepEqual(exits, [
      `Loop (127.0.0.1:41234 -> :1053) detected for zone ".", see https://coredns.io/plugins/loop#troubleshooting. Query: "HINFO ${l.qname}"`,
    ]);
  });

  it('ignores everything once disabled, and names outside its zone', () => {
    const exits: string[] = [];
    const l = new LoopHandler('example.org.', (m) => exits.push(m));
    const outside = new LoopHandler('example.org.', (m) => exits.push(m));
    for (let i = 0; i < 5; i++) void outside.serveDNS(req(`${i}.example.net.`, QType.HINFO), next);
    l.disabled = true;
    for (let i = 0; i < 5; i++) void l.serveDNS(req(l.qname, QType.HINFO), next);
    assert.equal(exits.length, 0);
    assert.equal(l.serveDNS(req(l.qname, QType.HINFO), next) instanceof Response, true);
  });
});
