import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { RouteStream } from '../../src/connect/route-stream.js';
import type { Route } from '../../src/connect/routes.js';
import { FakeRouteServer, route } from './fake-routes.js';
import { memoryLog } from './memory-log.js';

async function until(what: string, cond: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

function names(routes: ReadonlyMap<string, Route>): string[] {
  return [...routes.keys()].sort();
}

describe('route stream client', () => {
  let server: FakeRouteServer;
  const streams: RouteStream[] = [];
  before(async () => {
    server = new FakeRouteServer('s3cret');
    await server.listen();
    server.set(route('default', 'backend', '10.96.120.15'));
    server.set(route('kube-system', 'kube-dns', '10.96.0.10'));
  });
  after(async () => {
    await Promise.all(streams.map((s) => s.stop()));
    await server.close();
  });

  function open(opts: Partial<ConstructorParameters<typeof RouteStream>[0]> = {}) {
    const log = memoryLog();
    let latest: ReadonlyMap<string, Route> = new Map();
    let changes = 0;
    const s = new RouteStream({
      url: new URL(server.url),
      token: 's3cret',
      namespaces: ['default', 'kube-system'],
      log,
      backoffMinMs: 20,
      backoffMaxMs: 200,
      onChange: (m) => {
        latest = new Map(m);
        changes++;
      },
      ...opts,
    });
    streams.push(s);
    s.start();
    return { s, log, latest: () => latest, changes: () => changes };
  }

  test('sends the bearer token and namespaces, applies the SNAPSHOT, then each change', async () => {
    const before = server.requests.length;
    const { s, latest } = open();
    await until('snapshot', () => latest().size === 2);
    const req = server.requests[before]!;
    assert.equal(req.authorization, 'Bearer s3cret');
    assert.deepEqual(req.namespaces, ['default', 'kube-system']);
    assert.equal(req.resourceVersion, null);
    server.set(route('default', 'web', '10.96.0.30'));
    await until('ADDED', () => latest().has('default/web'));
    server.set(route('default', 'web', '10.96.0.31'));
    await until('MODIFIED', () => latest().get('default/web')?.clusterIP === '10.96.0.31');
    server.delete('default', 'web');
    await until('DELETED', () => !latest().has('default/web'));
    server.bookmark();
    await until('bookmark rv', () => s.resourceVersion === server.resourceVersion);
    await s.stop();
  });

  test('reconnects after the stream drops and resumes from the last resourceVersion', async () => {
    const { s, latest } = open();
    await until('snapshot', () => latest().size >= 2);
    const rv = s.resourceVersion;
    const count = server.requests.length;
    server.dropClients();
    server.set(route('default', 'missed', '10.96.0.40'));
    await server.waitForRequests(count + 1);
    assert.equal(server.requests[count]?.resourceVersion, rv, 'resumes where it left off');
    await until('replayed change', () => latest().has('default/missed'));
    assert.ok(s.connections >= 2);
    server.delete('default', 'missed');
    await until('delete', () => !latest().has('default/missed'));
    await s.stop();
  });

  test('a resume from a compacted resourceVersion gets a fresh SNAPSHOT that replaces the copy', async () => {
    const { s, latest } = open();
    await until('snapshot', () => latest().size >= 2);
    server.dropClients();
    server.set(route('default', 'gone-soon', '10.96.0.50'));
    server.delete('default', 'gone-soon');
    server.set(route('default', 'after', '10.96.0.51'));
    server.compact();
    await until('fresh snapshot', () => latest().has('default/after'));
    assert.equal(latest().has('default/gone-soon'), false);
    server.delete('default', 'after');
    await s.stop();
  });

  test('a wrong token is reported as such and retried at the slowest pace', async () => {
    const { s, log } = open({ token: 'wrong' });
    await until('401 logged', () => log.lines.some((l) => l.includes('HTTP 401') && l.includes('token')));
    await s.stop();
  });

  test('a silent stream is abandoned after the idle timeout and reopened', async () => {
    server.mute = true;
    const count = server.requests.length;
    const { s, log } = open({ idleTimeoutMs: 150 });
    try {
      await server.waitForRequests(count + 2, 5000);
      assert.ok(
        log.lines.some((l) => l.includes('route stream idle')),
        log.lines.join('\n'),
      );
    } finally {
      server.mute = false;
    }
    await s.stop();
  });

  test('malformed lines are skipped and the stream goes on', async () => {
    const { s, latest, log } = open();
    await until('snapshot', () => latest().size >= 2);
    server.raw(
      '{not json\n{"type":"ADDED","resourceVersion":"999","route":{"name":"Bad Name","namespace":"default","clusterIP":"10.0.0.1"}}\n',
    );
    server.set(route('default', 'fine', '10.96.0.60'));
    await until('later event', () => latest().has('default/fine'));
    assert.equal(log.lines.filter((l) => l.includes('ignoring a line')).length, 2);
    assert.deepEqual(names(latest()).includes('default/Bad Name'), false);
    server.delete('default', 'fine');
    await s.stop();
  });

  test('an unreachable server is retried with backoff', async () => {
    const { s, log } = open({ url: new URL('http://127.0.0.1:1/routes') });
    await until('two failures', () => log.lines.filter((l) => l.includes('reconnecting in')).length >= 2);
    await s.stop();
  });
});
