// `-workers auto`: the CPU quota of the process's cgroup (v2 cpu.max, v1 cfs quota/period),
// read from fixture trees laid out as the kernel lays them out, caps the affinity count.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { autoWorkers, cgroupCpuLimit, parseCfs, parseCpuMax } from '../../src/server/workercount.js';

/** A fixture: files under a fresh root, plus the /proc/self/cgroup text. */
function tree(files: Record<string, string>, self: string) {
  const root = mkdtempSync(join(tmpdir(), 'cgroup-fixture-'));
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  const selfFile = join(root, '.self');
  writeFileSync(selfFile, self);
  return { root, self: selfFile };
}

describe('cgroup CPU limits', () => {
  test('cpu.max: quota over period, "max" is no limit, junk is no limit', () => {
    assert.equal(parseCpuMax('150000 100000\n'), 1.5);
    assert.equal(parseCpuMax('max 100000\n'), undefined);
    assert.equal(parseCpuMax('200000\n'), 2);
    assert.equal(parseCpuMax('nope 100000'), undefined);
    assert.equal(parseCpuMax(''), undefined);
    assert.equal(parseCfs('-1\n', '100000\n'), undefined);
    assert.equal(parseCfs('50000\n', '100000\n'), 0.5);
  });

  test('v2: the Pod-level limit of an ancestor binds the container cgroup', () => {
    const t = tree(
      {
        'kubepods.slice/pod1/cpu.max': '300000 100000\n',
        'kubepods.slice/pod1/ctr/cpu.max': 'max 100000\n',
        'cpu.max': 'max 100000\n',
      },
      '0::/kubepods.slice/pod1/ctr\n',
    );
    assert.equal(cgroupCpuLimit(t), 3);
    assert.equal(autoWorkers(t, 64), 3);
    assert.equal(autoWorkers(t, 2), 2, 'the affinity mask is smaller still');
  });

  test('v2 inside a cgroup namespace: the root of the mount is the container', () => {
    const t = tree({ 'cpu.max': '150000 100000\n' }, '0::/\n');
    assert.equal(autoWorkers(t, 64), 1, '1.5 CPUs round down to 1');
  });

  test('a quota below one CPU still gives one worker; none at all gives the affinity count', () => {
    assert.equal(autoWorkers(tree({ 'cpu.max': '20000 100000\n' }, '0::/\n'), 64), 1);
    assert.equal(autoWorkers(tree({ 'cpu.max': 'max 100000\n' }, '0::/\n'), 6), 6);
    assert.equal(autoWorkers(tree({}, ''), 6), 6, 'no cgroup files: the affinity count');
  });

  test('v1: cfs quota and period under the cpu controller mount', () => {
    const t = tree(
      {
        'cpu,cpuacct/kubepods/burstable/pod2/ctr/cpu.cfs_quota_us': '200000\n',
        'cpu,cpuacct/kubepods/burstable/pod2/ctr/cpu.cfs_period_us': '100000\n',
        'cpu,cpuacct/cpu.cfs_quota_us': '-1\n',
        'cpu,cpuacct/cpu.cfs_period_us': '100000\n',
      },
      '12:memory:/kubepods/burstable/pod2/ctr\n4:cpu,cpuacct:/kubepods/burstable/pod2/ctr\n0::/\n',
    );
    assert.equal(cgroupCpuLimit(t), 2);
    assert.equal(autoWorkers(t, 64), 2);
  });

  test('v1 with the host path in /proc/self/cgroup but the container mounted at the root', () => {
    const t = tree({ 'cpu/cpu.cfs_quota_us': '100000\n', 'cpu/cpu.cfs_period_us': '100000\n' }, '3:cpu:/docker/abc\n');
    assert.equal(autoWorkers(t, 8), 1);
  });
});
