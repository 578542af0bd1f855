// Rewritten answers kept by the name the client asked, so a repeated query is one Map read and
// one copy, as a kubernetes hit is: no rules, no rewritten query, no second plugin. Only what the
// wire path (wire.ts) made from an answer its plugin described (Response.prepared) with the keys
// it was built from is kept. Each entry holds that answer in the configuration's one answer store
// (AnswerStore), so the change that drops the inner plugin's answer drops this one with it, and
// is written by the one reply builder (writeReply). The handler reaches these only through
// keptReply and keepReply.

import { copyBytes } from '../../dns/bytes.js';
import type { AnswerStore } from '../../server/answer-store.js';
import type { InvalidationTarget, Invalidation } from '../../server/invalidation.js';
import {
  dependenciesOnly,
  FLAG_TC,
  writeReply,
  type AnswerHolder,
  type PreparedAnswer,
  type PreparedReply,
} from '../../server/prepared-reply.js';
import { Response, type Request } from '../../server/request.js';
import { FAST_MAX_MS } from '../../server/fast-answers.js';

const OPT_LEN = 11;
/** Answers kept before the store starts over (the asked names are the client's choice). */
const MAX_KEPT = 20_000;

/** What a reply was made for beyond its name, type and class: opcode, RD, AD, CD; EDNS and DO. */
function shapeOf(req: Request): number {
  return (req.flags & 0x7930) | (req.edns === null ? 0 : req.edns.do ? 0x30000 : 0x10000);
}

class Kept implements PreparedReply {
  /** Another answer for the same asked name (another type, class or shape). */
  next: Kept | null = null;
  dead = false;
  /** TTLs are sent as the inner plugin wrote them; no serial, no zone to respell. */
  readonly ttlOffsets = null;
  readonly serialAt = -1;
  readonly zoneAt = null;
  readonly zone = '';

  constructor(
    /** The asked name, lowercase. */
    readonly name: string,
    /** The name the inner plugin answered, lowercase. */
    readonly inner: string,
    readonly qtype: number,
    readonly qclass: number,
    readonly shape: number,
    readonly questionEnd: number,
    /** The reply's flags word (QR, opcode, AA, RD, RA, CD, rcode), as sent. */
    readonly flags: number,
    /** The records after the question, OPT excluded: owner names point at offset 12. */
    readonly body: Buffer,
    readonly an: number,
    readonly ns: number,
    readonly ar: number,
    readonly plugin: string,
    /** The inner plugin's description: the same records, so its offsets hold for any store of answers before rewrite. */
    readonly prepared: PreparedAnswer,
    /** What this entry holds in the answer store: the inner answer, or its keys alone when nobody else keeps it. */
    readonly held: PreparedAnswer,
  ) {}
}

function push(m: Map<string, Kept[]>, key: string, k: Kept): void {
  const list = m.get(key);
  if (list === undefined) m.set(key, [k]);
  else list.push(k);
}

/** The name and every name above it, root excluded ("a.b." → "a.b.", "b."). */
function suffixes(name: string, f: (s: string) => void): void {
  let i = 0;
  while (i < name.length - 1) {
    f(i === 0 ? name : name.slice(i));
    const dot = name.indexOf('.', i);
    if (dot < 0) break;
    i = dot + 1;
  }
}

export class KeptAnswers implements InvalidationTarget, AnswerHolder {
  private readonly byName = new Map<string, Kept>();
  /** By the answer each holds in the store (several entries may hold one). */
  private readonly byHeld = new Map<PreparedAnswer, Kept[]>();
  /** By every suffix of the asked and the inner name: lists of possibly dead entries. */
  private readonly bySuffix = new Map<string, Kept[]>();
  private store: AnswerStore | null = null;
  private count = 0;
  /** Entries put in the index lists since the last clear (dead ones stay in lists until their key goes). */
  private indexed = 0;
  private detach: (() => void) | null = null;

  get size(): number {
    return this.count;
  }

  /** Starts following `invalidation`; nothing is kept before (a configuration only validated). */
  open(invalidation: Invalidation): void {
    if (this.detach !== null) return;
    this.clear();
    this.store = invalidation.answers;
    this.detach = invalidation.attach(this);
  }

  close(): void {
    this.detach?.();
    this.detach = null;
    this.clear();
    this.store = null;
  }

  /** The kept answer to `req`, written for it (its ID, its spelling of the question); null if none fits. */
  reply(req: Request): Response | null {
    let k = this.byName.get(req.name);
    if (k === undefined) return null;
    const shape = shapeOf(req);
    while (k.qtype !== req.qtype || k.qclass !== req.qclass || k.shape !== shape) {
      if (k.next === null) return null;
      k = k.next;
    }
    const qEnd = req.questionEnd;
    const opt = req.edns === null ? 0 : OPT_LEN;
    // Too big for this client: the long way cuts it as the inner plugin would.
    if (qEnd !== k.questionEnd || qEnd + k.body.length + opt > req.maxSize) return null;
    const buf = writeReply(req, k, -1, k.flags);
    const res = Response.wire(buf, k.plugin);
    res.prepared = k.prepared;
    // The same until invalidation drops it (which flushes the native table).
    res.fastMs = FAST_MAX_MS;
    return res;
  }

  /**
   * Keeps `wire`, the answer sent to `req` (asked) for `inner` (the rewritten query), when the
   * plugin that built it described it and named what it was built from. Call only with an answer
   * that came back synchronously: no change can have come between its making and its keeping.
   */
  keep(req: Request, inner: Request, wire: Buffer, plugin: string, p: PreparedAnswer | null): void {
    const store = this.store;
    if (this.detach === null || store === null || p === null || p.ttlOffsets === null || p.dependencies.length === 0)
      return;
    // An SOA carries the serial that every change moves; such answers are not kept here.
    if (p.hasSoa) return;
    const qEnd = req.questionEnd;
    const opt = req.edns === null ? 0 : OPT_LEN;
    if (wire.length !== qEnd + p.body.length + opt || wire.length < 12) return;
    const flags = (wire[2]! << 8) | wire[3]!;
    if ((flags & FLAG_TC) !== 0) return;
    if (((wire[6]! << 8) | wire[7]!) !== p.an || ((wire[8]! << 8) | wire[9]!) !== p.ns) return;
    // The OPT, if any, is the plain echo (no options) that reply() writes again.
    if (((wire[10]! << 8) | wire[11]!) !== p.ar + (opt === 0 ? 0 : 1)) return;
    if (opt !== 0) {
      const o = qEnd + p.body.length;
      if (wire[o] !== 0 || wire[o + 1] !== 0 || wire[o + 2] !== 41 || wire[o + 9] !== 0 || wire[o + 10] !== 0) return;
    }
    const shape = shapeOf(req);
    let head = this.byName.get(req.name);
    for (let k: Kept | null = head ?? null; k !== null; k = k.next)
      if (k.qtype === req.qtype && k.qclass === req.qclass && k.shape === shape) return;
    if (this.count >= MAX_KEPT || this.indexed >= 4 * MAX_KEPT) {
      this.clear();
      head = undefined;
    }
    const records = Buffer.allocUnsafeSlow(p.body.length);
    copyBytes(wire, qEnd, qEnd + p.body.length, records, 0);
    const k = new Kept(
      req.name,
      inner.name,
      req.qtype,
      req.qclass,
      shape,
      qEnd,
      flags,
      records,
      p.an,
      p.ns,
      p.ar,
      plugin,
      p,
      // An answer nobody keeps may be a slice of Node's shared pool: hold its keys, not its bytes.
      p.holders !== null ? p : dependenciesOnly(p.dependencies),
    );
    k.next = head ?? null;
    this.byName.set(req.name, k);
    this.count++;
    store.hold(k.held, this);
    const same = this.byHeld.get(k.held);
    if (same === undefined) this.byHeld.set(k.held, [k]);
    else same.push(k);
    const index = (s: string) => push(this.bySuffix, s, k);
    suffixes(k.name, index);
    if (k.inner !== k.name) suffixes(k.inner, index);
    this.indexed++;
  }

  dropNames(names: readonly string[]): number {
    let n = 0;
    for (const name of names) {
      const list = this.bySuffix.get(name);
      if (list === undefined) continue;
      for (const k of list) if (k.name === name || k.inner === name) n += this.drop(k);
    }
    return n;
  }

  dropSuffix(suffix: string): number {
    const list = this.bySuffix.get(suffix);
    if (list === undefined) return 0;
    this.bySuffix.delete(suffix);
    let n = 0;
    for (const k of list) n += this.drop(k);
    return n;
  }

  /** The store dropped `a` (something it was built from changed): every entry holding it goes. */
  answerDropped(a: PreparedAnswer): void {
    const list = this.byHeld.get(a);
    if (list === undefined) return;
    this.byHeld.delete(a);
    for (const k of list) this.drop(k, false);
  }

  private drop(k: Kept, release = true): number {
    if (k.dead) return 0;
    k.dead = true;
    this.count--;
    if (release) {
      const list = this.byHeld.get(k.held);
      if (list !== undefined) {
        const i = list.indexOf(k);
        if (i >= 0) list.splice(i, 1);
        if (list.length === 0) this.byHeld.delete(k.held);
      }
      this.store?.release(k.held, this);
    }
    const head = this.byName.get(k.name);
    if (head === k) {
      if (k.next === null) this.byName.delete(k.name);
      else this.byName.set(k.name, k.next);
      return 1;
    }
    for (let p = head; p !== undefined && p.next !== null; p = p.next) {
      if (p.next === k) {
        p.next = k.next;
        break;
      }
    }
    return 1;
  }

  private clear(): void {
    const store = this.store;
    if (store !== null)
      for (const [a, list] of this.byHeld) for (let i = 0; i < list.length; i++) store.release(a, this);
    this.byHeld.clear();
    this.byName.clear();
    this.bySuffix.clear();
    this.count = 0;
    this.indexed = 0;
  }
}
