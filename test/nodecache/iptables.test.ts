import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  COMMENT_ALLOW_DNS,
  COMMENT_SKIP_CONNTRACK,
  Iptables,
  IptablesError,
  nodeCacheRules,
  ruleKey,
  ruleText,
  splitRuleLine,
} from '../../src/nodecache/iptables.js';
import type { CommandResult, CommandRunner, SyncCommandRunner } from '../../src/sys/exec.js';

/**
 * An iptables stand-in that keeps rules per table and answers -C/-I/-D, `-S` (printed the way
 * iptables does: `/32`, the implicit `-m udp`, and per `style` NOTRACK as nft or legacy prints
 * it, or in a form no parser knows) and iptables-restore batches.
 */
function fakeIptables(opts: { lockHeld?: number; style?: 'nft' | 'legacy' | 'opaque'; failRestore?: boolean } = {}) {
  const calls: string[][] = [];
  const rules: string[] = []; // "table chain spec..." with the spec as given
  let lockHeld = opts.lockHeld ?? 0;
  const ok = (stdout = ''): CommandResult => ({ code: 0, stdout, stderr: '' });
  const bad: CommandResult = {
    code: 1,
    stdout: '',
    stderr: 'iptables: Bad rule (does a matching rule exist in that chain?).',
  };
  const printed = (spec: string[]): string => {
    const get = (o: string) => spec[spec.indexOf(o) + 1];
    const proto = get('-p')!;
    const dir = spec.includes('-d') ? '-d' : '-s';
    const port = spec.includes('--dport') ? `--dport ${get('--dport')}` : `--sport ${get('--sport')}`;
    let target = `-j ${get('-j')}`;
    if (target === '-j NOTRACK' && opts.style === 'legacy') target = '-j CT --notrack';
    if (opts.style === 'opaque')
      return `${dir} ${get(dir)}/32 proto=${proto} ${port} comment="${get('--comment')}" ${target}`;
    return `${dir} ${get(dir)}/32 -p ${proto} -m ${proto} ${port} -m comment --comment "${get('--comment')}" ${target}`;
  };
  const apply = (op: string, key: string): CommandResult => {
    if (op === '-C') return rules.includes(key) ? ok() : bad;
    if (op === '-I') {
      rules.unshift(key);
      return ok();
    }
    if (op === '-D') {
      const i = rules.indexOf(key);
      if (i < 0) return bad;
      rules.splice(i, 1);
      return ok();
    }
    return { code: 2, stdout: '', stderr: `unknown op ${op}` };
  };
  const answer = (file: string, args: readonly string[], input?: string): CommandResult => {
    calls.push([file, ...args]);
    assert.equal(args[0], '-w', 'every call waits for the xtables lock');
    if (lockHeld > 0) {
      lockHeld--;
      return {
        code: 4,
        stdout: '',
        stderr: 'Another app is currently holding the xtables lock. Stopped waiting after 5s.',
      };
    }
    if (file.endsWith('-restore')) {
      assert.deepEqual(args, ['-w', '5', '--noflush']);
      if (opts.failRestore) return { code: 2, stdout: '', stderr: 'iptables-restore: line 2 failed' };
      let table = '';
      for (const line of (input ?? '').split('\n')) {
        if (line.startsWith('*')) table = line.slice(1);
        else if (line.startsWith('-')) {
          const [op, chain, ...spec] = splitRuleLine(line);
          const r = apply(op!, [table, chain, ...spec].join(' '));
          if (r.code !== 0) return { code: 2, stdout: '', stderr: `line failed: ${line}` };
        }
      }
      return ok();
    }
    const t = args.indexOf('-t');
    const table = args[t + 1]!;
    if (args[t + 2] === '-S') {
      const lines = rules
        .filter((r) => r.startsWith(`${table} `))
        .map((r) => {
          const [, chain, ...spec] = r.split(' ');
          return `-A ${chain} ${printed(joinComment(spec))}`;
        });
      return ok(
        `-P INPUT ACCEPT\n-A INPUT -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT\n${lines.join('\n')}\n`,
      );
    }
    return apply(args[t + 2]!, [table, args[t + 3], ...args.slice(t + 4)].join(' '));
  };
  const run: CommandRunner = async (file, args, input) => answer(file, args, input);
  const runSync: SyncCommandRunner = (file, args, input) => answer(file, args, input);
  return { run, runSync, calls, rules };
}

/** Our stored keys join the comment's words with spaces; put them back together. */
function joinComment(words: string[]): string[] {
  const i = words.indexOf('--comment');
  const j = words.indexOf('-j');
  return [...words.slice(0, i + 1), words.slice(i + 1, j).join(' '), ...words.slice(j)];
}

test('twelve rules per local IP, as node-cache installs them, each tagged with its comment', () => {
  const rules = nodeCacheRules(['169.254.20.10', '10.96.0.10'], 53, 8080);
  assert.equal(rules.length, 24);
  const texts = rules.slice(0, 12).map(ruleText);
  assert.deepEqual(texts, [
    `-t raw PREROUTING -p tcp -d 169.254.20.10 --dport 53 -m comment --comment "${COMMENT_SKIP_CONNTRACK}" -j NOTRACK`,
    `-t raw PREROUTING -p udp -d 169.254.20.10 --dport 53 -m comment --comment "${COMMENT_SKIP_CONNTRACK}" -j NOTRACK`,
    `-t filter INPUT -p tcp -d 169.254.20.10 --dport 53 -m comment --comment "${COMMENT_ALLOW_DNS}" -j ACCEPT`,
    `-t filter INPUT -p udp -d 169.254.20.10 --dport 53 -m comment --comment "${COMMENT_ALLOW_DNS}" -j ACCEPT`,
    `-t raw OUTPUT -p tcp -s 169.254.20.10 --sport 53 -m comment --comment "${COMMENT_SKIP_CONNTRACK}" -j NOTRACK`,
    `-t raw OUTPUT -p udp -s 169.254.20.10 --sport 53 -m comment --comment "${COMMENT_SKIP_CONNTRACK}" -j NOTRACK`,
    `-t filter OUTPUT -p tcp -s 169.254.20.10 --sport 53 -m comment --comment "${COMMENT_ALLOW_DNS}" -j ACCEPT`,
    `-t filter OUTPUT -p udp -s 169.254.20.10 --sport 53 -m comment --comment "${COMMENT_ALLOW_DNS}" -j ACCEPT`,
    `-t raw OUTPUT -p tcp -d 169.254.20.10 --dport 53 -m comment --comment "${COMMENT_SKIP_CONNTRACK}" -j NOTRACK`,
    `-t raw OUTPUT -p udp -d 169.254.20.10 --dport 53 -m comment --comment "${COMMENT_SKIP_CONNTRACK}" -j NOTRACK`,
    `-t raw OUTPUT -p tcp -d 169.254.20.10 --dport 8080 -m comment --comment "${COMMENT_SKIP_CONNTRACK}" -j NOTRACK`,
    `-t raw OUTPUT -p tcp -s 169.254.20.10 --sport 8080 -m comment --comment "${COMMENT_SKIP_CONNTRACK}" -j NOTRACK`,
  ]);
  assert.ok(rules.slice(12).every((r) => r.spec.includes('10.96.0.10')));
  // -dns.port is the port in the rules.
  assert.ok(
    nodeCacheRules(['169.254.20.10'], 5353, 8080)
      .slice(0, 10)
      .every((r) => r.spec.includes('5353')),
  );
});

test('ruleKey reads iptables -S lines the way iptables means them', () => {
  const [rule] = nodeCacheRules(['169.254.20.10'], 53, 8080);
  const mine = ruleKey(rule!.chain, rule!.spec);
  const nft = splitRuleLine(
    '-A PREROUTING -d 169.254.20.10/32 -p tcp -m tcp --dport 53 -m comment --comment "NodeLocal DNS Cache: skip conntrack" -j NOTRACK',
  );
  const legacy = splitRuleLine(
    '-A PREROUTING -d 169.254.20.10/32 -p tcp -m tcp --dport 53 -m comment --comment "NodeLocal DNS Cache: skip conntrack" -j CT --notrack',
  );
  assert.equal(ruleKey(nft[1]!, nft.slice(2)), mine);
  assert.equal(ruleKey(legacy[1]!, legacy.slice(2)), mine);
  const other = splitRuleLine(
    '-A PREROUTING -d 169.254.20.10/32 -p tcp -m tcp --dport 5353 -m comment --comment "NodeLocal DNS Cache: skip conntrack" -j NOTRACK',
  );
  assert.notEqual(ruleKey(other[1]!, other.slice(2)), mine);
  const negated = splitRuleLine(
    '-A PREROUTING ! -d 169.254.20.10/32 -p tcp -m tcp --dport 53 -m comment --comment "NodeLocal DNS Cache: skip conntrack" -j NOTRACK',
  );
  assert.notEqual(ruleKey(negated[1]!, negated.slice(2)), mine);
});

for (const style of ['nft', 'legacy', 'opaque'] as const) {
  test(`ensureAll installs the missing rules in one iptables-restore batch and never duplicates (${style} listing)`, async () => {
    const fake = fakeIptables({ style });
    const ipt = new Iptables(4, fake.run, fake.runSync);
    const rules = nodeCacheRules(['169.254.20.10', '10.96.0.10'], 53, 8080);
    const first = await ipt.ensureAll(rules);
    assert.deepEqual(first.errors, []);
    assert.equal(first.added.length, 24);
    assert.equal(fake.rules.length, 24);
    assert.deepEqual(
      fake.calls.map((c) => c[0]),
      ['iptables', 'iptables', 'iptables-restore'],
      'two listings and one batch',
    );
    fake.calls.length = 0;
    const again = await ipt.ensureAll(rules);
    assert.equal(again.added.length, 0);
    assert.equal(fake.rules.length, 24);
    // A listing we cannot read is confirmed rule by rule with -C; a readable one needs nothing more.
    assert.equal(fake.calls.filter((c) => c.includes('-C')).length, style === 'opaque' ? 24 : 0);
    assert.ok(fake.calls.every((c) => !c.includes('-I') && c[0] !== 'iptables-restore'));
    // Someone deletes two rules: exactly those come back.
    fake.rules.splice(fake.rules.indexOf(`raw PREROUTING ${rules[13]!.spec.join(' ')}`), 1);
    fake.rules.splice(fake.rules.indexOf(`filter INPUT ${rules[2]!.spec.join(' ')}`), 1);
    const back = await ipt.ensureAll(rules);
    assert.deepEqual(back.added.map(ruleText).sort(), [rules[13]!, rules[2]!].map(ruleText).sort());
    assert.equal(fake.rules.length, 24);
    assert.equal(new Set(fake.rules).size, 24);
  });
}

test('when the batch fails, rules are added one by one and each failure names its rule', async () => {
  const fake = fakeIptables({ failRestore: true });
  const ipt = new Iptables(4, fake.run, fake.runSync);
  const rules = nodeCacheRules(['169.254.20.10'], 53, 8080);
  const r = await ipt.ensureAll(rules);
  assert.equal(r.added.length, 12);
  assert.equal(fake.calls.filter((c) => c.includes('-I')).length, 12);
  assert.equal(fake.rules.length, 12);
});

test('removeAll deletes every copy, including duplicates an older agent left', async () => {
  for (const style of ['nft', 'opaque'] as const) {
    const fake = fakeIptables({ style });
    const ipt = new Iptables(4, fake.run, fake.runSync);
    const rules = nodeCacheRules(['169.254.20.10'], 53, 8080);
    await ipt.ensureAll(rules);
    const dup = `raw PREROUTING ${rules[0]!.spec.join(' ')}`;
    fake.rules.push(dup, dup);
    fake.rules.push('filter INPUT -p tcp -j ACCEPT'); // not ours: stays
    assert.equal((await ipt.removeAll(rules)).removed, 14, style);
    assert.deepEqual(fake.rules, ['filter INPUT -p tcp -j ACCEPT']);
    await ipt.ensureAll(rules);
    assert.equal(ipt.removeAllSync(rules).removed, 12, 'the synchronous exit-hook path does the same');
    assert.equal(fake.rules.length, 1);
  }
});

test('a held xtables lock is reported as iptables_lock, other failures as iptables', async () => {
  const fake = fakeIptables({ lockHeld: 1 });
  const ipt = new Iptables(4, fake.run, fake.runSync);
  const rules = nodeCacheRules(['169.254.20.10'], 53, 8080);
  const locked = await ipt.ensureAll(rules);
  assert.equal(locked.errors.length, 1);
  assert.equal(locked.errors[0]!.errorType, 'iptables_lock');
  assert.equal((await ipt.ensureAll(rules)).added.length, 12, 'the next sync succeeds');
  const broken = new Iptables(
    4,
    async () => ({ code: 2, stdout: '', stderr: "iptables v1.8.9 (nf_tables): Couldn't load match `comment'" }),
    fake.runSync,
  );
  await assert.rejects(
    broken.ensure(rules[0]!),
    (e: unknown) => e instanceof IptablesError && e.errorType === 'iptables' && /comment/.test(e.message),
  );
  const r = await broken.ensureAll(rules);
  assert.equal(r.errors[0]!.errorType, 'iptables');
});

test('every call is an argument vector: the comment is one argument, nothing goes through a shell', async () => {
  const fake = fakeIptables({ style: 'opaque' });
  const ipt = new Iptables(4, fake.run, fake.runSync);
  const rules = nodeCacheRules(['169.254.20.10'], 53, 8080);
  await ipt.ensureAll(rules);
  await ipt.ensureAll(rules); // the opaque listing makes this one confirm each rule with -C
  const checks = fake.calls.filter((c) => c.includes('-C'));
  assert.ok(checks.length > 0);
  assert.ok(checks.every((c) => c.includes(COMMENT_SKIP_CONNTRACK) !== c.includes(COMMENT_ALLOW_DNS)));
});

test('IPv6 local IPs are handled by ip6tables and ip6tables-restore', async () => {
  const fake = fakeIptables();
  const ipt = new Iptables(6, fake.run, fake.runSync);
  await ipt.ensureAll(nodeCacheRules(['fd00::10'], 53, 8080));
  assert.deepEqual([...new Set(fake.calls.map((c) => c[0]))], ['ip6tables', 'ip6tables-restore']);
});
