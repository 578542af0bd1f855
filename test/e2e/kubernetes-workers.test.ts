// With several workers the primary runs the only list/watch and relays it: the API sees one
// client, every worker answers the same, and a replaced worker catches up without a relist.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { KubeApiServer } from '../helpers/kubeapi.js';
import { startServer } from '../helpers/server.js';
import { query } from '../helpers/dns.js';
import { QType, Rcode } from '../../src/dns/constants.js';
import { namespace, service } from '../kubernetes/fixtures.js';
import { childrenOf } from '../helpers/procs.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Every one of `n` queries (spread over the workers by the kernel) must see `ip`. */
async function allSee(port: number, name: string, ip: string, n = 30, withinMs = 3000): Promise<void> {
  const end = Date.now() + withinMs;
  for (;;) {
    let ok = 0;
    for (let i = 0; i < n; i++) {
      const r = await query(port, name, QType.A);
      if (r.rcode === Rcode.NOERROR && (r.answers[0]?.data as { address?: string } | undefined)?.address === ip) ok++;
    }
    if (ok === n) return;
    if (Date.now() > end) assert.fail(`${ok}/${n} answers for ${name} were ${ip}`);
    await sleep(100);
  }
}

test(
  'two workers share one watcher of the API, both answer changes, and a new worker needs no relist',
  { timeout: 60000 },
  async () => {
    const api = await KubeApiServer.create();
    api.apply(namespace('default'));
    api.apply(service('default', 'web', ['10.96.0.50'], [['http', 'TCP', 80]]));
    const s = await startServer({
      corefile: `cluster.local:PORT {\n bind 127.0.0.1\n kubernetes {\n endpoint http://127.0.0.1:${api.port}\n }\n}\n`,
      workers: 2,
    });
    try {
      await allSee(s.port, 'web.default.svc.cluster.local.', '10.96.0.50');
      const servicesLists = () =>
        api.requestLog.filter((r) => r.verb === 'list' && r.path === '/api/v1/services').length;
      const servicesWatches = () =>
        api.requestLog.filter((r) => r.verb === 'watch' && r.path === '/api/v1/services' && r.status === 200).length;
      assert.equal(servicesLists(), 1, 'one list of Services for two workers');
      assert.equal(servicesWatches(), 1, 'one watch of Services for two workers');
      assert.match(s.output(), /one watcher for all workers/);

      api.apply(service('default', 'web', ['10.96.0.51'], [['http', 'TCP', 80]]));
      await allSee(s.port, 'web.default.svc.cluster.local.', '10.96.0.51');

      const workers = childrenOf(s.proc.pid!);
      assert.equal(workers.length, 2);
      process.kill(workers[0]!, 'SIGKILL');
      const end = Date.now() + 5000;
      while (
        Date.now() < end &&
        !(childrenOf(s.proc.pid!).length === 2 && !childrenOf(s.proc.pid!).includes(workers[0]!))
      )
        await sleep(100);
      await sleep(500);
      await allSee(s.port, 'web.default.svc.cluster.local.', '10.96.0.51');
      assert.equal(servicesLists(), 1, 'the replacement worker got the state from the primary, not from a new list');
    } finally {
      await s.stop();
      await api.close();
    }
  },
);
