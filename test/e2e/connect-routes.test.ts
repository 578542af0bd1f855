// `clusterdns connect` following the real *routes* plugin: the real binary serving the demo
// cluster (kubernetes plugin in manifests mode) with `routes` on a loopback port, and connect
// writing the hosts block of a temporary --root from that stream.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { BLOCK_BEGIN } from '../../src/connect/hosts-block.js';
import { startServer, type RunningServer } from '../helpers/server.js';
import { freePort } from '../helpers/ports.js';
import { killLeftovers, startConnect, until } from '../connect/connect-process.js';

const HOSTS = '127.0.0.1 localhost\n';

describe('clusterdns connect with the routes plugin', () => {
  let server: RunningServer;
  let routesPort = 0;
  before(async () => {
    routesPort = await freePort();
    server = await startServer({
      corefile: `.:PORT {
  bind 127.0.0.1
  kubernetes cluster.local {
    manifests cluster.yaml
  }
  routes 127.0.0.1:${routesPort} {
    token demo-token
  }
}
`,
      files: { 'cluster.yaml': fs.readFileSync(resolve('examples/demo/cluster.yaml'), 'utf8') },
    });
  });
  after(async () => {
    killLeftovers();
    await server?.stop();
  });

  test('the hosts block holds the demo cluster Services of the asked namespace, and goes on exit', async () => {
    const root = fs.mkdtempSync(join(tmpdir(), 'connect-routes-'));
    fs.mkdirSync(join(root, 'etc'));
    fs.writeFileSync(join(root, 'etc/hosts'), HOSTS);
    const c = startConnect(
      [
        '--server',
        '10.96.0.10',
        '--routes',
        `http://127.0.0.1:${routesPort}/routes`,
        '--token',
        'demo-token',
        '--namespaces',
        'default',
        '--root',
        root,
        '--os',
        'darwin',
      ],
      process.env,
    );
    const hosts = () => fs.readFileSync(join(root, 'etc/hosts'), 'utf8');
    try {
      await until('backend in the hosts block', () => hosts().includes('backend.default.svc.cluster.local'), 20_000);
    } catch (err) {
      throw new Error(`${(err as Error).message}\n${c.output()}\n${server.output()}`, { cause: err });
    }
    const text = hosts();
    assert.ok(text.startsWith(HOSTS + BLOCK_BEGIN));
    assert.match(
      text,
      /^10\.96\.120\.15 backend backend\.default backend\.default\.svc backend\.default\.svc\.cluster\.local$/m,
    );
    assert.match(text, /^fd00:10:96::f backend backend\.default /m, 'both ClusterIPs of a dual-stack Service');
    assert.match(text, /^10\.96\.120\.16 frontend /m);
    assert.doesNotMatch(text, /mysql/, 'headless Services are not routes');
    assert.doesNotMatch(text, /kube-dns/, 'other namespaces were not asked for');
    c.proc.kill('SIGTERM');
    assert.equal(await c.exited, 0, c.output());
    assert.equal(hosts(), HOSTS);
  });
});
