#!/usr/bin/env node
// What the latency bench's recording clients add on this machine, where the answer is known:
// lib/delay-responder.c (pinned to CPU 1) answers every query --delay-us after the kernel
// received it and reports how late it itself was; each client (C and Node, interleaved, as
// bench/latency.mjs runs them: pinned to CPU 0 at nice -10, pace timer, beside `dnsperf -Q`
// sending the rest of the rate to the same responder) records --sample-qps of it. The client's
// queries have names of their own, so the responder reports its lateness on exactly those:
// whatever a client reports above the delay plus that lateness is the client's (every query
// counted, --skip 0, so both sides cover the same queries).
//
//   node bench/latency-client-check.mjs [--delay-us 2000] [--rate 16600] [--sample-qps 2000]
//        [--seconds 15] [--rounds 2] [--clients c,node]

import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { printHeaderHelp } from './lib/help.mjs';
import { runDnsperf } from './lib/dnsperf.mjs';
import { buildCClient, buildDelayResponder } from './lib/latency-client-build.mjs';
import { killAllSync, runCommand, startProcess, stopAll, stopProcess } from './lib/procs.mjs';
import { freePort } from './lib/servers.mjs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const { values: opt } = parseArgs({
  options: {
    'delay-us': { type: 'string', default: '2000' },
    rate: { type: 'string', default: '16600' },
    'sample-qps': { type: 'string', default: '2000' },
    seconds: { type: 'string', default: '15' },
    rounds: { type: 'string', default: '2' },
    clients: { type: 'string', default: 'c,node' },
    help: { type: 'boolean', short: 'h', default: false },
  },
  strict: true,
});
if (opt.help) {
  printHeaderHelp(import.meta.url);
  process.exit(0);
}
const delayUs = Number(opt['delay-us']);
const rate = Number(opt.rate);
const sample = Math.min(rate, Number(opt['sample-qps']));
const seconds = Number(opt.seconds);
const log = (s) => process.stderr.write(`[client-check ${new Date().toISOString().slice(11, 19)}] ${s}\n`);
process.on('exit', () => killAllSync());

const responder = buildDelayResponder();
if (!responder.path) throw new Error(responder.error);
const cmds = { node: [process.execPath, join(root, 'bench/lib/latency-client.mjs')] };
const c = buildCClient();
if (c.path) cmds.c = [c.path];
else log(`no C client: ${c.error}`);
const clients = opt.clients.split(',').filter((k) => cmds[k]);

const dir = mkdtempSync(join(tmpdir(), 'clusterdns-client-check-'));
const queries = join(dir, 'queries.txt');
writeFileSync(queries, Array.from({ length: 100 }, (_, i) => `n${i}.example. A`).join('\n') + '\n');
const recorded = join(dir, 'recorded.txt');
writeFileSync(recorded, Array.from({ length: 100 }, (_, i) => `rec${i}.example. A`).join('\n') + '\n');

const rows = [];
try {
  for (let round = 0; round < Number(opt.rounds); round++) {
    for (const k of clients) {
      const port = await freePort(new Set());
      const rlog = join(dir, `responder-${k}-${round}.log`);
      const r = startProcess(
        'delay-responder',
        responder.path,
        ['--port', String(port), '--delay-us', String(delayUs), '--mark', 'rec'],
        {
          pin: 1,
          logFile: rlog,
        },
      );
      await new Promise((res) => setTimeout(res, 200));
      const total = seconds + 1;
      const [res] = await Promise.all([
        runCommand(
          'nice',
          [
            ...['-n', '-10', ...cmds[k], '--port', String(port), '--rate', String(sample)],
            ...['--seconds', String(total), '--queries', recorded, '--pace', 'timer', '--skip', '0'],
          ],
          { pin: 0, timeoutMs: (total + 60) * 1000 },
        ),
        rate - sample >= 1
          ? runDnsperf({ port, queryFile: queries, seconds: total, pin: 0, maxQps: rate - sample, outstanding: 1000 })
          : null,
      ]);
      await stopProcess(r);
      if (res.code !== 0) throw new Error(`${k} client failed: ${res.stderr}`);
      const m = JSON.parse(res.stdout.trim().split('\n').pop());
      const late = JSON.parse(readFileSync(rlog, 'utf8').trim().split('\n').pop()).markedLateUs;
      rows.push({ client: k, round, m, late });
      const L = m.latencyMs;
      log(
        `${k} round ${round + 1}: p50 ${L.p50} p99 ${L.p99} p99.9 ${L.p999} max ${L.max} ms (delay ${delayUs / 1000}); ` +
          `responder late on them p50 ${late.p50} p99 ${late.p99} p99.9 ${late.p999} max ${late.max} µs; client stalls ${m.stalls.count}, lost ${m.lost}`,
      );
    }
  }
} finally {
  await stopAll();
  rmSync(dir, { recursive: true, force: true });
}
const d = delayUs / 1000;
console.log(
  `\nResponder delay ${d} ms, ${rate} QPS (dnsperf ${rate - sample} + recorded ${sample}), ${seconds} s per run: ` +
    "what each client reported above the delay, how late the responder itself answered the client's queries, and the difference, the client's own (ms):\n",
);
console.log(
  "| client | round | reported − delay p50 / p99 / p99.9 / max | responder late p50 / p99 / p99.9 / max | client's own p50 / p99 / p99.9 / max | client stalls | lost |",
);
console.log('|---|---:|---|---|---|---:|---:|');
const keys = ['p50', 'p99', 'p999', 'max'];
const show = (xs) => xs.map((x) => (Number.isFinite(x) ? x.toFixed(3) : '—')).join(' / ');
for (const { client, round, m, late } of rows) {
  const over = keys.map((k) => (m.latencyMs[k] === null ? NaN : m.latencyMs[k] - d));
  const lateMs = keys.map((k) => (late?.[k] ?? NaN) / 1000);
  console.log(
    `| ${client} | ${round + 1} | ${show(over)} | ${show(lateMs)} | ${show(over.map((x, i) => x - lateMs[i]))} | ${m.stalls.count} | ${m.lost} |`,
  );
}
