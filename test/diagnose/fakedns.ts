// A scripted DNS server for diagnose tests, on real UDP and TCP sockets: each rule says how
// to answer names matching it (an address, NXDOMAIN, NODATA, SERVFAIL, REFUSED, a truncated
// UDP reply, or silence), and every query received is logged in order.

import dgram from 'node:dgram';
import net from 'node:net';
import { QClass, QType, Rcode, typeFromString, typeToString } from '../../src/dns/constants.js';
import { decodeMessage, emptyMessage, encodeMessage, type Message } from '../../src/dns/message.js';
import { freePort } from '../helpers/ports.js';

export type Reply =
  'NXDOMAIN' | 'NODATA' | 'SERVFAIL' | 'REFUSED' | 'drop' | 'truncate' | { A?: string; AAAA?: string; CNAME?: string };

export interface Rule {
  /** Regular expression source, matched against the lowercased FQDN (with trailing dot). */
  match: string;
  /** Only this type (A, AAAA...); default every type. */
  type?: string;
  reply: Reply;
  /** Only over this transport; the other falls through to later rules. */
  transport?: 'udp' | 'tcp';
}

export interface LoggedQuery {
  name: string;
  type: string;
  transport: 'udp' | 'tcp';
}

export interface FakeDns {
  port: number;
  host: string;
  log: LoggedQuery[];
  close(): Promise<void>;
}

/** The reply to `q` per the rules; null = stay silent. The default is NXDOMAIN. */
export function answer(q: Message, rules: readonly Rule[], transport: 'udp' | 'tcp'): Buffer | null {
  const question = q.questions[0];
  if (!question) return null;
  const name = question.name.toLowerCase();
  const rule = rules.find(
    (r) =>
      new RegExp(r.match).test(name) &&
      (r.type === undefined || typeFromString(r.type) === question.type) &&
      (r.transport === undefined || r.transport === transport),
  );
  const reply: Reply = rule?.reply ?? 'NXDOMAIN';
  if (reply === 'drop') return null;
  const m = emptyMessage(q.id);
  m.qr = true;
  m.rd = q.rd;
  m.ra = true;
  m.aa = true;
  m.questions.push({ ...question });
  if (reply === 'truncate') {
    // Over UDP an empty reply with TC; over TCP the full answer of the next matching rule.
    if (transport === 'udp') {
      m.tc = true;
      return encodeMessage(m);
    }
    return answer(
      q,
      rules.filter((r) => r !== rule),
      transport,
    );
  }
  if (typeof reply === 'string') {
    if (reply === 'NXDOMAIN') m.rcode = Rcode.NXDOMAIN;
    else if (reply === 'SERVFAIL') m.rcode = Rcode.SERVFAIL;
    else if (reply === 'REFUSED') m.rcode = Rcode.REFUSED;
    if (reply === 'NXDOMAIN' || reply === 'NODATA') {
      m.authorities.push({
        name: '.',
        type: QType.SOA,
        class: QClass.IN,
        ttl: 30,
        data: {
          mname: 'ns.test.',
          rname: 'hostmaster.test.',
          serial: 1,
          refresh: 7200,
          retry: 1800,
          expire: 86400,
          minimum: 30,
        },
      });
    }
    return encodeMessage(m);
  }
  // A CNAME alone, as a server answers when it cannot resolve the target.
  if (reply.CNAME)
    m.answers.push({
      name: question.name,
      type: QType.CNAME,
      class: QClass.IN,
      ttl: 30,
      data: { target: reply.CNAME },
    });
  const address = question.type === QType.A ? reply.A : question.type === QType.AAAA ? reply.AAAA : undefined;
  if (address)
    m.answers.push({ name: question.name, type: question.type, class: QClass.IN, ttl: 30, data: { address } });
  return encodeMessage(m);
}

export interface FakeDnsOptions {
  host?: string;
  /** 0 (default): a free port. */
  port?: number;
  /** Called for each query as it arrives, before it is answered. */
  onQuery?(q: LoggedQuery): void;
}

export async function startFakeDns(rules: readonly Rule[], opts: FakeDnsOptions = {}): Promise<FakeDns> {
  const host = opts.host ?? '127.0.0.1';
  let port = opts.port ?? 0;
  const log: LoggedQuery[] = [];
  if (port === 0) port = await freePort(host);
  const udp = dgram.createSocket(host.includes(':') ? 'udp6' : 'udp4');
  await new Promise<void>((resolve, reject) => {
    udp.once('error', reject);
    udp.bind(port, host, () => resolve());
  });
  const bound = udp.address().port;
  const note = (m: Message, transport: 'udp' | 'tcp') => {
    const q = m.questions[0];
    if (!q) return;
    const entry: LoggedQuery = { name: q.name.toLowerCase(), type: typeToString(q.type), transport };
    log.push(entry);
    opts.onQuery?.(entry);
  };
  udp.on('message', (buf, rinfo) => {
    let m: Message;
    try {
      m = decodeMessage(buf);
    } catch {
      return;
    }
    note(m, 'udp');
    const out = answer(m, rules, 'udp');
    if (out) udp.send(out, rinfo.port, rinfo.address);
  });
  const sockets = new Set<net.Socket>();
  const tcp = net.createServer((sock) => {
    sockets.add(sock);
    sock.on('close', () => sockets.delete(sock));
    sock.on('error', () => sock.destroy());
    let pending: Buffer = Buffer.alloc(0);
    sock.on('data', (d: Buffer) => {
      pending = Buffer.concat([pending, d]);
      while (pending.length >= 2 && pending.length >= 2 + pending.readUInt16BE(0)) {
        const len = pending.readUInt16BE(0);
        const msg = pending.subarray(2, 2 + len);
        pending = pending.subarray(2 + len);
        let m: Message;
        try {
          m = decodeMessage(msg);
        } catch {
          continue;
        }
        note(m, 'tcp');
        const out = answer(m, rules, 'tcp');
        if (out) {
          const frame = Buffer.allocUnsafe(out.length + 2);
          frame.writeUInt16BE(out.length, 0);
          out.copy(frame, 2);
          sock.write(frame);
        }
      }
    });
  });
  await new Promise<void>((resolve, reject) => {
    tcp.once('error', reject);
    tcp.listen(bound, host, () => resolve());
  });
  return {
    port: bound,
    host,
    log,
    close: async () => {
      for (const s of sockets) s.destroy();
      await Promise.all([
        new Promise<void>((r) => udp.close(() => r())),
        new Promise<void>((r) => tcp.close(() => r())),
      ]);
    },
  };
}
