// The interface holding the local IPs, made for real inside a namespace this test creates.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { InterfaceError, NodeInterface } from '../../src/nodecache/netif.js';
import { netnsUnavailable, randomTag, TestNetns } from './netns.js';

const unavailable = await netnsUnavailable();
if (unavailable) process.stderr.write(`SKIP nodecache interface tests: ${unavailable}\n`);

describe('nodecache interface in a test namespace', { skip: unavailable ?? false }, () => {
  let ns: TestNetns;
  before(async () => {
    ns = await TestNetns.create(`cdns-test-${randomTag()}-netif`);
  });
  after(async () => {
    await ns?.destroy();
  });

  const linkKind = async (name: string): Promise<string | null> => {
    const r = await ns.exec('ip', ['-j', '-d', 'link', 'show', 'dev', name]);
    if (r.code !== 0) return null;
    const [link] = JSON.parse(r.stdout) as Array<{ linkinfo?: { info_kind?: string }; flags: string[] }>;
    return link?.linkinfo?.info_kind ?? '';
  };
  const addresses = async (name: string): Promise<string[]> => {
    const [link] = JSON.parse(await ns.must('ip', ['-j', 'addr', 'show', 'dev', name])) as Array<{
      addr_info: Array<{ local: string; prefixlen: number }>;
    }>;
    return link!.addr_info
      .filter((a) => !a.local.startsWith('fe80'))
      .map((a) => `${a.local}/${a.prefixlen}`)
      .sort();
  };

  test('creates a dummy link, or an empty bridge where the kernel has no dummy driver, with both local IPs as host addresses', async () => {
    const dummyWorks = (await ns.exec('ip', ['link', 'add', 'probe0', 'type', 'dummy'])).code === 0;
    if (dummyWorks) await ns.must('ip', ['link', 'del', 'probe0']);
    const nif = new NodeInterface('nodelocaldns', ['169.254.20.10', '10.96.0.10'], ns.runner, ns.runnerSync);
    const r = await nif.ensure();
    assert.equal(r.created, dummyWorks ? 'dummy' : 'bridge');
    if (!dummyWorks) assert.match(r.dummyRefused ?? '', /Unknown device type|not supported/i);
    assert.equal(await linkKind('nodelocaldns'), r.created);
    assert.deepEqual(await addresses('nodelocaldns'), ['10.96.0.10/32', '169.254.20.10/32']);
    assert.deepEqual(r.addedAddresses, ['169.254.20.10', '10.96.0.10']);
    // The kernel now delivers packets for both addresses locally.
    const route = await ns.must('ip', ['route', 'get', '10.96.0.10']);
    assert.match(route, /^local 10\.96\.0\.10 dev lo/);
  });

  test('ensuring again changes nothing; a removed address is put back', async () => {
    const nif = new NodeInterface('nodelocaldns', ['169.254.20.10', '10.96.0.10'], ns.runner, ns.runnerSync);
    assert.deepEqual(await nif.ensure(), { created: null, addedAddresses: [], broughtUp: false });
    await ns.must('ip', ['addr', 'del', '10.96.0.10/32', 'dev', 'nodelocaldns']);
    assert.deepEqual((await nif.ensure()).addedAddresses, ['10.96.0.10']);
    assert.deepEqual(await addresses('nodelocaldns'), ['10.96.0.10/32', '169.254.20.10/32']);
  });

  test('remove deletes our link (also from the synchronous exit path) and leaves a bridge with ports alone', async () => {
    const nif = new NodeInterface('nodelocaldns', ['169.254.20.10'], ns.runner, ns.runnerSync);
    assert.equal(await nif.remove(), 'deleted');
    assert.equal(await linkKind('nodelocaldns'), null);
    assert.equal(await nif.remove(), 'absent');
    await nif.ensure();
    assert.equal(nif.removeSync(), 'deleted');
    assert.equal(await linkKind('nodelocaldns'), null);

    // Someone else's bridge of that name, with a port: never deleted.
    await ns.must('ip', ['link', 'add', 'nodelocaldns', 'type', 'bridge']);
    await ns.must('ip', ['link', 'add', 'vp0', 'type', 'veth', 'peer', 'name', 'vp1']);
    await ns.must('ip', ['link', 'set', 'vp0', 'master', 'nodelocaldns']);
    const r = await nif.remove();
    assert.equal(typeof r, 'object');
    assert.equal(await linkKind('nodelocaldns'), 'bridge');
  });

  test('a missing link that cannot be made is an interface_add error', async () => {
    // A name the kernel refuses for any link type (the flag parser refuses it earlier too).
    const nif = new NodeInterface('bad/name', ['169.254.20.10'], ns.runner, ns.runnerSync);
    await assert.rejects(
      nif.ensure(),
      (e: unknown) =>
        e instanceof InterfaceError && e.errorType === 'interface_add' && /type dummy: .*type bridge: /.test(e.message),
    );
  });
});
