// Medians, the Markdown tables, the machine line, and BENCHMARKS.md's marked section.

import { readFileSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { runCommand } from './procs.mjs';
import { dnsperfVersion } from './dnsperf.mjs';

export const BEGIN = '<!-- bench:begin -->';
export const END = '<!-- bench:end -->';

export function median(xs) {
  const v = xs.filter(Number.isFinite).sort((a, b) => a - b);
  if (v.length === 0) return NaN;
  const m = v.length >> 1;
  return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

const kqps = (q) => (Number.isFinite(q) ? `${(q / 1000).toFixed(q >= 100_000 ? 0 : 1)}k` : '—');
const ms = (s) => (Number.isFinite(s) ? `${(s * 1000).toFixed(2)} ms` : '—');
const pct = (p) => (Number.isFinite(p) ? `${p.toFixed(0)}%` : '—');
// CPU per query and, in parentheses, unbound's CPU per query ÷ this one (1 = as cheap as unbound).
const us = (u, base) => (Number.isFinite(u) ? `${u.toFixed(1)}${base ? ` (${(base / u).toFixed(2)} ×)` : ''}` : '—');
const us1 = (u) => (Number.isFinite(u) ? u.toFixed(1) : '—');
const mib = (kib) => (kib > 0 ? `${(kib / 1024).toFixed(0)} MB` : '—');

/** Summarises one server's rounds. */
export function summarize(runs) {
  const sent = runs.reduce((a, r) => a + r.sent, 0);
  const lost = runs.reduce((a, r) => a + r.lost, 0);
  const rcodes = {};
  for (const r of runs) for (const [k, v] of Object.entries(r.rcodes)) rcodes[k] = (rcodes[k] ?? 0) + v;
  return {
    qps: median(runs.map((r) => r.qps)),
    latency: median(runs.map((r) => r.avgLatencyS)),
    lost,
    sent,
    rcodes,
    perRound: runs.map((r) => r.qps),
    serverCpu: median(runs.map((r) => r.serverCpu)),
    cpuUsPerQuery: median(runs.map((r) => r.cpuUsPerQuery)),
    sysUsPerQuery: median(runs.map((r) => r.sysUsPerQuery)),
    otherCpu: median(runs.map((r) => r.otherCpu)),
  };
}

/**
 * rows: [{ name, label, summary, rssKiB, note }] of one mode; unbound's row gives the ratio base.
 */
export function table(rows) {
  const baseRow = rows.find((r) => r.name === 'unbound' && r.summary)?.summary;
  const base = baseRow?.qps;
  const baseUs = baseRow?.cpuUsPerQuery;
  // With Knot in the run, each row's CPU per query ÷ Knot's too (the mark of issue 23).
  const knotUs = rows.find((r) => r.name === 'knot' && r.summary)?.summary?.cpuUsPerQuery;
  const knotCol = (u) => (knotUs ? ` ${Number.isFinite(u) ? `${(u / knotUs).toFixed(2)} ×` : '—'} |` : '');
  const out = [
    `| server | QPS (median) | ratio vs unbound | avg latency | lost | RSS | QPS per round | server CPU | CPU µs/query (vs unbound) | of it system |${knotUs ? " CPU/query ÷ Knot's |" : ''} other work |`,
    `|---|---:|---:|---:|---:|---:|---|---:|---:|---:|${knotUs ? '---:|' : ''}---:|`,
  ];
  for (const r of rows) {
    if (!r.summary) {
      out.push(`| ${r.label} | — | — | — | — | — | not measured: ${r.note ?? ''} | — | — | — |${knotCol(NaN)} — |`);
      continue;
    }
    const s = r.summary;
    const ratio = base ? `${(s.qps / base).toFixed(2)} ×` : '—';
    const lostPct = s.sent ? ` (${((100 * s.lost) / s.sent).toFixed(2)}%)` : '';
    out.push(
      `| ${r.label} | ${kqps(s.qps)} | ${ratio} | ${ms(s.latency)} | ${s.lost}${lostPct} | ${mib(r.rssKiB)} | ${s.perRound.map(kqps).join(', ')} | ${pct(s.serverCpu)} | ${us(s.cpuUsPerQuery, baseUs)} | ${us1(s.sysUsPerQuery)} |${knotCol(s.cpuUsPerQuery)} ${pct(s.otherCpu)} |`,
    );
  }
  return out.join('\n');
}

async function versionOf(cmd, args, re) {
  try {
    const r = await runCommand(cmd, args, { timeoutMs: 5000 });
    const m = re.exec(r.stdout + r.stderr);
    return m ? m[1] : '?';
  } catch {
    return 'not installed';
  }
}

export async function machineInfo() {
  let cpu = 'unknown CPU';
  try {
    const m = /^model name\s*:\s*(.*)$/m.exec(readFileSync('/proc/cpuinfo', 'utf8'));
    if (m) cpu = m[1].trim();
  } catch {
    /* not Linux */
  }
  let nproc = String(availableParallelism());
  try {
    nproc = (await runCommand('nproc', [])).stdout.trim() || nproc;
  } catch {
    /* use availableParallelism */
  }
  const [dnsperf, unbound, dnsmasq, kresd, knot] = await Promise.all([
    dnsperfVersion(),
    versionOf('unbound', ['-V'], /Version\s+(\S+)/),
    versionOf('dnsmasq', ['--version'], /Dnsmasq version\s+(\S+)/),
    versionOf('kresd', ['--version'], /version\s+(\S+)/i),
    versionOf('knotd', ['-V'], /version\s+(\S+)/i),
  ]);
  return { nproc, cpu, node: process.version, dnsperf, unbound, dnsmasq, kresd, knot };
}

export function machineLine(m) {
  return `${m.nproc} CPUs (nproc), ${m.cpu}; Node ${m.node}, dnsperf ${m.dnsperf}, unbound ${m.unbound}, dnsmasq ${m.dnsmasq}, kresd ${m.kresd}, Knot ${m.knot}`;
}

/** Replaces the text between the markers in file; throws when the markers are missing. */
export function replaceMarked(file, body) {
  const text = readFileSync(file, 'utf8');
  const a = text.indexOf(BEGIN);
  const b = text.indexOf(END);
  if (a < 0 || b < a) throw new Error(`${file}: markers ${BEGIN} … ${END} not found`);
  writeFileSync(file, text.slice(0, a + BEGIN.length) + '\n' + body.trim() + '\n' + text.slice(b));
}

/**
 * The processes a peer list starts: a name given twice is a second process of the same server,
 * `knot#2` (`--peers knot,knot`), a control measuring the server against itself in the same run.
 * @param {string[]} names
 * @returns {{ peer: string, name: string }[]}
 */
export function peerInstances(names) {
  const seen = new Map();
  return names.map((peer) => {
    const nth = (seen.get(peer) ?? 0) + 1;
    seen.set(peer, nth);
    return { peer, name: nth > 1 ? `${peer}#${nth}` : peer };
  });
}

/**
 * Issue 23's point 3 for one scenario: each server's p99 and p99.9 over the reference's (Knot's),
 * met when p99 ≤ 2 × and p99.9 ≤ 1.5 × the reference's.
 * @param {{ p99: number, p999: number }} ref
 * @param {{ name: string, p99: number, p999: number }[]} servers
 */
export function tailMarks(ref, servers) {
  const over = (a, b) => (b > 0 ? a / b : NaN);
  return servers.map(({ name, p99, p999 }) => {
    const p99x = over(p99, ref.p99);
    const p999x = over(p999, ref.p999);
    return { name, p99x, p999x, met: p99x <= 2 && p999x <= 1.5 };
  });
}
