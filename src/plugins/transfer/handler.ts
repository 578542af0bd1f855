// Zone transfers (AXFR, and IXFR answered as AXFR) of the zones `file` and `kubernetes` hold, to
// the clients listed in `to`, and NOTIFY to those clients when a zone changes.

import dgram from 'node:dgram';
import { randomInt } from 'node:crypto';
import { Opcode, QClass, QType, Rcode } from '../../dns/constants.js';
import { decodeMessage, emptyMessage, encodeMessage, type Message, type ResourceRecord } from '../../dns/message.js';
import { parseIP, unmappedIP } from '../../dns/ip.js';
import {
  isZoneTransfer,
  Response,
  type Handler,
  type HandlerResult,
  type Next,
  type Request,
} from '../../server/request.js';
import type { Logger } from '../../log.js';
import type { PluginInstance, ZoneTransferSource } from '../plugin.js';

/** Records per message of a transfer, then cut by size so that each stays well under 64 KB. */
const RECORDS_PER_MESSAGE = 500;
const MAX_MESSAGE = 60_000;
/** A zone that changes often (a busy cluster) is announced at most this often. */
const NOTIFY_DEBOUNCE_MS = 1000;

export interface TransferTarget {
  /** `*`: anyone may transfer (and nobody is notified). */
  any: boolean;
  host: string;
  port: number;
}

export interface TransferRule {
  zones: readonly string[];
  to: readonly TransferTarget[];
}

function sameAddress(a: string, b: string): boolean {
  const x = parseIP(unmappedIP(a));
  const y = parseIP(b);
  return x !== null && y !== null && x.equals(y);
}

/** Serial arithmetic (RFC 1982): true when `a` is the same as or newer than `b`. */
function serialAtLeast(a: number, b: number): boolean {
  return a === b || (a - b) >>> 0 < 0x80000000;
}

export class TransferHandler implements Handler {
  readonly name = 'transfer';
  private readonly stops: Array<() => void> = [];
  private readonly pending = new Map<string, NodeJS.Timeout>();

  constructor(
    private readonly rules: readonly TransferRule[],
    private readonly sources: () => readonly PluginInstance[],
    private readonly log: Logger,
  ) {}

  serveDNS(req: Request, next: Next): HandlerResult {
    if (!isZoneTransfer(req.qtype)) return next(req);
    const rule = this.rules.find((r) => r.zones.includes(req.name));
    if (rule === undefined) return next(req);
    const src = this.source(req.name);
    if (src === undefined) return next(req);
    if (!rule.to.some((t) => t.any || sameAddress(req.client.remoteAddress, t.host)))
      return Response.rcode(Rcode.REFUSED, this.name, 'transfer not allowed');
    const records = src.transferRecords(req.name);
    if (records === null || records.length === 0) return Response.rcode(Rcode.SERVFAIL, this.name, 'zone not loaded');
    const soa = records[0]!;
    const serial = (soa.data as { serial: number }).serial;
    if (req.qtype === QType.IXFR) {
      // RFC 1995 section 2 and 4: a client as new as we are, or asking over UDP, gets our SOA alone.
      const theirs = ixfrSerial(req);
      if (req.client.proto === 'udp' || (theirs !== null && serialAtLeast(theirs, serial)))
        return Response.message(this.header(req, [soa], true), this.name);
    } else if (req.client.proto === 'udp') {
      return Response.rcode(Rcode.REFUSED, this.name, 'AXFR over UDP');
    }
    const all = [...records, soa];
    const out: Buffer[] = [];
    for (let i = 0; i < all.length;) {
      let n = Math.min(RECORDS_PER_MESSAGE, all.length - i);
      let wire = encodeMessage(this.header(req, all.slice(i, i + n), i === 0));
      while (wire.length > MAX_MESSAGE && n > 1) {
        n = Math.ceil(n / 2);
        wire = encodeMessage(this.header(req, all.slice(i, i + n), i === 0));
      }
      out.push(wire);
      i += n;
    }
    this.log.info(
      `Outgoing transfer of ${all.length} records of zone "${req.name}" to ${req.client.remoteAddress} for ${serial} SOA serial`,
    );
    const r = Response.wire(out[0]!, this.name);
    r.more = out.slice(1);
    return r;
  }

  private header(req: Request, answers: ResourceRecord[], withQuestion: boolean): Message {
    const m = emptyMessage(req.id);
    m.qr = true;
    m.aa = true;
    m.opcode = req.opcode;
    if (withQuestion) m.questions.push({ name: req.qname, type: req.qtype, class: req.qclass });
    m.answers = answers;
    return m;
  }

  private source(zone: string): ZoneTransferSource | undefined {
    for (const i of this.sources()) if (i.transfer?.transferZones().includes(zone)) return i.transfer;
    return undefined;
  }

  start(): void {
    const zones = new Set(this.rules.flatMap((r) => r.zones));
    const seen = new Set<ZoneTransferSource>();
    for (const i of this.sources()) {
      const t = i.transfer;
      if (t === undefined || seen.has(t)) continue;
      seen.add(t);
      this.stops.push(t.onZoneChange((zone) => zones.has(zone) && this.scheduleNotify(zone)));
    }
  }

  stop(): void {
    for (const s of this.stops.splice(0)) s();
    for (const t of this.pending.values()) clearTimeout(t);
    this.pending.clear();
  }

  private scheduleNotify(zone: string): void {
    if (this.pending.has(zone)) return;
    const t = setTimeout(() => {
      this.pending.delete(zone);
      for (const rule of this.rules) {
        if (!rule.zones.includes(zone)) continue;
        for (const to of rule.to) if (!to.any) void this.notify(zone, to);
      }
    }, NOTIFY_DEBOUNCE_MS);
    t.unref();
    this.pending.set(zone, t);
  }

  /** RFC 1996 NOTIFY over UDP, tried 3 times a second apart until the secondary answers. */
  private async notify(zone: string, to: TransferTarget): Promise<void> {
    const m = emptyMessage(randomInt(65536));
    m.opcode = Opcode.NOTIFY;
    m.aa = true;
    m.questions.push({ name: zone, type: QType.SOA, class: QClass.IN });
    const msg = encodeMessage(m);
    const where = to.host.includes(':') ? `[${to.host}]:${to.port}` : `${to.host}:${to.port}`;
    for (let attempt = 0; attempt < 3; attempt++) {
      const ok = await new Promise<boolean>((resolve) => {
        const s = dgram.createSocket(to.host.includes(':') ? 'udp6' : 'udp4');
        const done = (v: boolean) => {
          clearTimeout(timer);
          s.close();
          resolve(v);
        };
        const timer = setTimeout(() => done(false), 1000);
        s.on('error', () => done(false));
        s.on('message', (b) => {
          if (b.length >= 12 && b.readUInt16BE(0) === m.id && (b[2]! & 0x80) !== 0) done(true);
        });
        s.send(msg, to.port, to.host);
      });
      if (ok) {
        this.log.info(`Sent notify for zone "${zone}" to "${where}"`);
        return;
      }
    }
    this.log.error(`Notify for zone "${zone}" was not answered by "${where}"`);
  }
}

/** The client's serial from an IXFR query's authority SOA, or null when it has none. */
function ixfrSerial(req: Request): number | null {
  try {
    const m = decodeMessage(req.raw);
    const soa = m.authorities.find((rr) => rr.type === QType.SOA);
    return soa === undefined ? null : (soa.data as { serial: number }).serial;
  } catch {
    return null;
  }
}
