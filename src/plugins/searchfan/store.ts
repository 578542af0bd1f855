// The answer cache: full responses keyed by (lowercased name, qtype, qclass), each kept for
// its own time (rewrite.ts decides), bounded in size. A hit copies the asker's header and
// question, then the stored records with every TTL lowered by the seconds spent here (never
// below 1, as KubeVPN serves them), then an OPT echoing the asker's.

import type { Request } from '../../server/request.js';
import { replyFlags, writeReply, type PreparedReply } from '../../server/prepared-reply.js';
import type { PreparedAnswer } from './rewrite.js';

/** KubeVPN's capacity. */
export const DEFAULT_CAPACITY = 10_000;

/**
 * An answer with its age. The records with lowered TTLs are written once per second of age
 * (not once per hit), so a hit is the cache plugin's copy of ready bytes.
 */
export class StoredAnswer {
  private age = -1;
  private aged: PreparedReply;

  constructor(
    readonly answer: PreparedAnswer,
    /** The coarse clock's milliseconds when stored, and when it stops being served. */
    readonly storedAt: number,
    readonly expiresAt: number,
  ) {
    this.aged = answer;
  }

  /** The records as they are served `now`: each TTL lowered by the whole seconds since stored, never below 1. */
  at(now: number): PreparedReply {
    const age = Math.floor((now - this.storedAt) / 1000);
    if (age === this.age) return this.aged;
    const a = this.answer;
    const body = Buffer.allocUnsafeSlow(a.body.length);
    a.body.copy(body);
    const offs = a.ttlOffsets;
    const ttls = a.ttls;
    for (let i = 0; i < offs.length; i++) {
      const ttl = ttls[i]! - age;
      body.writeUInt32BE(ttl < 1 ? 1 : ttl, offs[i]);
    }
    this.aged = {
      body,
      an: a.an,
      ns: a.ns,
      ar: a.ar,
      flags: a.flags,
      ttlOffsets: a.ttlOffsets,
      questionEnd: a.questionEnd,
      serialAt: -1,
      zoneAt: null,
      zone: '',
    };
    this.age = age;
    return this.aged;
  }
}

/** Reply bytes for `req` from `s` as it is served `now` (the cache plugin's hit path writes them). */
export function writeAnswer(req: Request, s: StoredAnswer, now: number): Buffer {
  const p = s.at(now);
  return writeReply(req, p, -1, replyFlags(req, p, 0));
}

/** Entries by qtype/qclass, then by lowercased name: a hit builds no key string. */
export class AnswerStore {
  private readonly byType = new Map<number, Map<string, StoredAnswer>>();
  private count = 0;

  constructor(private readonly capacity: number = DEFAULT_CAPACITY) {}

  get size(): number {
    return this.count;
  }

  /** The live entry for this question, or undefined (an expired one is dropped). */
  get(name: string, qtype: number, qclass: number, now: number): StoredAnswer | undefined {
    const byName = this.byType.get((qtype << 16) | qclass);
    if (byName === undefined) return undefined;
    const e = byName.get(name);
    if (e === undefined) return undefined;
    if (now >= e.expiresAt) {
      byName.delete(name);
      this.count--;
      return undefined;
    }
    return e;
  }

  set(name: string, qtype: number, qclass: number, e: StoredAnswer): void {
    const key = (qtype << 16) | qclass;
    let byName = this.byType.get(key);
    if (byName === undefined) this.byType.set(key, (byName = new Map<string, StoredAnswer>()));
    if (byName.delete(name)) this.count--;
    if (this.count >= this.capacity) this.evict(byName, e.storedAt);
    byName.set(name, e);
    this.count++;
  }

  /** Makes room for one: expired entries of this type first, else its oldest (then any other type's). */
  private evict(preferred: Map<string, StoredAnswer>, now: number): void {
    for (const [n, e] of preferred) {
      if (now < e.expiresAt) break;
      preferred.delete(n);
      this.count--;
    }
    if (this.count < this.capacity) return;
    const maps = [preferred, ...this.byType.values()];
    for (const m of maps) {
      const oldest = m.keys().next();
      if (oldest.done !== true) {
        m.delete(oldest.value);
        this.count--;
        return;
      }
    }
  }

  clear(): void {
    this.byType.clear();
    this.count = 0;
  }
}
