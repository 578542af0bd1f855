// Runs dnsperf (closed loop, the settings BENCHMARKS.md states) and parses its summary.

import { runCommand } from './procs.mjs';

export function dnsperfArgs({
  port,
  queryFile,
  seconds,
  clients = 4,
  threads = 1,
  outstanding = 100,
  maxQps = 1_000_000,
  mode,
}) {
  return [
    '-s',
    '127.0.0.1',
    '-p',
    String(port),
    '-d',
    queryFile,
    '-c',
    String(clients),
    '-T',
    String(threads),
    '-q',
    String(outstanding),
    '-Q',
    String(maxQps),
    '-l',
    String(seconds),
    ...(mode ? ['-m', mode] : []),
  ];
}

/** The command line as printed in reports (PORT and FILE left symbolic). */
export function dnsperfCommandTemplate(seconds) {
  return `dnsperf -s 127.0.0.1 -p PORT -d queries.txt -c 4 -T 1 -q 100 -Q 1000000 -l ${seconds}`;
}

export function parseDnsperf(text) {
  const num = (re) => {
    const m = re.exec(text);
    return m ? Number(m[1]) : NaN;
  };
  const rcodes = {};
  const rc = /Response codes:\s+(.*)/.exec(text);
  if (rc) {
    for (const m of rc[1].matchAll(/([A-Z]+)\s+(\d+)/g)) rcodes[m[1]] = Number(m[2]);
  }
  return {
    sent: num(/Queries sent:\s+(\d+)/),
    completed: num(/Queries completed:\s+(\d+)/),
    lost: num(/Queries lost:\s+(\d+)/),
    qps: num(/Queries per second:\s+([\d.]+)/),
    avgLatencyS: num(/Average Latency \(s\):\s+([\d.]+)/),
    maxLatencyS: num(/Average Latency \(s\):.*max ([\d.]+)\)/),
    runTimeS: num(/Run time \(s\):\s+([\d.]+)/),
    rcodes,
  };
}

export async function runDnsperf(opts) {
  const args = dnsperfArgs(opts);
  const res = await runCommand('dnsperf', args, { pin: opts.pin ?? null, timeoutMs: (opts.seconds + 30) * 1000 });
  const parsed = parseDnsperf(res.stdout);
  if (res.code !== 0 || !Number.isFinite(parsed.qps)) {
    throw new Error(`dnsperf failed (exit ${res.code ?? res.signal}):\n${res.stdout}\n${res.stderr}`);
  }
  return parsed;
}

export async function dnsperfVersion() {
  try {
    const res = await runCommand('dnsperf', ['-h']);
    const m = /Version\s+(\S+)/.exec(res.stdout + res.stderr);
    return m ? m[1] : 'unknown';
  } catch {
    return 'not installed';
  }
}
