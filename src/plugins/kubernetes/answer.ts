// Answers as prepared wire records: the bytes that follow the question in a reply, built
// once per (name, qtype) and kept in the server's answer store (server/answer-store.ts), from
// which every reply is written by server/prepared-reply.ts's writeReply. Owner names point at the
// question (so they keep the letter case of the query); names in the zone point at the zone
// inside the question (so `ns.dns.<zone>`, `hostmaster.<zone>` and NS targets follow the query's
// spelling too). SRV targets are written out in full (RFC 2782: no compression), so their zone
// is patched with the query's spelling at reply time, at the offsets recorded in `zoneAt`.

import { QClass, QType } from '../../dns/constants.js';
import { parseIPv4, parseIPv6 } from '../../dns/ip.js';
import { WireWriter } from '../../dns/message.js';
import { FLAG_AA, PreparedAnswer, wireLength, zoneOffset } from '../../server/prepared-reply.js';

/** The dependency key of the zone-wide answers (apex SOA and NS, ns.dns, dns-version), which every change moves. */
export const GLOBAL_SCOPE = 'g';

export const SOA_RECORD_LENGTH = 54;
const SOA_SERIAL_AT = 34;
const NS_LABELS = Buffer.from([2, 0x6e, 0x73, 3, 0x64, 0x6e, 0x73]); // "ns" "dns"
const HOSTMASTER = Buffer.from('\x0ahostmaster', 'latin1');

/**
 * `<zone> SOA ns.dns.<zone> hostmaster.<zone> serial 7200 1800 86400 <ttl>` at `at`, every
 * name a pointer to the zone in the question. TTL min(ttl, 300), as CoreDNS.
 */
export function writeSoa(
  buf: Buffer,
  at: number,
  ownerOffset: number,
  zoneOff: number,
  ttl: number,
  serial: number,
): void {
  const zonePtr = 0xc000 | zoneOff;
  buf.writeUInt16BE(0xc000 | ownerOffset, at);
  buf.writeUInt16BE(QType.SOA, at + 2);
  buf.writeUInt16BE(QClass.IN, at + 4);
  buf.writeUInt32BE(Math.min(ttl, 300), at + 6);
  buf.writeUInt16BE(SOA_RECORD_LENGTH - 12, at + 10);
  NS_LABELS.copy(buf, at + 12);
  buf.writeUInt16BE(zonePtr, at + 19);
  HOSTMASTER.copy(buf, at + 21);
  buf.writeUInt16BE(zonePtr, at + 32);
  buf.writeUInt32BE(serial >>> 0, at + SOA_SERIAL_AT);
  buf.writeUInt32BE(7200, at + 38);
  buf.writeUInt32BE(1800, at + 42);
  buf.writeUInt32BE(86400, at + 46);
  buf.writeUInt32BE(ttl, at + 50);
}

/** The authority section of a negative answer, built per query (NXDOMAIN is never cached). */
export function soaAuthority(questionEnd: number, zone: string, ttl: number, serial: number): Buffer {
  const b = Buffer.allocUnsafe(SOA_RECORD_LENGTH);
  const zoneOff = zoneOffset(questionEnd, zone);
  writeSoa(b, 0, zoneOff, zoneOff, ttl, serial);
  return b;
}

/** The latest AnswerWriter, held for its hidden class (server/request.ts `latest` says why). */
const latestAnswer: { writer: AnswerWriter | null } = { writer: null };

/** Builds the records of one answer, with message offsets as they will be in the reply. */
export class AnswerWriter {
  private writer: WireWriter | null = null;
  private readonly base: number;
  private readonly zoneOff: number;
  private zoneAt: number[] | null = null;
  private serialAt = -1;
  /** Where each record's TTL field sits, from `base`. */
  private readonly ttlAt: number[] = [];
  private minTtl = -1;
  private hasSoa = false;
  /** A CNAME in the answer: its chain ends at a target this answer holds nothing for. */
  private hasCname = false;
  an = 0;
  ns = 0;
  ar = 0;

  constructor(
    questionEnd: number,
    private readonly zone: string,
    private readonly ttl: number,
  ) {
    this.base = questionEnd;
    this.zoneOff = zoneOffset(questionEnd, zone);
    latestAnswer.writer = this; // its hidden class through a quiet spell: server/request.ts `latest`
  }

  /** Made on first use: a query that ends in NXDOMAIN never writes here. */
  private get w(): WireWriter {
    if (this.writer !== null) return this.writer;
    const w = new WireWriter(Math.max(512, this.base * 2));
    w.ensure(this.base);
    w.pos = this.base;
    // Only the zone is offered for compression, not the whole question: an additional
    // record owned by an SRV target must point at the target, as CoreDNS writes it.
    w.remember(this.zone, this.zoneOff);
    this.writer = w;
    return w;
  }

  private header(type: number, ttl: number): number {
    const w = this.w;
    w.u16(type);
    w.u16(QClass.IN);
    this.noteTtl(w.pos, ttl);
    w.u32(ttl);
    const lenAt = w.pos;
    w.u16(0);
    return lenAt;
  }

  private noteTtl(at: number, ttl: number): void {
    this.ttlAt.push(at - this.base);
    if (this.minTtl < 0 || ttl < this.minTtl) this.minTtl = ttl;
  }

  private endRdata(lenAt: number): void {
    this.w.buf.writeUInt16BE(this.w.pos - lenAt - 2, lenAt);
  }

  /** A or AAAA (by the address's family) owned by the name at message offset `owner` (12: the question). */
  address(owner: number, ip: string, ttl = this.ttl): void {
    const v6 = ip.includes(':');
    const b = v6 ? parseIPv6(ip) : parseIPv4(ip);
    if (b === null) return;
    this.ownerName(owner);
    const lenAt = this.header(v6 ? QType.AAAA : QType.A, ttl);
    this.w.bytes(b);
    this.endRdata(lenAt);
  }

  /**
   * The name at message offset `owner`, as a pointer. A pointer has 14 bits: past 16 KiB (the
   * targets of a big headless Service's SRV answer) the labels are copied instead, up to the
   * zone, which is a pointer into the question (so it keeps the query's spelling).
   */
  private ownerName(owner: number): void {
    const w = this.w;
    if (owner <= 0x3fff) {
      w.u16(0xc000 | owner);
      return;
    }
    let p = owner;
    while (w.buf[p] !== 0 && (w.buf[p]! & 0xc0) !== 0xc0) p += 1 + w.buf[p]!;
    if (w.buf[p] !== 0)
      w.bytes(Buffer.from(w.buf.subarray(owner, p + 2))); // ends in a pointer already
    else if (this.zone === '.') w.bytes(Buffer.from(w.buf.subarray(owner, p + 1)));
    else {
      w.bytes(Buffer.from(w.buf.subarray(owner, p + 1 - wireLength(this.zone))));
      w.u16(0xc000 | this.zoneOff);
    }
  }

  /**
   * SRV 0 weight port <target>.<zone>, owned by the question. The target is written in full;
   * returns its message offset (for additional records owned by it).
   */
  srv(weight: number, port: number, target: string): number {
    const w = this.w;
    w.u16(0xc00c);
    const lenAt = this.header(QType.SRV, this.ttl);
    w.u16(0);
    w.u16(weight);
    w.u16(port);
    const at = w.pos;
    for (const label of target.split('.')) {
      w.u8(label.length);
      w.bytes(Buffer.from(label, 'latin1'));
    }
    if (this.zone !== '.') {
      (this.zoneAt ??= []).push(w.pos - this.base);
      for (const label of this.zone.slice(0, -1).split('.')) {
        w.u8(label.length);
        w.bytes(Buffer.from(label, 'latin1'));
      }
    }
    w.u8(0);
    this.endRdata(lenAt);
    return at;
  }

  /**
   * A record whose data is one name (PTR, CNAME, NS), owned by the question; returns the
   * name's offset. Uncompressed, a name keeps its own spelling even when it lies in the zone.
   */
  nameRecord(type: number, target: string, compress: boolean): number {
    if (type === QType.CNAME) this.hasCname = true;
    this.w.u16(0xc00c);
    const lenAt = this.header(type, this.ttl);
    const at = this.w.pos;
    this.w.name(target, compress);
    this.endRdata(lenAt);
    return at;
  }

  txt(text: string, ttl: number): void {
    this.w.u16(0xc00c);
    const lenAt = this.header(QType.TXT, ttl);
    const b = Buffer.from(text, 'latin1');
    this.w.u8(b.length);
    this.w.bytes(b);
    this.endRdata(lenAt);
  }

  /** The zone's SOA, owned by the question (an apex SOA answer) or by the zone (authority section). */
  soa(owner: 'question' | 'zone'): void {
    const w = this.w;
    w.ensure(SOA_RECORD_LENGTH);
    writeSoa(w.buf, w.pos, owner === 'question' ? 12 : this.zoneOff, this.zoneOff, this.ttl, 0);
    this.noteTtl(w.pos + 6, Math.min(this.ttl, 300));
    if (owner === 'zone') this.hasSoa = true;
    this.serialAt = w.pos - this.base + SOA_SERIAL_AT;
    w.pos += SOA_RECORD_LENGTH;
  }

  /** The answer to (`name`, `qtype`); every record in its answer section is of the asked type (the handler writes no other) or a CNAME. */
  finish(name: string, qtype: number, rcode: number, dependencies: readonly string[]): PreparedAnswer {
    // A slice of Node's shared pool, for one reply; an answer that is kept is copied out
    // of it (answer-store.ts), so that it does not pin a pool slab of short-lived buffers.
    const bytes = Buffer.from(this.w.buf.subarray(this.base, this.w.pos));
    const p = new PreparedAnswer(
      name,
      qtype,
      bytes,
      this.an,
      this.ns,
      this.ar,
      FLAG_AA | rcode,
      // Past 64 KiB an offset does not fit: not described, and a cache walks it (and refuses it).
      bytes.length <= 0xffff ? Uint16Array.from(this.ttlAt) : null,
      this.base,
    );
    p.serialAt = this.serialAt;
    p.zoneAt = this.zoneAt;
    p.zone = this.zone;
    p.dependencies = dependencies;
    p.minTtl = this.minTtl;
    p.hasSoa = this.hasSoa;
    // The SOA's MINIMUM is the plugin's TTL (writeSoa).
    p.negativeTtl = this.hasSoa ? Math.min(this.minTtl, this.ttl) : -1;
    p.answerHasQtype = this.an > 0 && !this.hasCname;
    return p;
  }
}
