// The bounded store: entries found by name (one Map lookup, then a scan of the few
// entries that name has), a name tree for dropping everything under a suffix, and two
// SIEVE queues (success and denial) that decide what goes when a queue is full.
//
// SIEVE (Zhang et al., NSDI '24) keeps a FIFO queue and a "visited" bit per entry. A hit
// only sets the bit: no reordering, so the hit path writes one boolean. To evict, a hand
// walks from the oldest entry toward the newest, clearing bits, and evicts the first entry
// whose bit is clear. Entries expired past any stale window are evicted on sight.
//
// An entry refers to its prepared answer, not a copy of it: an answer another plugin keeps (the
// kubernetes plugin's) is the same object in both. An answer that recorded what it was built
// from (dependency keys, e.g. a Service) is held in the configuration's answer store, which
// drops it from here when any of them changes, whatever its name (answerDropped).

import type { AnswerStore } from '../../server/answer-store.js';
import type { AnswerHolder, PreparedAnswer } from '../../server/prepared-reply.js';

export const enum EntryKind {
  Success = 0,
  Denial = 1,
}

/** The entry object, its fields and its place in the name tree, besides the answer's bytes. */
const ENTRY_OVERHEAD = 256;

export class CacheEntry {
  // Identity.
  readonly name: string;
  readonly qtype: number;
  readonly qclass: number;
  /** 1 = DO, 2 = CD. */
  readonly bits: number;
  readonly kind: EntryKind;
  /** The reply's records; shared with the plugin that built it when that plugin keeps it. */
  readonly answer: PreparedAnswer;
  /** The SOA serial the answer carried when stored (-1: none to write). */
  serial: number;
  /** What the entry holds in memory, roughly: what max_bytes counts. */
  readonly bytes: number;
  // Lifetime: `ttl` whole seconds from `storedMs` (monotonic clock), over at `expiresMs`.
  // A refresh in place (CacheStore.renew) sets them again.
  ttl: number;
  storedMs: number;
  expiresMs: number;
  /**
   * The answer was built for this entry alone (the cache prepared it from a reply): no other
   * answer shares its bytes or offsets, so a refresh may write the new records into it.
   */
  ownsAnswer = false;
  // Eviction and the name tree.
  visited = false;
  newer: CacheEntry | null = null;
  older: CacheEntry | null = null;
  node: NameNode | null = null;
  // Prefetch: hits with no gap longer than the prefetch duration. Set in the constructor, not by
  // initializers, as renew sets them again: see PreparedAnswer's fields.
  hits: number;
  lastHitMs: number;
  refreshing = false;

  constructor(
    name: string,
    qtype: number,
    qclass: number,
    bits: number,
    kind: EntryKind,
    answer: PreparedAnswer,
    ttl: number,
    storedMs: number,
    lifetimeMs: number,
    serial = -1,
  ) {
    this.name = name;
    this.qtype = qtype;
    this.qclass = qclass;
    this.bits = bits;
    this.kind = kind;
    this.answer = answer;
    this.serial = serial;
    // Counted whole even when shared: max_bytes bounds what this cache would hold alone.
    this.bytes = answer.body.length + (answer.ttlOffsets?.byteLength ?? 0) + name.length + ENTRY_OVERHEAD;
    this.ttl = ttl;
    this.storedMs = storedMs;
    this.expiresMs = storedMs + lifetimeMs;
    this.hits = 0;
    this.lastHitMs = Number.NEGATIVE_INFINITY;
  }
}

/** One name in the tree: its entries (all qtypes and flag variants) and the names below it. */
export class NameNode {
  readonly entries: CacheEntry[] = [];
  children: Set<NameNode> | null = null;
  constructor(
    readonly name: string,
    readonly parent: NameNode | null,
  ) {}
}

/** The parent of a lowercase FQDN ("a.b." -> "b.", "b." -> "."); null for the root. */
export function parentName(name: string): string | null {
  if (name === '.') return null;
  for (let i = 0; i < name.length; i++) {
    const c = name.charCodeAt(i);
    if (c === 0x5c) {
      i++; // an escaped character, "\." included
      continue;
    }
    if (c === 0x2e) return i === name.length - 1 ? '.' : name.slice(i + 1);
  }
  return '.';
}

/** A FIFO of entries with a SIEVE hand; `older`/`newer` links live on the entries. */
export class SieveQueue {
  newest: CacheEntry | null = null;
  oldest: CacheEntry | null = null;
  private hand: CacheEntry | null = null;
  private sweepAt: CacheEntry | null = null;
  /** Entries this sweep round may still visit in this queue (0: the round is over here). */
  sweepLeft = 0;
  size = 0;
  /** Sum of the entries' `bytes`. */
  bytes = 0;

  constructor(readonly capacity: number) {}

  push(e: CacheEntry): void {
    this.bytes += e.bytes;
    e.older = this.newest;
    e.newer = null;
    if (this.newest !== null) this.newest.newer = e;
    this.newest = e;
    if (this.oldest === null) this.oldest = e;
    this.size++;
  }

  unlink(e: CacheEntry): void {
    if (this.hand === e) this.hand = e.newer;
    if (this.sweepAt === e) this.sweepAt = e.newer;
    if (e.newer !== null) e.newer.older = e.older;
    else this.newest = e.older;
    if (e.older !== null) e.older.newer = e.newer;
    else this.oldest = e.newer;
    e.newer = null;
    e.older = null;
    this.size--;
    this.bytes -= e.bytes;
  }

  /** The entry to evict: the first dead one or the first unvisited one the hand meets. */
  victim(deadBefore: number): CacheEntry | null {
    let o = this.hand ?? this.oldest;
    if (o === null) return null;
    for (;;) {
      if (o.expiresMs <= deadBefore || !o.visited) break;
      o.visited = false;
      o = o.newer ?? this.oldest!;
    }
    this.hand = o;
    return o;
  }

  /** The next entry a sweep visits (null: the oldest); the queue's end finishes a round. */
  sweepNext(): CacheEntry | null {
    return this.sweepAt ?? this.oldest;
  }

  /** Where the sweep goes on from (null: the oldest, next round). */
  sweepFrom(e: CacheEntry | null): void {
    this.sweepAt = e;
  }
}

/** A removal's cost in a sweep's work units, against one for visiting a live entry (about what each takes). */
export const SWEEP_REMOVAL_COST = 8;

export interface StoreLimits {
  successCapacity: number;
  denialCapacity: number;
  /** Both queues' entries together hold at most this many bytes (CacheEntry.bytes). */
  maxBytes: number;
}

export class CacheStore implements AnswerHolder {
  private readonly names = new Map<string, NameNode>();
  private readonly root = new NameNode('.', null);
  readonly queues: readonly [SieveQueue, SieveQueue];
  readonly maxBytes: number;

  constructor(
    limits: StoreLimits,
    /** Where entries whose answer recorded dependency keys are held (the configuration's answer store). */
    public answers: AnswerStore,
  ) {
    this.names.set('.', this.root);
    this.queues = [new SieveQueue(limits.successCapacity), new SieveQueue(limits.denialCapacity)];
    this.maxBytes = limits.maxBytes;
  }

  size(kind: EntryKind): number {
    return this.queues[kind].size;
  }

  /** Bytes the entries hold, both queues together. */
  get bytes(): number {
    return this.queues[0].bytes + this.queues[1].bytes;
  }

  /**
   * True while `kind`'s queue holds under half its capacity and the store under half its bytes:
   * an eviction is then a long way off, and with it the hand that reads the second-chance marks.
   */
  hasRoom(kind: EntryKind): boolean {
    const q = this.queues[kind];
    return q.size * 2 < q.capacity && this.bytes * 2 < this.maxBytes;
  }

  /** The hit path: one Map lookup by the lowercase name, then the name's few entries. */
  find(name: string, qtype: number, qclass: number, bits: number): CacheEntry | null {
    const node = this.names.get(name);
    if (node === undefined) return null;
    const list = node.entries;
    for (let i = 0; i < list.length; i++) {
      const e = list[i]!;
      if (e.qtype === qtype && e.bits === bits && e.qclass === qclass) return e;
    }
    return null;
  }

  /**
   * Adds `e`, replacing an entry with the same key. When its queue is over capacity, or the
   * store over maxBytes, entries are evicted (those dead before `deadBefore` first), each
   * reported to `evicted`. Returns false, storing nothing, for an entry larger than maxBytes.
   */
  insert(e: CacheEntry, deadBefore: number, evicted: (kind: EntryKind) => void): boolean {
    if (e.bytes > this.maxBytes) return false;
    const old = this.find(e.name, e.qtype, e.qclass, e.bits);
    // A refresh takes the old entry's place in its name's node: the node (and its place in the
    // tree and the name map) stays, instead of being pruned and built again. Those would be
    // old-generation garbage every time an entry's TTL runs out. The newcomer is in the node
    // before any eviction, so evictions below it cannot prune the node.
    const node = old !== null ? old.node! : this.nodeFor(e.name);
    if (old !== null) this.detach(old, e);
    else node.entries.push(e);
    e.node = node;
    const q = this.queues[e.kind];
    // As in SIEVE, make room before inserting, so the newcomer is never the victim.
    if (q.size >= q.capacity) {
      const v = q.victim(deadBefore);
      if (v !== null) {
        this.remove(v);
        evicted(v.kind);
      }
    }
    // Bytes: take from the queue holding more of them, so big answers displace big answers.
    while (this.queues[0].bytes + this.queues[1].bytes + e.bytes > this.maxBytes) {
      const v = this.queues[this.queues[0].bytes >= this.queues[1].bytes ? 0 : 1].victim(deadBefore);
      if (v === null) break;
      this.remove(v);
      evicted(v.kind);
    }
    q.push(e);
    if (e.answer.dependencies.length > 0) this.answers.hold(e.answer, this);
    return true;
  }

  /**
   * A refresh in place: `e`, whose answer now holds the fetched records (PreparedAnswer.refill),
   * starts a new lifetime and goes to its queue's new end, as a newcomer would. Its size and
   * its queue are unchanged, so nothing is evicted. The entry, its name's node and its answer
   * stay the objects they were: a refresh then leaves nothing for V8's old generation.
   */
  renew(e: CacheEntry, ttl: number, storedMs: number, lifetimeMs: number, serial: number): void {
    const q = this.queues[e.kind];
    q.unlink(e);
    e.ttl = ttl;
    e.storedMs = storedMs;
    e.expiresMs = storedMs + lifetimeMs;
    e.serial = serial;
    e.visited = false;
    e.hits = 0;
    e.lastHitMs = Number.NEGATIVE_INFINITY;
    q.push(e);
  }

  remove(e: CacheEntry): void {
    const node = e.node;
    if (node === null) return;
    this.detach(e);
    this.prune(node);
  }

  /** Takes `e` out of its queue and its node (`replacement` takes its slot there), leaving the node in the tree. */
  private detach(e: CacheEntry, replacement: CacheEntry | null = null): void {
    const node = e.node!;
    this.queues[e.kind].unlink(e);
    const list = node.entries;
    const i = list.indexOf(e);
    if (i < 0) {
      if (replacement !== null) list.push(replacement);
    } else if (replacement !== null) list[i] = replacement;
    else {
      list[i] = list[list.length - 1]!;
      list.pop();
    }
    e.node = null;
    if (e.answer.dependencies.length > 0) this.answers.release(e.answer, this);
  }

  /** The answer store dropped `a` (what it was built from changed): every entry of its name that refers to it goes. */
  answerDropped(a: PreparedAnswer): void {
    const node = this.names.get(a.name);
    if (node === undefined) return;
    const list = node.entries;
    for (let i = list.length - 1; i >= 0; i--) {
      const e = list[i];
      if (e !== undefined && e.answer === a) this.remove(e);
    }
  }

  /** Drops every entry of these names (all qtypes and flag variants). */
  dropNames(names: readonly string[]): number {
    let n = 0;
    for (const name of names) {
      const node = this.names.get(name);
      if (node === undefined) continue;
      const list = node.entries;
      while (list.length > 0) {
        this.remove(list[list.length - 1]!);
        n++;
      }
    }
    return n;
  }

  /** Drops every entry at or below `suffix`: O(entries and names under it). */
  dropSuffix(suffix: string): number {
    const top = this.names.get(suffix);
    if (top === undefined) return 0;
    const doomed: CacheEntry[] = [];
    const stack: NameNode[] = [top];
    while (stack.length > 0) {
      const node = stack.pop()!;
      for (const e of node.entries) doomed.push(e);
      if (node.children !== null) for (const c of node.children) stack.push(c);
    }
    for (const e of doomed) this.remove(e);
    return doomed.length;
  }

  /** Removes up to `budget` entries per queue that are dead before `deadBefore`; returns how many. */
  sweep(deadBefore: number, budget: number): number {
    this.beginSweep(budget);
    return this.sweepStep(deadBefore, Infinity);
  }

  /** Starts a sweep round: each queue's next `budget` entries from where the last round stopped (or to its end). */
  beginSweep(budget: number): void {
    for (const q of this.queues) q.sweepLeft = budget;
  }

  /** True while the round begun last has entries left to visit. */
  get sweeping(): boolean {
    return (
      (this.queues[0].sweepLeft > 0 && this.queues[0].sweepNext() !== null) ||
      (this.queues[1].sweepLeft > 0 && this.queues[1].sweepNext() !== null)
    );
  }

  /**
   * Goes on with the round for at most `work` units (a visit is one, a removal SWEEP_REMOVAL_COST
   * more), so that one turn of the loop does a bounded slice of it; returns the entries removed.
   */
  sweepStep(deadBefore: number, work: number): number {
    let removed = 0;
    let used = 0;
    for (const q of this.queues) {
      let o = q.sweepNext();
      while (o !== null && q.sweepLeft > 0 && used < work) {
        const next = o.newer;
        q.sweepLeft--;
        used++;
        if (o.expiresMs <= deadBefore) {
          this.remove(o);
          removed++;
          used += SWEEP_REMOVAL_COST;
        }
        o = next;
      }
      q.sweepFrom(o);
      if (o === null) q.sweepLeft = 0;
    }
    return removed;
  }

  /** Names in the tree (entries' names and their ancestors), for tests of pruning. */
  get nameCount(): number {
    return this.names.size;
  }

  private nodeFor(name: string): NameNode {
    const found = this.names.get(name);
    if (found !== undefined) return found;
    const parent = this.nodeFor(parentName(name) ?? '.');
    const node = new NameNode(name, parent);
    if (parent.children === null) parent.children = new Set();
    parent.children.add(node);
    this.names.set(name, node);
    return node;
  }

  /** Removes nodes left with neither entries nor children, walking up. */
  private prune(node: NameNode): void {
    let n: NameNode | null = node;
    while (n !== null && n !== this.root && n.entries.length === 0 && (n.children === null || n.children.size === 0)) {
      const p: NameNode | null = n.parent;
      this.names.delete(n.name);
      if (p !== null && p.children !== null) {
        p.children.delete(n);
        if (p.children.size === 0) p.children = null;
      }
      n = p;
    }
  }
}
