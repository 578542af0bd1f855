// The report for a terminal: the resolver settings, each candidate with what came back,
// the cluster checks, then the verdict and what to check next. Colour only when asked for
// (stdout is a TTY and NO_COLOR is unset).

import type { DiagnoseReport, QueryJson } from './report.js';

export interface Style {
  bold: (s: string) => string;
  dim: (s: string) => string;
  green: (s: string) => string;
  yellow: (s: string) => string;
  red: (s: string) => string;
}

const plain: Style = { bold: (s) => s, dim: (s) => s, green: (s) => s, yellow: (s) => s, red: (s) => s };

const sgr = (code: string) => (s: string) => `\x1b[${code}m${s}\x1b[0m`;
const ansi: Style = { bold: sgr('1'), dim: sgr('2'), green: sgr('32'), yellow: sgr('33'), red: sgr('31') };

/** Colour when writing to a terminal and NO_COLOR (https://no-color.org) is not set. */
export function wantColour(isTTY: boolean | undefined, env: NodeJS.ProcessEnv): boolean {
  return isTTY === true && !env.NO_COLOR;
}

function ms(x: number | null): string {
  if (x === null) return '';
  return x < 10 ? `${x.toFixed(1)} ms` : `${Math.round(x)} ms`;
}

function pad(s: string, n: number): string {
  return s.length >= n ? s : s + ' '.repeat(n - s.length);
}

function queryLine(q: QueryJson, st: Style): string {
  const type = pad(q.type, 5);
  const where = q.server ? `${q.server} ${q.transport ?? ''}` : '';
  const tries =
    q.tries.length > 1
      ? st.dim(
          ` (${q.tries.length} tries: ${q.tries.map((t) => (t.result === 'reply' ? (t.rcode ?? 'reply') : t.result)).join(', ')})`,
        )
      : '';
  if (q.status === 'reply') {
    const rcode = q.rcode ?? '';
    const colour =
      rcode === 'NOERROR' && q.answers.length > 0
        ? st.green
        : rcode === 'NOERROR' || rcode === 'NXDOMAIN'
          ? st.yellow
          : st.red;
    const data =
      q.answers.length > 0
        ? q.answers.map((a) => (a.type === q.type ? a.data : `${a.type} ${a.data}`)).join(', ')
        : rcode === 'NOERROR'
          ? '(no records)'
          : '';
    return `${type} ${colour(pad(rcode, 9))} ${pad(data, 28)} ${st.dim(`${where} ${ms(q.latencyMs)}`)}${tries}`;
  }
  const what = q.status === 'timeout' ? 'timeout' : q.status === 'refused' ? 'refused' : 'error';
  const detail = q.error ? ` ${q.error}` : '';
  return `${type} ${st.red(pad(what, 9))} ${pad(detail.trim(), 28)} ${st.dim(where)}${tries}`;
}

export function renderText(r: DiagnoseReport, colour: boolean): string {
  const st = colour ? ansi : plain;
  const out: string[] = [];
  const rc = r.resolvConf;
  out.push(st.bold(`diagnose ${r.name} (${r.types.join(', ')}), looked up as glibc's resolver does`));
  out.push('');
  out.push(`${st.bold('resolv.conf')}  ${rc.file}`);
  out.push(`  nameserver ${rc.nameservers.join(' ')}`);
  out.push(
    `  search     ${rc.search.length ? rc.search.join(' ') : st.dim(`(none${rc.searchSource === 'none' ? '' : `, from ${rc.searchSource}`})`)}${rc.searchSource === 'hostname' ? st.dim(' (from the host name)') : ''}`,
  );
  out.push(`  options    ${rc.options.join(' ')}`);
  out.push(`  asking     ${r.servers.join(' ')}${r.serversFrom === '--server' ? st.dim(' (--server)') : ''}`);
  for (const p of rc.problems) out.push(st.yellow(`  ! ${p.line ? `line ${p.line}: ` : ''}${p.message}`));
  out.push('');
  out.push(`${st.bold('Search order')}: ${r.rule}`);
  r.candidates.forEach((c, i) => {
    out.push(`  ${i + 1}. ${st.bold(c.name)}  ${st.dim(c.reason)}`);
    if (!c.sent) {
      out.push(`       ${st.dim(c.skipped ?? (c.outcome === 'invalid' ? 'not asked: invalid name' : 'not asked'))}`);
      return;
    }
    for (const q of c.queries) out.push(`       ${queryLine(q, st)}`);
    if (c.then) out.push(`       ${st.dim('-> ' + c.then)}`);
  });
  if (r.cluster) {
    out.push('');
    out.push(`${st.bold('Cluster DNS')} ${st.dim(`(${r.cluster.source})`)}`);
    if (r.cluster.error) out.push(st.red(`  cannot check: ${r.cluster.error}`));
    for (const c of r.cluster.checks) {
      const mark =
        c.status === 'ok'
          ? st.green('ok  ')
          : c.status === 'warn'
            ? st.yellow('WARN')
            : c.status === 'fail'
              ? st.red('FAIL')
              : c.status === 'error'
                ? st.red('ERR ')
                : st.dim('skip');
      out.push(`  ${mark}  ${pad(c.step, 9)}  ${c.summary}`);
      for (const d of c.details) out.push(st.dim(`                   ${d}`));
    }
  }
  out.push('');
  const v = r.verdict;
  const label = v.status === 'resolved' ? st.green('RESOLVED') : st.red(v.status.toUpperCase());
  out.push(`${st.bold('Verdict')}: ${label}  ${v.summary}`);
  if (v.applicationError)
    out.push(
      `  the application sees: ${v.applicationError.gai} "${v.applicationError.message}" (h_errno ${v.applicationError.herrno})`,
    );
  for (const n of v.notes) out.push(st.dim(`  note: ${n}`));
  if (v.next.length > 0) {
    out.push(st.bold('Next'));
    for (const n of v.next) out.push(`  - ${n}`);
  }
  out.push(st.dim(`(${ms(r.durationMs)})`));
  return out.join('\n') + '\n';
}
