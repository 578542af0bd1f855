// diagnose walks a lookup the way glibc does: proven against glibc itself. In a fresh network
// and mount namespace (unshare -mn) a scripted DNS server listens on 127.0.0.1:53; for each
// scenario its resolv.conf is bind-mounted over /etc/resolv.conf, `getent ahosts NAME`
// (glibc's getaddrinfo) runs; then diagnose runs each scenario against its file (one process,
// see conformance-driver.ts; test/e2e/diagnose.test.ts covers the binary), and the queries
// each sent (the server logs them, with a marker line before each) must be the same, in the
// same order. Each scenario uses its own names so one server serves all.
// Skipped where namespaces cannot be created (not root, no unshare).
import { before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import type { LoggedQuery, Rule } from './fakedns.js';
import type { DiagnoseReport } from '../../src/diagnose/report.js';

const run = promisify(execFile);
const FAKE = resolve('dist/test/diagnose/fakedns-main.js');
const DRIVER = resolve('dist/test/diagnose/conformance-driver.js');

const canUnshare = (() => {
  if (process.getuid?.() !== 0) return false;
  const r = spawnSync('unshare', ['-mn', 'sh', '-c', 'ip link set lo up && command -v getent >/dev/null'], {
    timeout: 5000,
  });
  return r.status === 0;
})();

interface Scenario {
  resolvConf: string;
  name: string;
}

interface Observed {
  glibc: LoggedQuery[];
  ours: LoggedQuery[];
  report: DiagnoseReport;
  getentStatus: number;
}

const POD = 'search default.svc.cluster.local svc.cluster.local cluster.local\nnameserver 127.0.0.1\n';

const scenarios: Record<string, Scenario> = {
  walk: { resolvConf: POD + 'options ndots:5 timeout:1 attempts:1\n', name: 'alpha' },
  second: { resolvConf: POD + 'options ndots:5\n', name: 'bravo.default' },
  dotted: { resolvConf: POD + 'options ndots:2\n', name: 'api.charlie.com' },
  absolute: { resolvConf: POD + 'options ndots:5\n', name: 'delta.default.svc.cluster.local.' },
  timeout: { resolvConf: POD + 'options ndots:5 timeout:1 attempts:1\n', name: 'echo' },
  refused: { resolvConf: POD + 'options ndots:5 attempts:1\n', name: 'foxtrot' },
  servfail: { resolvConf: POD + 'options ndots:5 attempts:3\n', name: 'golf' },
  truncated: { resolvConf: POD + 'options ndots:5\n', name: 'hotel' },
  vc: {
    resolvConf:
      'search nope.example\ndomain default.svc.cluster.local\nnameserver 127.0.0.1\noptions ndots:5 use-vc no-aaaa\n',
    name: 'india',
  },
  root: { resolvConf: 'search . cluster.local\nnameserver 127.0.0.1\noptions ndots:0\n', name: 'juliet' },
  lossy: { resolvConf: POD + 'options ndots:5 timeout:1 attempts:2\n', name: 'kilo' },
};

const rules: Rule[] = [
  { match: '^alpha\\.svc\\.', reply: 'NODATA' },
  { match: '^alpha\\.cluster\\.local', reply: 'SERVFAIL' },
  { match: '^bravo\\.default\\.svc\\.cluster\\.local\\.$', reply: { A: '10.96.120.15' } },
  { match: '^echo\\.default\\.', reply: 'drop' },
  { match: '^foxtrot\\.default\\.', reply: 'REFUSED' },
  { match: '^golf\\.', reply: 'SERVFAIL' },
  { match: '^hotel\\.default\\.', reply: 'truncate', transport: 'udp' },
  { match: '^hotel\\.default\\.', reply: { A: '10.0.0.7', AAAA: 'fd00::7' } },
  { match: '^kilo\\.default\\.', type: 'AAAA', reply: 'drop' },
  { match: '^kilo\\.default\\.', reply: { A: '10.1.1.1' } },
];

const q = (s: string): string => `'${s.replaceAll("'", `'\\''`)}'`;

/** Runs every scenario in one namespace with one server; returns what each program sent. */
async function observeAll(): Promise<Map<string, Observed>> {
  const dir = mkdtempSync(join(tmpdir(), 'diagnose-glibc-'));
  const log = join(dir, 'queries.jsonl');
  let script =
    'set -u\nip link set lo up\n' +
    `node ${q(FAKE)} ${q(JSON.stringify(rules))} 127.0.0.1 53 ${q(log)} > ${q(join(dir, 'ready'))} &\n` +
    `P=$!\nfor i in $(seq 100); do grep -q ready ${q(join(dir, 'ready'))} 2>/dev/null && break; sleep 0.05; done\n`;
  const ours: string[] = [];
  for (const [key, s] of Object.entries(scenarios)) {
    const rc = join(dir, `${key}.conf`);
    writeFileSync(rc, s.resolvConf);
    script +=
      `mount --bind ${q(rc)} /etc/resolv.conf\n` +
      `echo '{"mark":"glibc ${key}"}' >> ${q(log)}\n` +
      `getent ahosts ${q(s.name)} > /dev/null; echo $? > ${q(join(dir, `${key}.status`))}\n` +
      'umount /etc/resolv.conf\n';
    ours.push(`${key}=${s.name}=${rc}`);
  }
  // diagnose reads each file itself (--resolv-conf); one process runs every scenario.
  script += `node ${q(DRIVER)} ${q(log)} ${q(dir)} ${ours.map(q).join(' ')}\nkill $P; wait $P\n`;
  await run('unshare', ['-mn', 'sh', '-c', script], { timeout: 60_000 });

  const sections = new Map<string, LoggedQuery[]>();
  let current: LoggedQuery[] | null = null;
  for (const line of readFileSync(log, 'utf8').split('\n')) {
    if (!line) continue;
    const entry = JSON.parse(line) as LoggedQuery | { mark: string };
    if ('mark' in entry) sections.set(entry.mark, (current = []));
    else current?.push(entry);
  }
  const out = new Map<string, Observed>();
  for (const key of Object.keys(scenarios)) {
    out.set(key, {
      glibc: sections.get(`glibc ${key}`) ?? [],
      ours: sections.get(`ours ${key}`) ?? [],
      report: JSON.parse(readFileSync(join(dir, `${key}.json`), 'utf8')) as DiagnoseReport,
      getentStatus: Number(readFileSync(join(dir, `${key}.status`), 'utf8').trim()),
    });
  }
  rmSync(dir, { recursive: true, force: true });
  return out;
}

const seq = (log: LoggedQuery[]) => log.map((x) => `${x.name} ${x.type} ${x.transport}`);
/** A and AAAA of one name go out together; their order on the wire is not fixed. */
const normal = (log: LoggedQuery[]) => {
  const out: string[] = [];
  for (let i = 0; i < log.length;) {
    const n =
      i + 1 < log.length &&
      log[i + 1]!.name === log[i]!.name &&
      log[i + 1]!.transport === log[i]!.transport &&
      log[i + 1]!.type !== log[i]!.type
        ? 2
        : 1;
    out.push(...seq(log.slice(i, i + n)).sort());
    i += n;
  }
  return out;
};
const names = (log: LoggedQuery[]) => [...new Set(log.map((x) => x.name))];

describe(
  'the queries diagnose sends are the ones glibc sends, in the same order',
  { skip: canUnshare ? false : 'needs root and unshare' },
  () => {
    let seen: Map<string, Observed>;
    before(async () => {
      seen = await observeAll();
    });
    const get = (key: string): Observed => {
      const o = seen.get(key)!;
      assert.ok(o.glibc.length > 0, `${key}: glibc sent nothing`);
      assert.deepEqual(normal(o.ours), normal(o.glibc), `${key}: diagnose and glibc sent different queries`);
      return o;
    };

    test('fewer dots than ndots: the search list first, NXDOMAIN, NODATA and SERVFAIL go on, then the bare name', () => {
      const o = get('walk');
      assert.deepEqual(names(o.glibc), [
        'alpha.default.svc.cluster.local.',
        'alpha.svc.cluster.local.',
        'alpha.cluster.local.',
        'alpha.',
      ]);
      assert.equal(o.report.verdict.status, 'nodata', 'glibc reports NO_DATA when any search domain had the name');
      assert.notEqual(o.getentStatus, 0);
    });

    test('a name found on the second search domain stops the walk there', () => {
      const o = get('second');
      assert.deepEqual(names(o.glibc), [
        'bravo.default.default.svc.cluster.local.',
        'bravo.default.svc.cluster.local.',
      ]);
      assert.equal(o.getentStatus, 0);
      assert.equal(o.report.verdict.status, 'resolved');
      assert.deepEqual(o.report.verdict.answers, ['10.96.120.15']);
    });

    test('ndots or more dots: the name as it is first, then the search list, and no bare name at the end', () => {
      const o = get('dotted');
      assert.equal(names(o.glibc)[0], 'api.charlie.com.');
      assert.equal(names(o.glibc).length, 4);
      assert.equal(o.report.verdict.status, 'nxdomain');
    });

    test('a trailing dot: only the name itself', () => {
      assert.deepEqual(names(get('absolute').glibc), ['delta.default.svc.cluster.local.']);
    });

    test('a timeout abandons the search list, but the bare name is still tried', () => {
      const o = get('timeout');
      assert.deepEqual(names(o.glibc), ['echo.default.svc.cluster.local.', 'echo.']);
      assert.ok(
        o.report.verdict.notes.some((n) => n.includes('echo.svc.cluster.local.') && n.includes('never asked')),
        'the note names what was skipped',
      );
    });

    test('REFUSED abandons the search list too', () => {
      assert.deepEqual(names(get('refused').glibc), ['foxtrot.default.svc.cluster.local.', 'foxtrot.']);
    });

    test('SERVFAIL is asked again `attempts` times, then the walk goes on', () => {
      const o = get('servfail');
      assert.equal(o.glibc.length, 4 * 3 * 2);
      assert.equal(o.report.verdict.status, 'servfail');
    });

    test('a truncated UDP answer is asked again over TCP', () => {
      const o = get('truncated');
      assert.ok(o.glibc.some((x) => x.transport === 'tcp'));
      assert.equal(o.report.verdict.status, 'resolved');
      assert.deepEqual(o.report.verdict.answers.sort(), ['10.0.0.7', 'fd00::7']);
    });

    test('use-vc asks over TCP only, no-aaaa asks for A only, and the last search/domain line wins', () => {
      const o = get('vc');
      assert.ok(o.glibc.every((x) => x.transport === 'tcp' && x.type === 'A'));
      assert.deepEqual(names(o.glibc), ['india.default.svc.cluster.local.', 'india.']);
    });

    test('AAAA lost, A answered: the pair is asked twice more (single-request, then reopen), then A alone is the answer', () => {
      const o = get('lossy');
      assert.deepEqual(
        seq(o.glibc),
        Array.from({ length: 3 }, () => [
          'kilo.default.svc.cluster.local. A udp',
          'kilo.default.svc.cluster.local. AAAA udp',
        ]).flat(),
      );
      assert.equal(o.getentStatus, 0);
      assert.deepEqual(o.report.verdict.answers, ['10.1.1.1']);
      assert.ok(o.report.verdict.notes.some((n) => n.includes('single-request-reopen')));
    });

    test('ndots:0 and the root in the search list', () => {
      assert.deepEqual(names(get('root').glibc), ['juliet.', 'juliet.cluster.local.']);
    });
  },
);
