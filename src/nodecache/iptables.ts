// The iptables rules k8s-dns-node-cache installs for each local IP (12 per IP), each tagged
// with a comment so that anyone can find them, and the check/insert/delete steps around them.
//
// Starting a program costs ~50-70 ms on small nodes, and upstream's way (one `-C`, maybe one
// `-I`, per rule) takes seconds for 24 rules. So: one `-S` listing per table says which rules
// are there; a rule the listing does not clearly show is confirmed with `-C` (iptables itself
// decides, so a listing format we misread can never cause a duplicate); everything missing is
// inserted with one `iptables-restore --noflush`, falling back to one `-I` per rule on error.

import type { CommandResult, CommandRunner, SyncCommandRunner } from '../sys/exec.js';
import { runSteps, runStepsSync, type Step, type Steps } from './steps.js';

export const COMMENT_SKIP_CONNTRACK = 'NodeLocal DNS Cache: skip conntrack';
export const COMMENT_ALLOW_DNS = 'NodeLocal DNS Cache: allow DNS traffic';

export type Table = 'raw' | 'filter';
export type Chain = 'PREROUTING' | 'INPUT' | 'OUTPUT';

export interface IptablesRule {
  table: Table;
  chain: Chain;
  /** Match, comment and target, as given to `iptables -t TABLE -I CHAIN ...`. */
  spec: string[];
}

/** The NOTRACK/ACCEPT rules upstream node-local-dns installs, in its order, for every local IP. */
export function nodeCacheRules(localIPs: readonly string[], dnsPort: number, healthPort: number): IptablesRule[] {
  const port = String(dnsPort);
  const health = String(healthPort);
  /** NOTRACK in raw (conntrack skipped) or ACCEPT in filter, for DNS to or from `ip` on port `p`. */
  const rule = (
    target: 'NOTRACK' | 'ACCEPT',
    chain: Chain,
    proto: 'tcp' | 'udp',
    dir: '-d' | '-s',
    ip: string,
    p: string,
  ): IptablesRule => ({
    table: target === 'NOTRACK' ? 'raw' : 'filter',
    chain,
    spec: [
      '-p',
      proto,
      dir,
      ip,
      dir === '-d' ? '--dport' : '--sport',
      p,
      '-m',
      'comment',
      '--comment',
      target === 'NOTRACK' ? COMMENT_SKIP_CONNTRACK : COMMENT_ALLOW_DNS,
      '-j',
      target,
    ],
  });
  const notrack = (chain: Chain, proto: 'tcp' | 'udp', dir: '-d' | '-s', ip: string, p: string) =>
    rule('NOTRACK', chain, proto, dir, ip, p);
  const accept = (chain: Chain, proto: 'tcp' | 'udp', dir: '-d' | '-s', ip: string) =>
    rule('ACCEPT', chain, proto, dir, ip, port);
  const out: IptablesRule[] = [];
  for (const ip of localIPs) {
    out.push(
      // Queries arriving for the local IP skip conntrack, and so kube-proxy's DNAT for it.
      notrack('PREROUTING', 'tcp', '-d', ip, port),
      notrack('PREROUTING', 'udp', '-d', ip, port),
      // Untracked packets miss the usual ESTABLISHED,RELATED accepts.
      accept('INPUT', 'tcp', '-d', ip),
      accept('INPUT', 'udp', '-d', ip),
      // Our answers.
      notrack('OUTPUT', 'tcp', '-s', ip, port),
      notrack('OUTPUT', 'udp', '-s', ip, port),
      accept('OUTPUT', 'tcp', '-s', ip),
      accept('OUTPUT', 'udp', '-s', ip),
      // Host-network clients on this node.
      notrack('OUTPUT', 'tcp', '-d', ip, port),
      notrack('OUTPUT', 'udp', '-d', ip, port),
      // The kubelet's liveness probe of the health endpoint.
      notrack('OUTPUT', 'tcp', '-d', ip, health),
      notrack('OUTPUT', 'tcp', '-s', ip, health),
    );
  }
  return out;
}

const quote = (a: string): string => (/[\s"]/.test(a) ? `"${a.replaceAll('"', '\\"')}"` : a);

/** `-t raw PREROUTING -p tcp -d ...` for log lines. */
export function ruleText(rule: IptablesRule): string {
  return `-t ${rule.table} ${rule.chain} ${rule.spec.map(quote).join(' ')}`;
}

/** Splits an `iptables -S` line into arguments (double quotes group, backslash escapes). */
export function splitRuleLine(line: string): string[] {
  const out: string[] = [];
  let cur = '';
  let inToken = false;
  let quoted = false;
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!;
    if (c === '\\' && i + 1 < line.length) {
      cur += line[++i];
      inToken = true;
    } else if (c === '"') {
      quoted = !quoted;
      inToken = true;
    } else if (!quoted && /\s/.test(c)) {
      if (inToken) out.push(cur);
      cur = '';
      inToken = false;
    } else {
      cur += c;
      inToken = true;
    }
  }
  if (inToken) out.push(cur);
  return out;
}

/**
 * A rule's identity, whichever way it is written: `-d 10.96.0.10` = `-d 10.96.0.10/32`,
 * the implicit `-m udp` dropped, `-j CT --notrack` = `-j NOTRACK`, options in any order.
 * Anything not understood stays in the key, so two different rules never compare equal.
 */
export function ruleKey(chain: string, spec: readonly string[]): string {
  const parts: string[] = [];
  for (let i = 0; i < spec.length; i++) {
    const t = spec[i]!;
    const v = spec[i + 1];
    if ((t === '-d' || t === '-s') && v !== undefined) {
      parts.push(`${t} ${v.replace(/\/(32|128)$/, '')}`);
      i++;
    } else if (t === '-m' && (v === 'tcp' || v === 'udp' || v === 'comment')) {
      i++;
    } else if (t === '-j' && v === 'CT' && spec[i + 2] === '--notrack') {
      parts.push('-j NOTRACK');
      i += 2;
    } else if (t.startsWith('-') && v !== undefined && !v.startsWith('-')) {
      parts.push(`${t} ${v}`);
      i++;
    } else parts.push(t);
  }
  return `${chain}|${parts.sort().join('|')}`;
}

export type IptablesErrorType = 'iptables' | 'iptables_lock';

export class IptablesError extends Error {
  readonly code = 'NODECACHE_ERR_IPTABLES';
  constructor(
    message: string,
    readonly errorType: IptablesErrorType,
  ) {
    super(message);
    this.name = 'IptablesError';
  }
}

export interface EnsureReport {
  /** Rules that were missing and are now in place. */
  added: IptablesRule[];
  /** Failures: one for a listing that failed, else one per rule that could not be checked or added. */
  errors: IptablesError[];
}

interface Listing {
  /** Rule key → how many copies the chain holds. */
  counts: Map<string, number>;
  /** Tables/chains with a line carrying one of our comments that matches none of our keys. */
  unclear: Set<string>;
}

const OUR_COMMENTS = [COMMENT_SKIP_CONNTRACK, COMMENT_ALLOW_DNS];

/** iptables for IPv4 local IPs, ip6tables for IPv6; `-w` waits for the xtables lock. */
export class Iptables {
  readonly program: string;
  readonly restoreProgram: string;

  constructor(
    family: 4 | 6,
    private readonly run: CommandRunner,
    private readonly runSync: SyncCommandRunner,
    private readonly waitSeconds = 5,
  ) {
    this.program = family === 6 ? 'ip6tables' : 'iptables';
    this.restoreProgram = `${this.program}-restore`;
  }

  private step(op: '-C' | '-I' | '-D', rule: IptablesRule): Step {
    return {
      file: this.program,
      args: ['-w', String(this.waitSeconds), '-t', rule.table, op, rule.chain, ...rule.spec],
    };
  }

  private failure(step: Step, r: CommandResult): IptablesError {
    const type: IptablesErrorType = /holding the xtables lock/i.test(r.stderr) ? 'iptables_lock' : 'iptables';
    const what =
      step.input !== undefined
        ? `${step.file} ${step.args.join(' ')}`
        : `${step.file} ${step.args.slice(2).map(quote).join(' ')}`;
    return new IptablesError(`${what}: ${r.stderr.trim() || `exit status ${r.code}`}`, type);
  }

  /** One `-S` per table the rules use; keys of every rule line, and chains we cannot read clearly. */
  private *listSteps(rules: readonly IptablesRule[]): Steps<Listing> {
    const ours = new Set(rules.map((r) => ruleKey(r.chain, r.spec)));
    const listing: Listing = { counts: new Map(), unclear: new Set() };
    for (const table of new Set(rules.map((r) => r.table))) {
      const step: Step = { file: this.program, args: ['-w', String(this.waitSeconds), '-t', table, '-S'] };
      const r = yield step;
      if (r.code !== 0) throw this.failure(step, r);
      for (const line of r.stdout.split('\n')) {
        if (!line.startsWith('-A ')) continue;
        const [, chain = '', ...spec] = splitRuleLine(line);
        const key = ruleKey(chain, spec);
        listing.counts.set(key, (listing.counts.get(key) ?? 0) + 1);
        if (!ours.has(key) && OUR_COMMENTS.some((c) => line.includes(c))) listing.unclear.add(`${table} ${chain}`);
      }
    }
    return listing;
  }

  /** `-C`: true present, false absent; throws on any other answer. */
  private *checkSteps(rule: IptablesRule): Steps<boolean> {
    const check = this.step('-C', rule);
    const c = yield check;
    if (c.code === 0) return true;
    // 1 = "does a matching rule exist in that chain?"; anything else is a real failure.
    if (c.code !== 1) throw this.failure(check, c);
    return false;
  }

  private restoreStep(lines: Array<{ op: '-I' | '-D'; rule: IptablesRule }>): Step {
    let input = '';
    for (const table of new Set(lines.map((l) => l.rule.table))) {
      input += `*${table}\n`;
      for (const l of lines)
        if (l.rule.table === table) input += `${l.op} ${l.rule.chain} ${l.rule.spec.map(quote).join(' ')}\n`;
      input += 'COMMIT\n';
    }
    return { file: this.restoreProgram, args: ['-w', String(this.waitSeconds), '--noflush'], input };
  }

  /** Check, else insert at the top. Never adds a second copy. */
  *ensureSteps(rule: IptablesRule): Steps<'added' | 'present'> {
    if (yield* this.checkSteps(rule)) return 'present';
    const insert = this.step('-I', rule);
    const i = yield insert;
    if (i.code !== 0) throw this.failure(insert, i);
    return 'added';
  }

  /** Every rule in place, each once: list, confirm what the listing leaves unclear, batch-insert the rest. */
  *ensureAllSteps(rules: readonly IptablesRule[]): Steps<EnsureReport> {
    const report: EnsureReport = { added: [], errors: [] };
    let listing: Listing;
    try {
      listing = yield* this.listSteps(rules);
    } catch (e) {
      report.errors.push(e as IptablesError);
      return report;
    }
    const missing: IptablesRule[] = [];
    for (const rule of rules) {
      if ((listing.counts.get(ruleKey(rule.chain, rule.spec)) ?? 0) > 0) continue;
      if (!listing.unclear.has(`${rule.table} ${rule.chain}`)) {
        missing.push(rule);
        continue;
      }
      try {
        if (!(yield* this.checkSteps(rule))) missing.push(rule);
      } catch (e) {
        report.errors.push(e as IptablesError);
      }
    }
    if (missing.length === 0) return report;
    const batch = this.restoreStep(missing.map((rule) => ({ op: '-I', rule })));
    if ((yield batch).code === 0) {
      report.added.push(...missing);
      return report;
    }
    // The batch failed as a whole: one rule at a time, so each error names its rule.
    for (const rule of missing) {
      try {
        if ((yield* this.ensureSteps(rule)) === 'added') report.added.push(rule);
      } catch (e) {
        report.errors.push(e as IptablesError);
      }
    }
    return report;
  }

  /** Delete every copy (a crash and an older agent may have left several). Resolves how many. */
  *deleteSteps(rule: IptablesRule): Steps<number> {
    const del = this.step('-D', rule);
    for (let n = 0; n < 1000; n++) {
      const r = yield del;
      if (r.code === 0) continue;
      if (r.code === 1 || /does a matching rule exist|No chain\/target\/match|Bad rule/i.test(r.stderr)) return n;
      throw this.failure(del, r);
    }
    return 1000;
  }

  /** Removes every copy of every rule: one batch for what the listing shows, `-D` loops for the rest. */
  *removeAllSteps(rules: readonly IptablesRule[]): Steps<{ removed: number; errors: IptablesError[] }> {
    const errors: IptablesError[] = [];
    let removed = 0;
    let listing: Listing | null = null;
    try {
      listing = yield* this.listSteps(rules);
    } catch (e) {
      errors.push(e as IptablesError);
    }
    const slow: IptablesRule[] = [];
    const batch: Array<{ op: '-D'; rule: IptablesRule }> = [];
    for (const rule of rules) {
      const n = listing?.counts.get(ruleKey(rule.chain, rule.spec)) ?? 0;
      for (let i = 0; i < n; i++) batch.push({ op: '-D', rule });
      // No listing, or lines of ours in this chain we could not read: let iptables itself decide.
      if (!listing || listing.unclear.has(`${rule.table} ${rule.chain}`)) slow.push(rule);
    }
    if (batch.length > 0) {
      if ((yield this.restoreStep(batch)).code === 0) removed += batch.length;
      else slow.push(...new Set(batch.map((b) => b.rule)));
    }
    for (const rule of new Set(slow)) {
      try {
        removed += yield* this.deleteSteps(rule);
      } catch (e) {
        errors.push(e as IptablesError);
      }
    }
    return { removed, errors };
  }

  ensureAll(rules: readonly IptablesRule[]): Promise<EnsureReport> {
    return runSteps(this.ensureAllSteps(rules), this.run);
  }

  removeAll(rules: readonly IptablesRule[]): Promise<{ removed: number; errors: IptablesError[] }> {
    return runSteps(this.removeAllSteps(rules), this.run);
  }

  removeAllSync(rules: readonly IptablesRule[]): { removed: number; errors: IptablesError[] } {
    return runStepsSync(this.removeAllSteps(rules), this.runSync);
  }

  ensure(rule: IptablesRule): Promise<'added' | 'present'> {
    return runSteps(this.ensureSteps(rule), this.run);
  }

  exists(rule: IptablesRule): Promise<boolean> {
    return runSteps(this.checkSteps(rule), this.run);
  }

  delete(rule: IptablesRule): Promise<number> {
    return runSteps(this.deleteSteps(rule), this.run);
  }
}
