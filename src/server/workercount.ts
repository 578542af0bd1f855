// How many worker processes `-workers auto` starts: the CPUs this process may really use,
// which in a Pod is its CPU limit (the cgroup's quota), not the node's core count.

import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';

/** Where the cgroup files are (injectable so tests read fixture trees). */
export interface CgroupPaths {
  /** The cgroup file system's mount point (default /sys/fs/cgroup). */
  root: string;
  /** This process's membership (default /proc/self/cgroup). */
  self: string;
}

const defaultPaths: CgroupPaths = { root: '/sys/fs/cgroup', self: '/proc/self/cgroup' };

function read(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
}

/** `cpu.max` ("QUOTA PERIOD" or "max PERIOD") as CPUs, undefined when unlimited or unreadable. */
export function parseCpuMax(text: string): number | undefined {
  const [quota, period] = text.trim().split(/\s+/);
  if (quota === undefined || quota === 'max') return undefined;
  const q = Number(quota);
  const p = Number(period ?? 100000);
  if (!Number.isFinite(q) || !Number.isFinite(p) || q <= 0 || p <= 0) return undefined;
  return q / p;
}

/** cgroup v1's `cpu.cfs_quota_us` (-1: unlimited) over `cpu.cfs_period_us`. */
export function parseCfs(quotaText: string, periodText: string): number | undefined {
  const q = Number(quotaText.trim());
  const p = Number(periodText.trim());
  if (!Number.isFinite(q) || !Number.isFinite(p) || q <= 0 || p <= 0) return undefined;
  return q / p;
}

/** The directories from `dir` up to `top`, innermost first: a parent's limit binds its children. */
function upwards(top: string, rel: string): string[] {
  const parts = rel.split('/').filter((s) => s !== '' && s !== '..');
  const out: string[] = [];
  for (let n = parts.length; n >= 0; n--) out.push(join(top, ...parts.slice(0, n)));
  return out;
}

/**
 * The CPU quota of this process's cgroup (the smallest over its ancestors), in CPUs;
 * undefined when there is none. Reads cgroup v2's cpu.max, else v1's cpu controller.
 */
export function cgroupCpuLimit(paths: CgroupPaths = defaultPaths): number | undefined {
  const membership = read(paths.self) ?? '';
  let limit: number | undefined;
  const take = (cpus: number | undefined) => {
    if (cpus !== undefined && (limit === undefined || cpus < limit)) limit = cpus;
  };
  for (const line of membership.split('\n')) {
    // "HIERARCHY-ID:CONTROLLERS:PATH"; v2 is "0::PATH".
    const m = /^(\d+):([^:]*):(.*)$/.exec(line.trim());
    if (!m) continue;
    const controllers = m[2]!.split(',');
    const path = m[3]!;
    if (m[1] === '0' && m[2] === '') {
      for (const dir of upwards(paths.root, path)) {
        const t = read(join(dir, 'cpu.max'));
        if (t !== undefined) take(parseCpuMax(t));
      }
    } else if (controllers.includes('cpu')) {
      // v1: the controller is mounted as cpu, cpu,cpuacct or cpuacct,cpu.
      for (const mount of [m[2]!, 'cpu', 'cpu,cpuacct', 'cpuacct,cpu']) {
        const top = join(paths.root, mount);
        // In a container the cgroup path may be the host's while the mount is the Pod's own.
        for (const dir of [...upwards(top, path), top]) {
          const q = read(join(dir, 'cpu.cfs_quota_us'));
          const p = read(join(dir, 'cpu.cfs_period_us'));
          if (q !== undefined && p !== undefined) take(parseCfs(q, p));
        }
      }
    }
  }
  return limit;
}

/**
 * The default worker count: the CPUs in the affinity mask (what os.availableParallelism()
 * reports, from sched_getaffinity), capped by the cgroup quota rounded down, at least 1.
 */
export function autoWorkers(paths: CgroupPaths = defaultPaths, cpus: number = availableParallelism()): number {
  const quota = cgroupCpuLimit(paths);
  const n = quota === undefined ? cpus : Math.min(cpus, Math.floor(quota));
  return Math.max(1, Math.min(64, n));
}
