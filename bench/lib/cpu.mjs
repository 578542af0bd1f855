// How much CPU other work took during a measurement: the busy time of the whole machine
// (/proc/stat user+nice+system) minus the server's process tree, this process, and its
// reaped children (dnsperf is reaped at the end of the measurement, so its time lands in
// our cutime/cstime). Interrupt and softirq time is left out on both sides. A few percent
// is bookkeeping noise; tens of percent mean another job shared the cores and the figures
// of that measurement are low.

import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { descendants } from './procs.mjs';

const ncpu = availableParallelism();

function statFields(pid) {
  const s = readFileSync(`/proc/${pid}/stat`, 'latin1');
  return s.slice(s.lastIndexOf(')') + 2).split(' ');
}

function machineBusy() {
  const f = readFileSync('/proc/stat', 'latin1').split('\n')[0].trim().split(/\s+/);
  return Number(f[1]) + Number(f[2]) + Number(f[3]); // user nice system (jiffies)
}

function treeTime(pid) {
  let user = 0;
  let sys = 0;
  for (const p of [pid, ...descendants(pid)]) {
    try {
      const f = statFields(p);
      user += Number(f[11]); // utime
      sys += Number(f[12]); // stime: the kernel's send/receive work done in the server's context
    } catch {
      /* exited */
    }
  }
  return { user, sys };
}

function selfTime() {
  const f = statFields('self');
  return Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]); // + cutime cstime
}

/** serverPid: one pid or a list (all the servers of a mode, when they are all idle). */
export function cpuSnapshot(serverPid) {
  try {
    const pids = Array.isArray(serverPid) ? serverPid : [serverPid];
    const times = pids.map(treeTime);
    const serverUser = times.reduce((t, x) => t + x.user, 0);
    const serverSys = times.reduce((t, x) => t + x.sys, 0);
    return {
      at: process.hrtime.bigint(),
      busy: machineBusy(),
      server: serverUser + serverSys,
      serverUser,
      serverSys,
      self: selfTime(),
    };
  } catch {
    return null;
  }
}

/** Share of all cores (0–100%) used by other processes between two snapshots. */
export function otherCpuPercent(a, b) {
  if (!a || !b) return NaN;
  const seconds = Number(b.at - a.at) / 1e9;
  const other = b.busy - a.busy - (b.server - a.server) - (b.self - a.self);
  return Math.max(0, (100 * other) / (seconds * 100 * ncpu)); // jiffies are 1/100 s
}

/** The server tree's CPU between two snapshots, in % of one core. */
export function serverCpuPercent(a, b) {
  if (!a || !b) return NaN;
  const seconds = Number(b.at - a.at) / 1e9;
  return (100 * (b.server - a.server)) / (seconds * 100);
}

/**
 * Waits until other work uses less than maxPercent of the machine over a 1 s window, for at
 * most maxSeconds. Returns the seconds waited and the last reading.
 */
export async function waitQuiet(ourPids, maxSeconds, maxPercent = 10) {
  const start = Date.now();
  let last = NaN;
  while ((Date.now() - start) / 1000 < maxSeconds) {
    const a = cpuSnapshot(ourPids);
    await new Promise((r) => setTimeout(r, 1000));
    last = otherCpuPercent(a, cpuSnapshot(ourPids));
    if (!(last >= maxPercent)) break;
  }
  return { waited: (Date.now() - start) / 1000, last };
}
