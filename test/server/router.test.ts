// The router's choice of server block: the longest zone containing the name, on label
// boundaries, whether a zone length holds a few zones (compared in place) or many (looked up
// by the name's suffix), and the view chain of blocks sharing a zone.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { QType } from '../../src/dns/constants.js';
import { copyBytes } from '../../src/dns/bytes.js';
import { parseQuery } from '../../src/dns/query.js';
import { Request, Response, type ClientInfo } from '../../src/server/request.js';
import { Router, type RoutedBlock } from '../../src/server/router.js';
import { buildQuery } from '../helpers/dns.js';

const udp: ClientInfo = {
  proto: 'udp',
  remoteAddress: '127.0.0.1',
  remotePort: 1,
  family: 1,
  localAddress: '127.0.0.1',
  localPort: 53,
};

function request(name: string): Request {
  const raw = buildQuery(name, QType.A, { id: 1 });
  const q = parseQuery(raw);
  assert.ok(typeof q !== 'number');
  return new Request(raw, q, udp);
}

function block(zone: string, filter?: (req: Request) => boolean): RoutedBlock {
  return { zone, serverLabel: 'dns://:53', chain: () => Response.rcode(0, ''), filter };
}

function routedZone(r: Router, name: string): string | undefined {
  return r.route(request(name))?.zone;
}

describe('Router', () => {
  // Six zones of one length take the lookup by suffix; the others are compared one by one.
  const many = ['a0.test.', 'a1.test.', 'a2.test.', 'a3.test.', 'a4.test.', 'a5.test.'];
  const r = new Router();
  for (const z of ['.', 'cluster.local.', 'svc.cluster.local.', 'example.org.', ...many]) r.add(block(z));

  test('the longest zone that contains the name wins', () => {
    assert.equal(routedZone(r, 'web.default.svc.cluster.local.'), 'svc.cluster.local.');
    assert.equal(routedZone(r, 'pod.cluster.local.'), 'cluster.local.');
    assert.equal(routedZone(r, 'cluster.local.'), 'cluster.local.');
    assert.equal(routedZone(r, 'www.example.org.'), 'example.org.');
  });

  test('a zone matches on a label boundary only', () => {
    assert.equal(routedZone(r, 'xcluster.local.'), '.');
    assert.equal(routedZone(r, 'x.xsvc.cluster.local.'), 'cluster.local.');
    assert.equal(routedZone(r, 'notexample.org.'), '.');
  });

  test('the same answers when many zones share a length', () => {
    for (const z of many) {
      assert.equal(routedZone(r, z), z);
      assert.equal(routedZone(r, `host.${z}`), z);
      assert.equal(routedZone(r, `host${z}`), '.');
    }
    assert.equal(routedZone(r, 'b0.test.'), '.');
  });

  test('names are matched in lowercase, as the question was asked in any case', () => {
    assert.equal(routedZone(r, 'WEB.Default.SVC.Cluster.Local.'), 'svc.cluster.local.');
  });

  test('without a root block, a name outside every zone has no block', () => {
    const only = new Router();
    only.add(block('cluster.local.'));
    assert.equal(routedZone(only, 'a.cluster.local.'), 'cluster.local.');
    assert.equal(routedZone(only, 'a.example.org.'), undefined);
  });

  test('blocks of one zone with views are tried in order, the one without a view last', () => {
    const v = new Router();
    v.add(block('cluster.local.'));
    const a = block('cluster.local.', (req) => req.name.startsWith('a'));
    const b = block('cluster.local.', (req) => req.name.startsWith('b'));
    v.add(a);
    v.add(b);
    assert.equal(v.route(request('a.cluster.local.'))?.filter, a.filter);
    assert.equal(v.route(request('b.cluster.local.'))?.filter, b.filter);
    assert.equal(v.route(request('c.cluster.local.'))?.filter, undefined);
  });
});

describe('copyBytes', () => {
  test('copies short (loop) and long (TypedArray#set) ranges to an offset, leaving the rest', () => {
    for (const len of [0, 1, 12, 127, 128, 129, 600]) {
      const src = Buffer.alloc(len + 10);
      for (let i = 0; i < src.length; i++) src[i] = (i * 7 + 3) & 0xff;
      const dst = Buffer.alloc(len + 20, 0xee);
      copyBytes(src, 5, 5 + len, dst, 9);
      assert.deepEqual(dst.subarray(9, 9 + len), src.subarray(5, 5 + len), `len ${len}`);
      assert.ok(dst.subarray(0, 9).every((b) => b === 0xee));
      assert.ok(dst.subarray(9 + len).every((b) => b === 0xee));
    }
  });
});
