// Turns the winning upstream answer for an expanded name into the answer for the name the
// client asked: the question and every record owned by the expanded name get the original
// name. A CNAME chain stays a chain (`foo. CNAME target.` then `target.`'s records); KubeVPN
// renames every answer record instead, which puts a CNAME and an A record on one owner.

import { QType } from '../../dns/constants.js';
import {
  decodeMessage,
  encodeMessage,
  type Message,
  type ResourceRecord,
  type SoaData,
  type TargetData,
} from '../../dns/message.js';
import { skipName } from '../../dns/name.js';
import type { PreparedReply } from '../../server/prepared-reply.js';

/** KubeVPN's caps: positive answers 30 min, negative ones 30 s. */
export const MAX_POSITIVE_TTL = 1800;
export const MAX_NEGATIVE_TTL = 30;

/** An answer ready to be copied behind any asker's header and question (the cache plugin's form, plus TTLs). */
export interface PreparedAnswer extends PreparedReply {
  /** RA and the rcode: the flags word's bits that come from the answer. */
  readonly flags: number;
  readonly rcode: number;
  readonly ttlOffsets: Uint16Array;
  /** Each record's TTL when stored, by the position of its offset in `ttlOffsets`. */
  readonly ttls: Uint32Array;
  /** Seconds it may be served from the cache; 0 = never stored. */
  readonly cacheSeconds: number;
}

function renamed(rr: ResourceRecord, from: string, to: string): ResourceRecord {
  let out = rr;
  if (rr.name.toLowerCase() === from) out = { ...out, name: to };
  if (rr.type === QType.CNAME && (rr.data as TargetData).target.toLowerCase() === from)
    out = { ...out, data: { target: to } };
  return out;
}

/** RFC 2308: the negative TTL is min(SOA TTL, SOA MINIMUM); -1 without an SOA. */
function negativeTtl(m: Message): number {
  let ttl = -1;
  for (const rr of m.authorities) {
    if (rr.type !== QType.SOA) continue;
    const t = Math.min(rr.ttl, (rr.data as SoaData).minimum);
    if (ttl < 0 || t < ttl) ttl = t;
  }
  return ttl;
}

/** How long to keep `m`: positive by the smallest answer TTL, negative by the SOA; 0 = not at all. */
function cacheSecondsOf(m: Message): number {
  if (m.tc) return 0;
  if (m.rcode === 0 && m.answers.length > 0) {
    let min = -1;
    for (const rr of m.answers) if (min < 0 || rr.ttl < min) min = rr.ttl;
    return Math.min(Math.max(min, 1), MAX_POSITIVE_TTL);
  }
  if (m.rcode === 0 || m.rcode === 3) {
    const neg = negativeTtl(m);
    // A denial without an SOA says nothing about how long it holds (RFC 2308 5): not kept.
    return neg < 0 ? 0 : Math.min(Math.max(neg, 1), MAX_NEGATIVE_TTL);
  }
  return 0;
}

/**
 * The upstream `reply` for `expanded`, rewritten for `original` (letter case as asked),
 * encoded once and walked for its TTL offsets. Throws DecodeError/EncodeError on garbage.
 */
export function prepareAnswer(
  reply: Buffer,
  expanded: string,
  original: string,
  qtype: number,
  qclass: number,
): PreparedAnswer {
  const up = decodeMessage(reply);
  const from = expanded.toLowerCase();
  const m: Message = {
    ...up,
    id: 0,
    qr: true,
    aa: false,
    tc: false,
    ad: false,
    rcode: up.rcode & 0xf,
    questions: [{ name: original, type: qtype, class: qclass }],
    answers: up.answers.map((rr) => renamed(rr, from, original)),
    authorities: up.authorities,
    additionals: up.additionals.map((rr) => renamed(rr, from, original)),
    edns: null,
  };
  const wire = encodeMessage(m);
  const questionEnd = skipName(wire, 12) + 4;
  const an = wire.readUInt16BE(6);
  const ns = wire.readUInt16BE(8);
  const ar = wire.readUInt16BE(10);
  const total = an + ns + ar;
  const ttlOffsets = new Uint16Array(total);
  const ttls = new Uint32Array(total);
  let pos = questionEnd;
  for (let i = 0; i < total; i++) {
    const nameEnd = skipName(wire, pos);
    ttlOffsets[i] = nameEnd + 4 - questionEnd;
    ttls[i] = wire.readUInt32BE(nameEnd + 4);
    pos = nameEnd + 10 + wire.readUInt16BE(nameEnd + 8);
  }
  const body = Buffer.allocUnsafeSlow(wire.length - questionEnd);
  wire.copy(body, 0, questionEnd);
  return {
    body,
    questionEnd,
    an,
    ns,
    ar,
    flags: (m.ra ? 0x0080 : 0) | m.rcode,
    rcode: m.rcode,
    ttlOffsets,
    serialAt: -1,
    zoneAt: null,
    zone: '',
    ttls,
    cacheSeconds: cacheSecondsOf(m),
  };
}
