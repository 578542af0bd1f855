// Issue 18: a healthy API server that sends no bookmarks (the API server sends them at its
// discretion) must not make clusterdns reconnect its watches or say the API is unreachable.
// Its own file: it waits longer than the old idle watchdog's 90 s.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { KubeApiServer } from '../helpers/kubeapi.js';
import { startServer } from '../helpers/server.js';
import { namespace, service } from '../kubernetes/fixtures.js';

const execFileP = promisify(execFile);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function digA(port: number, name: string): Promise<string> {
  const { stdout } = await execFileP(
    'dig',
    ['@127.0.0.1', '-p', String(port), '+short', '+tries=1', '+time=2', name, 'A'],
    { timeout: 10000 },
  );
  return stdout.trim();
}

// API Concepts › Watch bookmarks: "Clients should not assume bookmarks are returned at any
// specific interval, nor may they assume the server will send any BOOKMARK event during a session."
test(
  'a healthy API server that sends no bookmarks for 93 s raises no alarm and keeps its watches',
  { timeout: 115_000 },
  async () => {
    const api = await KubeApiServer.create({ bookmarkIntervalMs: 0 });
    api.apply(namespace('default'));
    api.apply(service('default', 'web', ['10.96.0.50'], [['http', 'TCP', 80]]));
    const s = await startServer({
      corefile: `cluster.local:PORT {\n    bind 127.0.0.1\n    kubernetes {\n        endpoint ${api.url}\n    }\n}\n`,
    });
    try {
      const watches = api.requestLog.filter((r) => r.verb === 'watch' && r.status === 200).length;
      await sleep(93_000);
      const out = s.output();
      assert.doesNotMatch(out, /watch silent/);
      assert.doesNotMatch(out, /unreachable/);
      assert.equal(
        api.requestLog.filter((r) => r.verb === 'watch' && r.status === 200).length,
        watches,
        'no watch was re-opened',
      );
      // Still current: a change arrives on the same watches.
      api.apply(service('default', 'web', ['10.96.0.51'], [['http', 'TCP', 80]]));
      const end = Date.now() + 5000;
      while (Date.now() < end && (await digA(s.port, 'web.default.svc.cluster.local.')) !== '10.96.0.51')
        await sleep(50);
      assert.equal(await digA(s.port, 'web.default.svc.cluster.local.'), '10.96.0.51', 'the change arrived');
    } finally {
      await s.stop();
      await api.close();
    }
  },
);
