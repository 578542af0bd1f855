// Upstream DNS servers for forward tests, on 127.0.0.1 over real UDP, TCP and TLS sockets.
// Each one runs a behaviour the test chooses: answer, stay silent, answer slowly, truncate,
// answer with the wrong ID or question, send garbage, close TCP mid-answer, spoof.

import dgram from 'node:dgram';
import net from 'node:net';
import tls from 'node:tls';
import { decodeMessage, encodeMessage, type Message } from '../../src/dns/message.js';
import { QClass, QType } from '../../src/dns/constants.js';
import { freePort } from '../helpers/ports.js';

export type Proto = 'udp' | 'tcp' | 'tls';

/** One query as the upstream received it. */
export interface Received {
  proto: Proto;
  raw: Buffer;
  msg: Message;
  /** Source address and port of the query. */
  address: string;
  port: number;
  at: number;
  /** The TCP/TLS connection it came on (undefined for UDP). */
  conn?: net.Socket;
}

export interface Replier {
  /** Sends `bytes` back the way the query came (framed on TCP). */
  send(bytes: Buffer): void;
  /** UDP only: sends from another socket (a different source port) to the querier. */
  spoof(bytes: Buffer): void;
  /** TCP only: writes raw bytes (no framing) and/or closes the connection. */
  raw(bytes: Buffer, close: boolean): void;
}

export type Behaviour = (q: Received, r: Replier) => void;

export interface AnswerOptions {
  rcode?: number;
  a?: string[];
  txt?: string[];
  tc?: boolean;
  aa?: boolean;
  ttl?: number;
  id?: number;
  qname?: string;
}

/** A reply to `q` built with the project's codec: same ID and question, RA set. */
export function answer(q: Received | Buffer, o: AnswerOptions = {}): Buffer {
  const m = decodeMessage(Buffer.isBuffer(q) ? q : q.raw);
  m.qr = true;
  m.ra = true;
  m.aa = o.aa ?? false;
  m.tc = o.tc ?? false;
  m.rcode = o.rcode ?? 0;
  if (o.id !== undefined) m.id = o.id;
  const qname = o.qname ?? m.questions[0]!.name;
  m.questions = [{ name: qname, type: m.questions[0]!.type, class: QClass.IN }];
  for (const ip of o.a ?? [])
    m.answers.push({ name: qname, type: QType.A, class: QClass.IN, ttl: o.ttl ?? 60, data: { address: ip } });
  for (const t of o.txt ?? [])
    m.answers.push({ name: qname, type: QType.TXT, class: QClass.IN, ttl: o.ttl ?? 60, data: { texts: [t] } });
  if (m.edns) m.edns = { ...m.edns, udpSize: 1232, options: [] };
  return encodeMessage(m);
}

/** The default behaviour: A 192.0.2.1 for every A question, NOERROR/NODATA otherwise. */
export const answerAll: Behaviour = (q, r) => {
  r.send(answer(q, { a: q.msg.questions[0]!.type === QType.A ? ['192.0.2.1'] : [] }));
};

export interface FakeUpstreamOptions {
  behaviour?: Behaviour;
  /** Serve DNS over TLS on the TCP port instead of plain TCP. */
  tls?: tls.TlsOptions;
  port?: number;
  /** Address to listen on; 127.0.0.1 by default. */
  host?: string;
}

export class FakeUpstream {
  readonly received: Received[] = [];
  /** TCP/TLS connections accepted so far, and those open now. */
  accepted = 0;
  readonly open = new Set<net.Socket>();
  behaviour: Behaviour;
  private readonly spoofer: dgram.Socket;

  private constructor(
    readonly port: number,
    private readonly udp: dgram.Socket,
    private readonly tcp: net.Server,
    behaviour: Behaviour,
    v6: boolean,
  ) {
    this.behaviour = behaviour;
    this.spoofer = dgram.createSocket(v6 ? 'udp6' : 'udp4');
  }

  static async start(o: FakeUpstreamOptions = {}): Promise<FakeUpstream> {
    const port = o.port ?? (await freePort());
    const host = o.host ?? '127.0.0.1';
    const v6 = host.includes(':');
    const udp = dgram.createSocket(v6 ? 'udp6' : 'udp4');
    await new Promise<void>((res, rej) => {
      udp.once('error', rej);
      udp.bind(port, host, () => res());
    });
    const tcp = o.tls ? tls.createServer(o.tls) : net.createServer();
    const up = new FakeUpstream(port, udp, tcp, o.behaviour ?? answerAll, v6);
    udp.on('message', (raw, rinfo) => up.onUdp(raw, rinfo));
    tcp.on(o.tls ? 'secureConnection' : 'connection', (sock: net.Socket) => up.onConn(sock, o.tls ? 'tls' : 'tcp'));
    tcp.on('tlsClientError', () => {});
    await new Promise<void>((res, rej) => {
      tcp.once('error', rej);
      tcp.listen(port, host, () => res());
    });
    return up;
  }

  private record(raw: Buffer, proto: Proto, address: string, port: number, conn?: net.Socket): Received | null {
    let msg: Message;
    try {
      msg = decodeMessage(raw);
    } catch {
      return null;
    }
    const r: Received = { proto, raw: Buffer.from(raw), msg, address, port, at: Date.now(), conn };
    this.received.push(r);
    return r;
  }

  private onUdp(raw: Buffer, rinfo: dgram.RemoteInfo): void {
    const q = this.record(raw, 'udp', rinfo.address, rinfo.port);
    if (!q) return;
    this.behaviour(q, {
      send: (b) => this.udp.send(b, rinfo.port, rinfo.address),
      spoof: (b) => this.spoofer.send(b, rinfo.port, rinfo.address),
      raw: () => {},
    });
  }

  private onConn(sock: net.Socket, proto: Proto): void {
    this.accepted++;
    this.open.add(sock);
    sock.on('close', () => this.open.delete(sock));
    sock.on('error', () => {});
    let acc = Buffer.alloc(0);
    sock.on('data', (chunk: Buffer) => {
      acc = Buffer.concat([acc, chunk]);
      while (acc.length >= 2 && acc.length >= 2 + acc.readUInt16BE(0)) {
        const raw = acc.subarray(2, 2 + acc.readUInt16BE(0));
        acc = acc.subarray(2 + raw.length);
        const q = this.record(raw, proto, sock.remoteAddress ?? '', sock.remotePort ?? 0, sock);
        if (!q) continue;
        this.behaviour(q, {
          send: (b) => {
            if (sock.destroyed) return;
            const f = Buffer.alloc(2 + b.length);
            f.writeUInt16BE(b.length, 0);
            b.copy(f, 2);
            sock.write(f);
          },
          spoof: () => {},
          raw: (b, close) => {
            if (b.length) sock.write(b);
            if (close) sock.end();
          },
        });
      }
    });
  }

  /** Queries other than health checks (`. NS`) and loop probes. */
  get queries(): Received[] {
    return this.received.filter((r) => !isHealthCheck(r));
  }

  get healthChecks(): Received[] {
    return this.received.filter(isHealthCheck);
  }

  reset(): void {
    this.received.length = 0;
  }

  /** Drops every open TCP/TLS connection (the upstream restarting, say). */
  dropConnections(): void {
    for (const s of this.open) s.destroy();
  }

  async close(): Promise<void> {
    for (const s of this.open) s.destroy();
    await new Promise<void>((r) => this.tcp.close(() => r()));
    await new Promise<void>((r) => this.udp.close(() => r()));
    await new Promise<void>((r) => this.spoofer.close(() => r()));
  }
}

export function isHealthCheck(r: Received): boolean {
  const q = r.msg.questions[0];
  return q !== undefined && q.type === QType.NS && q.name === '.';
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Polls `cond` every 10 ms until true or `ms` pass. */
export async function waitUntil(cond: () => boolean, ms = 5000, what = 'condition'): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}
