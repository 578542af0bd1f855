// The kubernetes plugin without a cluster (`manifests PATH`), including the demo that
// `npm start` serves: every dig command at the top of README.md is run against it.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServer, type RunningServer } from '../helpers/server.js';
import { dig, query, type DigResult } from '../helpers/dns.js';
import { freePort } from '../helpers/ports.js';
import { QType, Rcode } from '../../src/dns/constants.js';
import type { Message } from '../../src/dns/message.js';
import { sectionText } from '../kubernetes/fixtures.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function within(
  ms: number,
  what: string,
  probe: () => Promise<Message>,
  ok: (m: Message) => boolean,
): Promise<void> {
  const start = Date.now();
  let last: Message | undefined;
  while (Date.now() - start < ms) {
    last = await probe();
    if (ok(last)) return;
    await sleep(50);
  }
  assert.fail(`not within ${ms} ms: ${what}; last ${JSON.stringify(last ? sectionText(last.answers) : null)}`);
}

const addresses = (m: Message) => sectionText(m.answers).map((l) => l.split(' ').pop()!);

describe('kubernetes: the demo cluster of `npm start` answers every dig command of README.md', () => {
  let s: RunningServer;
  let readyPort: number;
  const readme = readFileSync('README.md', 'utf8');
  const commands = [...readme.matchAll(/^dig @127\.0\.0\.1 -p 1053 (.+?)\s+#/gm)].map((m) => m[1]!.trim());

  /** What each README command must show (the comments there say the same in words). */
  const expected: Record<string, (r: DigResult) => void> = {
    'backend.default.svc.cluster.local': (r) =>
      assert.deepEqual(r.answer, ['backend.default.svc.cluster.local. 5 IN A 10.96.120.15']),
    'backend.default.svc.cluster.local AAAA': (r) =>
      assert.deepEqual(r.answer, ['backend.default.svc.cluster.local. 5 IN AAAA fd00:10:96::f']),
    '_http._tcp.backend.default.svc.cluster.local SRV': (r) => {
      assert.deepEqual(r.answer, [
        '_http._tcp.backend.default.svc.cluster.local. 5 IN SRV 0 50 8080 backend.default.svc.cluster.local.',
      ]);
      assert.deepEqual(r.additional.sort(), [
        'backend.default.svc.cluster.local. 5 IN A 10.96.120.15',
        'backend.default.svc.cluster.local. 5 IN AAAA fd00:10:96::f',
      ]);
    },
    'mysql.default.svc.cluster.local': (r) =>
      assert.deepEqual(
        r.answer.sort(),
        ['10.244.1.10', '10.244.2.11', '10.244.3.12'].map((ip) => `mysql.default.svc.cluster.local. 5 IN A ${ip}`),
      ),
    'mysql-0.mysql.default.svc.cluster.local': (r) =>
      assert.deepEqual(r.answer, ['mysql-0.mysql.default.svc.cluster.local. 5 IN A 10.244.1.10']),
    'external.default.svc.cluster.local': (r) =>
      assert.deepEqual(r.answer, ['external.default.svc.cluster.local. 5 IN CNAME example.com.']),
    '-x 10.96.120.15': (r) =>
      assert.deepEqual(r.answer, ['15.120.96.10.in-addr.arpa. 5 IN PTR backend.default.svc.cluster.local.']),
    '10-244-1-20.default.pod.cluster.local': (r) =>
      assert.deepEqual(r.answer, ['10-244-1-20.default.pod.cluster.local. 5 IN A 10.244.1.20']),
    'dns-version.cluster.local TXT': (r) =>
      assert.deepEqual(r.answer, ['dns-version.cluster.local. 28800 IN TXT "1.1.0"']),
    'nope.default.svc.cluster.local': (r) => {
      assert.equal(r.status, 'NXDOMAIN');
      assert.match(
        r.authority[0] ?? '',
        /^cluster\.local\. 5 IN SOA ns\.dns\.cluster\.local\. hostmaster\.cluster\.local\. \d+ 7200 1800 86400 5$/,
      );
    },
    '+tcp whoami.example': (r) => assert.ok(r.additional.some((l) => l.startsWith('whoami.example. 0 IN A 127.0.0.1'))),
  };

  before(async () => {
    readyPort = await freePort();
    const corefile = readFileSync('examples/demo/Corefile', 'utf8')
      .replace('.:1053', '.:PORT')
      .replace(/health \S+/, `health 127.0.0.1:${await freePort()}`)
      .replace(/ready \S+/, `ready 127.0.0.1:${readyPort}`);
    s = await startServer({ corefile, files: { 'cluster.yaml': readFileSync('examples/demo/cluster.yaml', 'utf8') } });
  });

  after(async () => {
    await s?.stop();
  });

  test('README.md lists the demo commands, and each has an expectation here', () => {
    assert.ok(commands.length >= 8, `found ${commands.length} dig commands`);
    for (const c of commands) assert.ok(expected[c], `no expectation for README command: dig ${c}`);
  });

  test('each README dig command answers as its comment says, authoritatively', async () => {
    for (const c of commands) {
      const r = await dig(s.port, c.split(/\s+/));
      if (!c.startsWith('nope')) assert.equal(r.status, 'NOERROR', `dig ${c}`);
      if (!c.includes('whoami'))
        assert.ok(r.flags.includes('aa') && !r.flags.includes('ra'), `dig ${c}: aa set, ra clear`);
      expected[c]!(r);
    }
  });

  test('/ready says OK once the manifests are loaded', async () => {
    const res = await fetch(`http://127.0.0.1:${readyPort}/ready`);
    assert.equal(res.status, 200);
    assert.equal(await res.text(), 'OK');
  });
});

describe('kubernetes: manifests mode reads a directory and follows its changes', () => {
  let s: RunningServer;
  const A = (name: string) => query(s.port, name, QType.A);

  const namespaces = `apiVersion: v1
kind: Namespace
metadata: { name: shop, labels: { team: web } }
---
apiVersion: v1
kind: Namespace
metadata: { name: hidden, labels: { team: secret } }
---
# an empty document and a kind DNS does not read are fine
---
apiVersion: apps/v1
kind: Deployment
metadata: { name: web, namespace: shop }
`;
  // The shape `kubectl get svc -A -o json` prints: a typed list whose items carry no kind.
  const services = {
    apiVersion: 'v1',
    kind: 'ServiceList',
    items: [
      {
        metadata: { name: 'web', namespace: 'shop' },
        spec: { clusterIP: '10.96.5.1', ports: [{ name: 'http', port: 80, protocol: 'TCP' }] },
      },
      { metadata: { name: 'spy', namespace: 'hidden' }, spec: { clusterIP: '10.96.5.2' } },
      { metadata: { name: 'nolabel', namespace: 'shop', labels: { tier: 'other' } }, spec: { clusterIP: '10.96.5.3' } },
    ],
  };
  const pods = `apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Pod
  metadata: { name: web-1, namespace: shop }
  status: { phase: Running, podIP: 10.244.5.1 }
- apiVersion: v1
  kind: Pod
  metadata: { name: done, namespace: shop }
  status: { phase: Succeeded, podIP: 10.244.5.2 }
`;

  let dir: string;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'clusterdns-manifests-'));
    writeFileSync(join(dir, 'namespaces.yaml'), namespaces);
    writeFileSync(join(dir, 'services.json'), JSON.stringify(services));
    writeFileSync(join(dir, 'pods.yml'), pods);
    writeFileSync(join(dir, 'notes.txt'), 'not a manifest');
    s = await startServer({
      corefile: `.:PORT {
    bind 127.0.0.1
    kubernetes cluster.local {
        manifests ${dir}
        namespace_labels team=web
        labels tier!=other
        pods verified
    }
}
`,
    });
  });

  after(async () => {
    await s?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  test('objects of every file, List and typed-List shapes, with the label selectors applied', async () => {
    assert.deepEqual(addresses(await A('web.shop.svc.cluster.local.')), ['10.96.5.1']);
    assert.equal(
      (await A('spy.hidden.svc.cluster.local.')).rcode,
      Rcode.NXDOMAIN,
      'namespace_labels hides the namespace',
    );
    assert.equal((await A('nolabel.shop.svc.cluster.local.')).rcode, Rcode.NXDOMAIN, 'labels filters Services');
    assert.deepEqual(
      addresses(await A('10-244-5-1.shop.pod.cluster.local.')),
      ['10.244.5.1'],
      'pods verified finds the running pod',
    );
    assert.equal((await A('10-244-5-2.shop.pod.cluster.local.')).rcode, Rcode.NXDOMAIN, 'a finished pod has no name');
  });

  test('an edited file is re-read within the poll interval; a broken edit keeps the last good objects', async () => {
    const file = join(dir, 'services.json');
    const more = structuredClone(services);
    more.items.push({ metadata: { name: 'api', namespace: 'shop' }, spec: { clusterIP: '10.96.5.9', ports: [] } });
    writeFileSync(`${file}.tmp`, JSON.stringify(more));
    renameSync(`${file}.tmp`, file);
    await within(
      5000,
      'api added',
      () => A('api.shop.svc.cluster.local.'),
      (m) => addresses(m).includes('10.96.5.9'),
    );
    writeFileSync(file, '{ "kind": "List", "items": [ {');
    await s.waitFor(/WARNING\] plugin\/kubernetes: .*services\.json: .*; keeping its previous objects/, 5000);
    assert.deepEqual(addresses(await A('api.shop.svc.cluster.local.')), ['10.96.5.9']);
    rmSync(file);
    await within(
      5000,
      'services gone with their file',
      () => A('web.shop.svc.cluster.local.'),
      (m) => m.rcode === Rcode.NXDOMAIN,
    );
  });
});

describe('kubernetes: configuration errors stop the server with FILE:LINE', () => {
  for (const [body, message] of [
    ['upstream 8.8.8.8', /Corefile:4 - Error during parsing: kubernetes: 'upstream' was removed in CoreDNS 1\.7\.0/],
    [
      'manifests does-not-exist.yaml',
      /Corefile:4 - Error during parsing: kubernetes: manifests: \S+does-not-exist\.yaml: no such file or directory/,
    ],
  ] as const) {
    test(`${body.split(' ')[0]} → ${message.source.slice(0, 60)}`, async () => {
      const s = await startServer({
        corefile: `.:PORT {\n    bind 127.0.0.1\n    kubernetes cluster.local {\n        ${body}\n    }\n}\n`,
        noWait: true,
      });
      const code = await new Promise<number | null>((r) => s.proc.on('exit', r));
      assert.equal(code, 1);
      assert.match(s.output(), message);
    });
  }
});
