// Answer checks with dig: before a server is measured it must answer sample names with
// exactly the expected record; a wrong answer stops the run instead of being benchmarked.

import { runCommand } from './procs.mjs';

/** One dig query; returns { status, answers: [{name, ttl, cls, type, data}], raw }. */
export async function dig(port, name, type = 'A', extra = []) {
  const res = await runCommand(
    'dig',
    ['@127.0.0.1', '-p', String(port), name, type, '+tries=1', '+time=1', '+noall', '+comments', '+answer', ...extra],
    { timeoutMs: 5000 },
  );
  const raw = res.stdout;
  const st = /status:\s+([A-Z]+)/.exec(raw);
  const answers = [];
  // With +noall +comments +answer, every line that is not a comment is an answer record.
  for (const line of raw.split('\n')) {
    if (line.startsWith(';') || line.trim() === '') continue;
    const f = line.trim().split(/\s+/);
    if (f.length >= 5)
      answers.push({ name: f[0], ttl: Number(f[1]), cls: f[2], type: f[3], data: f.slice(4).join(' ') });
  }
  return { status: st ? st[1] : null, answers, raw: raw + res.stderr };
}

/** Waits until the server answers anything at all (readiness), up to timeoutMs. */
export async function waitAnswering(port, name, timeoutMs, isAlive) {
  const deadline = Date.now() + timeoutMs;
  let last = null;
  while (Date.now() < deadline) {
    if (isAlive && !isAlive()) throw new Error('process exited before answering');
    last = await dig(port, name);
    if (last.status) return last;
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`no answer within ${timeoutMs} ms${last ? `:\n${last.raw}` : ''}`);
}

/**
 * Checks each sample {name, type, data, ttl, status?}; returns a list of problems (empty when
 * right). `status: 'NXDOMAIN'` or `data: null` (NODATA) expect that answer and no records.
 * The TTL must be exact: every server here is configured with the workload's TTL, and a
 * server that answers from a cache may count down, so allow ttl-1 as well.
 */
export async function checkAnswers(port, samples) {
  const problems = [];
  for (const s of samples) {
    const r = await dig(port, s.name, s.type);
    const fq = s.name.endsWith('.') ? s.name : s.name + '.';
    const rel = r.answers.filter((a) => a.type === s.type);
    const want = s.status ?? 'NOERROR';
    if (r.status !== want) problems.push(`${s.name} ${s.type}: status ${r.status ?? 'no answer'}, want ${want}`);
    // A negative answer (status NXDOMAIN, or data: null for NODATA) has no record of the type.
    else if (want !== 'NOERROR' || s.data === null) {
      if (rel.length !== 0) problems.push(`${s.name} ${s.type}: ${rel.length} ${s.type} records, want none\n${r.raw}`);
    } else if (rel.length !== 1)
      problems.push(`${s.name} ${s.type}: ${rel.length} ${s.type} records, want 1\n${r.raw}`);
    else {
      const a = rel[0];
      if (a.name.toLowerCase() !== fq.toLowerCase()) problems.push(`${s.name}: owner ${a.name}`);
      if (a.data !== s.data) problems.push(`${s.name}: data ${a.data}, want ${s.data}`);
      if (s.ttl != null && !(a.ttl <= s.ttl && a.ttl >= s.ttl - 1))
        problems.push(`${s.name}: TTL ${a.ttl}, want ${s.ttl}`);
    }
  }
  return problems;
}
