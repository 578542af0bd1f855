// KubeClient details that the test API server cannot provoke: how bytes are split on the
// wire, URL prefixes of proxied API servers, and the backoff arithmetic.
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { endpointConnection } from '../../src/kube/connection.js';
import { KubeClient } from '../../src/kube/http.js';
import { Backoff } from '../../src/kube/reflector.js';
import { delay } from '../helpers/kubeapi-fixtures.js';

describe('KubeClient over a hand-driven socket', () => {
  let server: http.Server;
  let base: string;
  const urls: string[] = [];
  before(async () => {
    server = http.createServer((req, res) => {
      urls.push(req.url ?? '');
      void (async () => {
        res.writeHead(200, { 'Content-Type': 'application/json' });
        // One event split in three writes, the split falling inside a two-byte UTF-8 character.
        const line = Buffer.from(`${JSON.stringify({ type: 'ADDED', object: { metadata: { name: 'grüße' } } })}\n`);
        const cut = line.indexOf(Buffer.from('ü')) + 1;
        res.write(line.subarray(0, 10));
        await delay(20);
        res.write(line.subarray(10, cut));
        await delay(20);
        res.write(
          Buffer.concat([
            line.subarray(cut),
            Buffer.from('\n\n{"type":"BOOKMARK","object":{"metadata":{}}}\n{"type":"ADD'),
          ]),
        );
        await delay(20);
        res.end('ED","object":{"metadata":{"name":"last"}}}\n');
      })();
    });
    await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => new Promise<void>((ok) => server.close(() => ok())));

  it('reassembles lines split across chunks, multi-byte characters included, and skips blank lines', async () => {
    const client = new KubeClient(await endpointConnection(base));
    const lines: string[] = [];
    await client.streamLines('/api/v1/pods', { watch: 1 }, { idleTimeoutMs: 1000, onLine: (l) => lines.push(l) });
    client.close();
    assert.equal(lines.length, 3);
    assert.match(lines[0]!, /grüße/);
    assert.match(lines[2]!, /"last"/);
  });

  it('keeps the path prefix of a proxied API server URL and drops empty query values', async () => {
    const client = new KubeClient(await endpointConnection(`${base}/k8s/clusters/c-1/`));
    await client.streamLines(
      '/api/v1/pods',
      { watch: 1, labelSelector: '', limit: 5 },
      { idleTimeoutMs: 1000, onLine: () => {} },
    );
    client.close();
    assert.equal(urls.at(-1), '/k8s/clusters/c-1/api/v1/pods?watch=1&limit=5');
  });
});

describe('KubeClient.getJSON over a hand-driven socket', () => {
  let server: http.Server;
  let base: string;
  before(async () => {
    server = http.createServer((_req, res) => {
      void (async () => {
        res.writeHead(200, { 'Content-Type': 'application/json' });
        // A body in many writes, one split inside a two-byte and one inside a four-byte character.
        const body = Buffer.from(
          JSON.stringify({
            kind: 'List',
            items: [{ name: 'grüße' }, { name: 'x'.repeat(70_000) }, { name: '🦀 crab' }],
          }),
        );
        const cuts = [5, body.indexOf(Buffer.from('ü')) + 1, 40_000, body.indexOf(Buffer.from('🦀')) + 2, body.length];
        let at = 0;
        for (const cut of cuts) {
          res.write(body.subarray(at, cut));
          at = cut;
          await delay(5);
        }
        res.end();
      })();
    });
    await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => new Promise<void>((ok) => server.close(() => ok())));

  it('decodes a body whose chunks split multi-byte characters', async () => {
    const client = new KubeClient(await endpointConnection(base));
    const body = (await client.getJSON('/api/v1/services')) as { items: Array<{ name: string }> };
    client.close();
    assert.deepEqual(
      body.items.map((i) => i.name.length),
      [5, 70_000, 7],
    );
    assert.equal(body.items[0]!.name, 'grüße');
    assert.equal(body.items[2]!.name, '🦀 crab');
  });
});

describe('Backoff', () => {
  it('doubles from the initial delay up to the cap, with jitter in [d/2, d]', () => {
    const b = new Backoff({ initialMs: 100, maxMs: 1000 });
    const caps = [100, 200, 400, 800, 1000, 1000, 1000];
    for (const cap of caps) {
      const d = b.next();
      assert.ok(d >= cap / 2 && d <= cap, `${d} not in [${cap / 2}, ${cap}]`);
    }
    b.reset();
    assert.ok(b.next() <= 100);
  });

  it('never waits less than a Retry-After floor (itself capped)', () => {
    const b = new Backoff({ initialMs: 10, maxMs: 5000 });
    assert.ok(b.next(2000) >= 2000);
    assert.ok(b.next(60_000) <= 5000);
  });
});
