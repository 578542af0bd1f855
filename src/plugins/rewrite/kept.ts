// Rewritten answers kept by the name the client asked, so a repeated query is one Map read and
// one copy, as a kubernetes hit is: no rules, no rewritten query, no second plugin. Only what the
// wire path (wire.ts) made from an answer its plugin described (Response.prepared) with the keys
// it was built from is kept, and each entry carries those keys: the Invalidation that drops the
// inner plugin's answer drops this one too. The handler reaches this store only through
// keptReply and keepReply, so that it can be swapped for a shared store of prepared answers.

import { copyBytes } from '../../dns/bytes.js';
import type { InvalidationTarget, PreparedAnswer, Invalidation } from '../../server/invalidation.js';
import { writeOptEcho } from '../../server/reply.js';
import { Response, type Request } from '../../server/request.js';

const OPT_LEN = 11;
const FLAG_TC = 0x0200;
/** Answers kept before the store starts over (the asked names are the client's choice). */
const MAX_KEPT = 20_000;

/** What a reply was made for beyond its name, type and class: opcode, RD, AD, CD; EDNS and DO. */
function shapeOf(req: Request): number {
  return (req.flags & 0x7930) | (req.edns === null ? 0 : req.edns.do ? 0x30000 : 0x10000);
}

class Kept {
  /** Another answer for the same asked name (another type, class or shape). */
  next: Kept | null = null;
  dead = false;

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
    readonly records: Buffer,
    readonly an: number,
    readonly ns: number,
    readonly ar: number,
    readonly plugin: string,
    /** The inner plugin's description: the same records, so its offsets hold for any store of answers before rewrite. */
    readonly prepared: PreparedAnswer,
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

export class KeptAnswers implements InvalidationTarget {
  private readonly byName = new Map<string, Kept>();
  /** By each dependency key, and by every suffix of the asked and the inner name: lists of possibly dead entries. */
  private readonly byKey = new Map<string, Kept[]>();
  private readonly bySuffix = new Map<string, Kept[]>();
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
    this.detach = invalidation.attach(this);
  }

  close(): void {
    this.detach?.();
    this.detach = null;
    this.clear();
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
    const n = k.records.length;
    // Too big for this client: the long way cuts it as the inner plugin would.
    if (qEnd !== k.questionEnd || qEnd + n + opt > req.maxSize) return null;
    const buf = Buffer.allocUnsafe(qEnd + n + opt);
    copyBytes(req.raw, 0, qEnd, buf, 0);
    const flags = k.flags;
    buf[2] = flags >> 8;
    buf[3] = flags & 0xff;
    buf[4] = 0;
    buf[5] = 1;
    buf[6] = k.an >> 8;
    buf[7] = k.an & 0xff;
    buf[8] = k.ns >> 8;
    buf[9] = k.ns & 0xff;
    const ar = k.ar + (opt === 0 ? 0 : 1);
    buf[10] = ar >> 8;
    buf[11] = ar & 0xff;
    copyBytes(k.records, 0, n, buf, qEnd);
    if (opt !== 0) writeOptEcho(buf, qEnd + n, req, flags & 0xf);
    const res = Response.wire(buf, k.plugin);
    res.prepared = k.prepared;
    return res;
  }

  /**
   * Keeps `wire`, the answer sent to `req` (asked) for `inner` (the rewritten query), when the
   * plugin that built it described it and named what it was built from. Call only with an answer
   * that came back synchronously: no change can have come between its making and its keeping.
   */
  keep(req: Request, inner: Request, wire: Buffer, plugin: string, p: PreparedAnswer | null): void {
    if (this.detach === null || p === null || p.ttlOffsets === null || p.dependencies.length === 0) return;
    // An SOA carries the serial that every change moves; such answers are not kept here.
    if (p.hasSoa) return;
    const qEnd = req.questionEnd;
    const opt = req.edns === null ? 0 : OPT_LEN;
    if (wire.length !== qEnd + p.recordsLength + opt || wire.length < 12) return;
    const flags = (wire[2]! << 8) | wire[3]!;
    if ((flags & FLAG_TC) !== 0) return;
    if (((wire[6]! << 8) | wire[7]!) !== p.an || ((wire[8]! << 8) | wire[9]!) !== p.ns) return;
    // The OPT, if any, is the plain echo (no options) that reply() writes again.
    if (((wire[10]! << 8) | wire[11]!) !== p.ar + (opt === 0 ? 0 : 1)) return;
    if (opt !== 0) {
      const o = qEnd + p.recordsLength;
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
    const records = Buffer.allocUnsafeSlow(p.recordsLength);
    copyBytes(wire, qEnd, qEnd + p.recordsLength, records, 0);
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
    );
    k.next = head ?? null;
    this.byName.set(req.name, k);
    this.count++;
    for (const key of p.dependencies) push(this.byKey, key, k);
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

  dropDependencies(keys: readonly string[]): number {
    let n = 0;
    for (const key of keys) {
      const list = this.byKey.get(key);
      if (list === undefined) continue;
      this.byKey.delete(key);
      for (const k of list) n += this.drop(k);
    }
    return n;
  }

  private drop(k: Kept): number {
    if (k.dead) return 0;
    k.dead = true;
    this.count--;
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
    this.byName.clear();
    this.byKey.clear();
    this.bySuffix.clear();
    this.count = 0;
    this.indexed = 0;
  }
}
