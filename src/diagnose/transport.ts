// One try of a stub resolver against one server: the queries of a candidate go out over
// UDP (one connected socket, so "connection refused" is reported as glibc sees it) or TCP,
// and each comes back as a reply, a timeout, a refusal or an error, with its latency.
// Replies are matched by ID and question; anything else arriving is ignored, as glibc does.

import dgram from 'node:dgram';
import net from 'node:net';
import { randomInt } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { QClass } from '../dns/constants.js';
import { decodeMessage, emptyMessage, encodeMessage, DecodeError, type Message } from '../dns/message.js';
import { goErrorText } from '../server/system-errors.js';

export type Transport = 'udp' | 'tcp';

export interface ServerAddress {
  host: string;
  port: number;
  /** `10.96.0.10:53`, `[fd00::a]:53`. */
  label: string;
}

export interface WireQuery {
  id: number;
  /** Lowercased FQDN, for matching the reply's question. */
  qnameLower: string;
  qtype: number;
  payload: Buffer;
}

export type ExchangeOutcome =
  | { kind: 'reply'; message: Message; latencyMs: number; size: number }
  | { kind: 'timeout'; latencyMs: number }
  /** Nothing listens there: ICMP port unreachable (UDP) or a refused connection (TCP). */
  | { kind: 'refused'; latencyMs: number; error: string }
  | { kind: 'error'; latencyMs: number; error: string };

export interface QueryFlags {
  /** `options edns0`: an OPT record advertising 1200 octets, as glibc does. */
  edns0: boolean;
  /** `options trust-ad`: the AD bit set in queries. */
  trustAd: boolean;
}

export function serverAddress(host: string, port: number): ServerAddress {
  return { host, port, label: host.includes(':') ? `[${host}]:${port}` : `${host}:${port}` };
}

/** Builds a query with a fresh random ID, distinct from `taken`. */
export function buildWireQuery(
  name: string,
  qtype: number,
  flags: QueryFlags,
  taken: ReadonlySet<number> = new Set(),
): WireQuery {
  let id = randomInt(0, 65536);
  while (taken.has(id)) id = randomInt(0, 65536);
  const m = emptyMessage(id);
  m.rd = true;
  m.ad = flags.trustAd;
  m.questions.push({ name, type: qtype, class: QClass.IN });
  if (flags.edns0) m.edns = { udpSize: 1200, version: 0, do: false, zflags: 0, options: [] };
  return { id, qnameLower: name.toLowerCase(), qtype, payload: encodeMessage(m) };
}

interface Waiter {
  q: WireQuery;
  sentAt: number;
  timer: NodeJS.Timeout;
  done(o: ExchangeOutcome): void;
  /** Why a reply with this ID was not accepted, reported if nothing better arrives. */
  rejected?: string;
}

/** Reads a reply; returns the waiter it answers, or records why it could not be used. */
function matchReply(buf: Buffer, waiting: Map<number, Waiter>): { w: Waiter; message: Message } | null {
  if (buf.length < 2) return null;
  const w = waiting.get(buf.readUInt16BE(0));
  if (!w) return null;
  let message: Message;
  try {
    message = decodeMessage(buf);
  } catch (e) {
    if (!(e instanceof DecodeError)) throw e;
    w.rejected = `malformed reply: ${e.message}`;
    return null;
  }
  const q = message.questions[0];
  if (!message.qr || !q || q.name.toLowerCase() !== w.q.qnameLower || q.type !== w.q.qtype) {
    // A reply without the question is still accepted when it is an error (FORMERR, NOTIMP...).
    if (!(message.qr && !q && message.rcode !== 0)) {
      w.rejected = 'a reply with this ID but another question (ignored)';
      return null;
    }
  }
  return { w, message };
}

/** A connected UDP socket carrying the queries of one try. */
class UdpSession {
  private readonly sock: dgram.Socket;
  private readonly waiting = new Map<number, Waiter>();
  private readonly ready: Promise<string | null>;
  private failure: { refused: boolean; error: string } | null = null;

  constructor(server: ServerAddress) {
    this.sock = dgram.createSocket(server.host.includes(':') ? 'udp6' : 'udp4');
    this.sock.on('message', (buf) => this.onMessage(buf));
    this.sock.on('error', (e: NodeJS.ErrnoException) => this.fail(e.code === 'ECONNREFUSED', goErrorText(e)));
    this.ready = new Promise((resolve) => {
      const onError = (e: NodeJS.ErrnoException) => resolve(goErrorText(e));
      this.sock.once('error', onError);
      this.sock.connect(server.port, server.host, () => {
        this.sock.off('error', onError);
        resolve(null);
      });
    });
  }

  /** Resolves once connected (or failed to); the error text, or null. */
  opened(): Promise<string | null> {
    return this.ready;
  }

  private onMessage(buf: Buffer): void {
    const m = matchReply(buf, this.waiting);
    if (!m) return;
    m.w.done({ kind: 'reply', message: m.message, latencyMs: performance.now() - m.w.sentAt, size: buf.length });
  }

  private fail(refused: boolean, error: string): void {
    this.failure = { refused, error };
    for (const w of [...this.waiting.values()]) {
      const latencyMs = performance.now() - w.sentAt;
      w.done(refused ? { kind: 'refused', latencyMs, error } : { kind: 'error', latencyMs, error });
    }
  }

  async ask(q: WireQuery, deadline: number): Promise<ExchangeOutcome> {
    const connectError = await this.ready;
    if (connectError !== null) return { kind: 'error', latencyMs: 0, error: connectError };
    if (this.failure) {
      const f = this.failure;
      return f.refused
        ? { kind: 'refused', latencyMs: 0, error: f.error }
        : { kind: 'error', latencyMs: 0, error: f.error };
    }
    const left = deadline - performance.now();
    if (left <= 0) return { kind: 'timeout', latencyMs: 0 };
    return new Promise((resolve) => {
      const sentAt = performance.now();
      const w: Waiter = {
        q,
        sentAt,
        timer: setTimeout(() => {
          const latencyMs = performance.now() - sentAt;
          w.done(w.rejected ? { kind: 'error', latencyMs, error: w.rejected } : { kind: 'timeout', latencyMs });
        }, left),
        done: (o) => {
          clearTimeout(w.timer);
          this.waiting.delete(q.id);
          resolve(o);
        },
      };
      this.waiting.set(q.id, w);
      this.sock.send(q.payload, (err: NodeJS.ErrnoException | null) => {
        // An ICMP refusal for an earlier datagram can surface as this send's error.
        if (err) this.fail(err.code === 'ECONNREFUSED', goErrorText(err));
      });
    });
  }

  close(): void {
    try {
      this.sock.close();
    } catch {
      // already closed after an error
    }
  }
}

export type UdpMode = 'parallel' | 'sequential' | 'reopen';

/**
 * One UDP try: `parallel` sends all queries at once on one socket (glibc's default for A
 * and AAAA), `sequential` waits for each reply before the next (single-request), `reopen`
 * also uses a new socket for each (single-request-reopen). One deadline covers the try.
 */
export async function exchangeUdp(
  server: ServerAddress,
  queries: WireQuery[],
  timeoutMs: number,
  mode: UdpMode,
): Promise<ExchangeOutcome[]> {
  let s = new UdpSession(server);
  // The clock starts once the socket is connected, as glibc's does after its socket calls.
  await s.opened();
  const deadline = performance.now() + timeoutMs;
  if (mode === 'parallel') {
    try {
      return await Promise.all(queries.map((q) => s.ask(q, deadline)));
    } finally {
      s.close();
    }
  }
  const out: ExchangeOutcome[] = [];
  try {
    for (let i = 0; i < queries.length; i++) {
      if (i > 0 && mode === 'reopen') {
        s.close();
        s = new UdpSession(server);
      }
      const prev = out[i - 1];
      // The try's time is spent: glibc does not send the rest (latency 0: never sent).
      if (prev && prev.kind === 'timeout') out.push({ kind: 'timeout', latencyMs: 0 });
      else out.push(await s.ask(queries[i]!, deadline));
    }
  } finally {
    s.close();
  }
  return out;
}

/** One TCP try: a connection, every query written on it, replies matched as they come. */
export function exchangeTcp(
  server: ServerAddress,
  queries: WireQuery[],
  timeoutMs: number,
): Promise<ExchangeOutcome[]> {
  return new Promise((resolve) => {
    const start = performance.now();
    const results: Array<ExchangeOutcome | undefined> = queries.map(() => undefined);
    const waiting = new Map<number, Waiter>();
    const sock = net.connect({ host: server.host, port: server.port });
    let pending: Buffer = Buffer.alloc(0);
    let finished = false;
    const finish = (fill: (sentAt: number) => ExchangeOutcome) => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      for (const w of waiting.values())
        w.done(
          w.rejected ? { kind: 'error', latencyMs: performance.now() - w.sentAt, error: w.rejected } : fill(w.sentAt),
        );
      sock.destroy();
      resolve(results.map((r) => r ?? fill(start)));
    };
    const timer = setTimeout(
      () => finish((sentAt) => ({ kind: 'timeout', latencyMs: performance.now() - sentAt })),
      timeoutMs,
    );
    queries.forEach((q, i) => {
      const w: Waiter = {
        q,
        sentAt: start,
        timer,
        done: (o) => {
          waiting.delete(q.id);
          results[i] = o;
          if (waiting.size === 0 && !finished) {
            finished = true;
            clearTimeout(timer);
            sock.destroy();
            resolve(results.map((r) => r ?? { kind: 'error', latencyMs: 0, error: 'no result' }));
          }
        },
      };
      waiting.set(q.id, w);
    });
    sock.on('connect', () => {
      const now = performance.now();
      for (const w of waiting.values()) w.sentAt = now;
      const frames = queries.map((q) => {
        const f = Buffer.allocUnsafe(q.payload.length + 2);
        f.writeUInt16BE(q.payload.length, 0);
        q.payload.copy(f, 2);
        return f;
      });
      sock.write(Buffer.concat(frames));
    });
    sock.on('data', (d: Buffer) => {
      pending = pending.length === 0 ? d : Buffer.concat([pending, d]);
      while (pending.length >= 2 && pending.length >= 2 + pending.readUInt16BE(0)) {
        const len = pending.readUInt16BE(0);
        const msg = pending.subarray(2, 2 + len);
        pending = pending.subarray(2 + len);
        const m = matchReply(msg, waiting);
        if (m)
          m.w.done({ kind: 'reply', message: m.message, latencyMs: performance.now() - m.w.sentAt, size: msg.length });
      }
    });
    sock.on('error', (e: NodeJS.ErrnoException) => {
      const error = goErrorText(e);
      finish((sentAt) =>
        e.code === 'ECONNREFUSED'
          ? { kind: 'refused', latencyMs: performance.now() - sentAt, error }
          : { kind: 'error', latencyMs: performance.now() - sentAt, error },
      );
    });
    sock.on('close', () =>
      finish((sentAt) => ({
        kind: 'error',
        latencyMs: performance.now() - sentAt,
        error: 'connection closed before the reply',
      })),
    );
  });
}
