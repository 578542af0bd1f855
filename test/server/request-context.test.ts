// The request context: a query's deadline and AbortSignal, shared by the requests made from it,
// fired when its TCP client leaves unless other askers share its work, and released once answered.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { QType } from '../../src/dns/constants.js';
import { parseQuery } from '../../src/dns/query.js';
import { Request, REQUEST_PATIENCE_MS, type ClientInfo, type LeaveListener } from '../../src/server/request.js';
import { buildQuery } from '../helpers/dns.js';

/** A TCP client as the connection presents it: it can leave, and tells who follows it. */
class Conn implements ClientInfo {
  readonly proto = 'tcp' as const;
  readonly remoteAddress = '127.0.0.1';
  readonly remotePort = 40000;
  readonly family = 1 as const;
  readonly localAddress = '127.0.0.1';
  readonly localPort = 53;
  gone = false;
  readonly followers = new Set<LeaveListener>();
  follow(l: LeaveListener): void {
    this.followers.add(l);
  }
  unfollow(l: LeaveListener): void {
    this.followers.delete(l);
  }
  close(): void {
    this.gone = true;
    for (const l of [...this.followers]) l.clientLeft();
    this.followers.clear();
  }
}

const udp: ClientInfo = {
  proto: 'udp',
  remoteAddress: '127.0.0.1',
  remotePort: 1,
  family: 1,
  localAddress: '127.0.0.1',
  localPort: 53,
};

function request(client: ClientInfo): Request {
  const raw = buildQuery('web.example.org.', QType.A, { id: 7 });
  const q = parseQuery(raw);
  assert.ok(typeof q !== 'number');
  return new Request(raw, q, client);
}

describe('request context', () => {
  test('the deadline is 5 s after the query, and requests made from it share deadline and signal', () => {
    const before = performance.now();
    const req = request(udp);
    const derived = req.derive('target.example.net.');
    assert.equal(derived.deadline, req.deadline);
    assert.ok(req.deadline >= before + REQUEST_PATIENCE_MS && req.deadline <= performance.now() + REQUEST_PATIENCE_MS);
    assert.equal(derived.derive('again.example.net.').signal, req.signal);
    req.settle();
  });

  test('a UDP client cannot leave early; a TCP one can', () => {
    assert.equal(request(udp).mayLeave, false);
    assert.equal(request(new Conn()).mayLeave, true);
  });

  test("a TCP client leaving aborts the signal with Go's `context canceled`", () => {
    const conn = new Conn();
    const req = request(conn);
    const signal = req.derive('target.example.net.').signal;
    assert.equal(signal.aborted, false);
    assert.equal(conn.followers.size, 1, 'the signal follows the connection');
    conn.close();
    assert.equal(signal.aborted, true);
    assert.equal((signal.reason as DOMException).name, 'AbortError');
    assert.equal((signal.reason as DOMException).message, 'context canceled');
  });

  test('a signal asked for after the client left is aborted already', () => {
    const conn = new Conn();
    const req = request(conn);
    conn.close();
    assert.equal(req.signal.aborted, true);
  });

  test('work shared with other askers is not aborted by its first client leaving', () => {
    const conn = new Conn();
    const req = request(conn);
    const signal = req.signal;
    req.derive('x.example.org.').shareWork();
    conn.close();
    assert.equal(signal.aborted, false);
    req.settle();
  });

  test('once answered, the query stops following its connection and nothing fires later', () => {
    const conn = new Conn();
    const req = request(conn);
    const signal = req.signal;
    req.settle();
    assert.equal(conn.followers.size, 0);
    conn.close();
    assert.equal(signal.aborted, false);
  });
});
