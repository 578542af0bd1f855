// What a plugin sees (Request) and what it gives back (Response). Plugins never touch
// sockets: the server turns a Response into bytes, truncates it and sends it.

import { QClass, QType, Rcode } from '../dns/constants.js';
import type { EdnsInfo, ParsedQuery } from '../dns/query.js';
import { decodeMessage, emptyMessage, encodeMessage, type EdnsOption, type Message } from '../dns/message.js';
import type { Metadata } from './metadata.js';
import type { PreparedAnswer } from './prepared-reply.js';
import type { ZoneStats } from './stats.js';

/**
 * The latest Request and Response made, held so that V8 keeps their hidden classes through a
 * quiet spell. Optimized code refers weakly to the hidden classes it was built for, and the
 * memory reducer's collections (V8's, when allocation is low) keep none that no object uses: with
 * no query in flight they took these, and with them the optimized code of the query path (35–49
 * functions at once), so the next load ran slower code while V8 compiled it again on helper
 * threads sharing the server's core (BENCHMARKS.md, "V8's helpers on the server's core"). One
 * object of each keeps them. The forward path's ForwardCall, cache's Flight, kubernetes's
 * AnswerWriter and the WireWriter do the same.
 */
export const latest: { request: Request | null; response: Response | null } = { request: null, response: null };

export type Transport = 'udp' | 'tcp';

/**
 * UDP answers are never larger than this by default, whatever buffer the client advertises:
 * an EDNS 65535 query would otherwise draw a datagram 1,000 times its size (the reflection
 * attack). 1232 is DNS Flag Day 2020's size and bufsize's default; bufsize replaces it.
 */
export const DEFAULT_UDP_CAP = 1232;

/**
 * How long a client waits for its answer: forward's overall deadline, which CoreDNS also applies
 * to every query whatever its transport (a UDP client's patience is not on the wire).
 */
export const REQUEST_PATIENCE_MS = 5000;

/** Told when the client of a request has left before its answer (a TCP connection that closed). */
export interface LeaveListener {
  clientLeft(): void;
}

export interface ClientInfo {
  proto: Transport;
  remoteAddress: string;
  remotePort: number;
  /** 1 for IPv4, 2 for IPv6 (CoreDNS's `family` label). */
  family: 1 | 2;
  localAddress: string;
  localPort: number;
  /** TCP only: writes one more message on the connection (after the reply `send` wrote). */
  sendMore?: (msg: Buffer) => void;
  /** True once a TCP client's connection closed: its answers are no longer built. */
  readonly gone?: boolean;
  /**
   * Present on a client of the native UDP path: offers the answer just sent (or the hit the
   * cache would give next, Response.fastRepeat) to the socket's native answer table (the
   * dispatcher calls it only for eligible answers).
   */
  keep?(req: Request, res: Response, out: Buffer, zone: ZoneStats | undefined): void;
  /** Clients that can leave before their deadline (TCP): `l.clientLeft()` when they do, until `unfollow(l)`. */
  follow?(l: LeaveListener): void;
  unfollow?(l: LeaveListener): void;
}

export class Request {
  readonly raw: Buffer;
  readonly id: number;
  readonly flags: number;
  readonly opcode: number;
  /** The name as asked, letter case kept, fully qualified. */
  readonly qname: string;
  /** The name lowercased, for lookups. */
  readonly name: string;
  readonly qtype: number;
  readonly qclass: number;
  readonly questionEnd: number;
  /** The request's EDNS; `limitUdpSize` (bufsize) may lower its buffer size. */
  edns: EdnsInfo | null;
  readonly client: ClientInfo;
  /** The largest UDP answer sent whatever buffer the client advertises (README, "UDP answer size"). */
  udpCap = DEFAULT_UDP_CAP;
  /** The zone of the server block that is answering (lowercase FQDN). */
  zone = '.';
  /** The server block's address, as CoreDNS labels metrics: "dns://:53". */
  server = '';
  /** Set by plugins that re-enter the chain (ExternalName targets, autopath) to bound recursion. */
  depth = 0;
  /** Labels plugins published for this query; null unless the block has the `metadata` plugin. */
  metadata: Metadata | null = null;
  /** `deadline` once read (0 before): a query answered at once never reads the clock for it. */
  private deadlineAt = 0;
  /** The query the client sent, for requests made from it (they share its deadline and abort); null for that query. */
  private readonly origin: Request | null;
  /** Made on the first ask for `signal` only: most queries are answered before anyone needs one. */
  private abort: RequestAbort | null = null;
  /** True once other askers wait on work started under this request (a single flight). */
  private sharedWork = false;
  /** Set by noFast(): this query's answer must not be kept by the native answer table. */
  fastVeto = false;

  /** `origin`: the request this one stands for (a rewritten name), whose deadline and abort it shares. */
  constructor(raw: Buffer, q: ParsedQuery, client: ClientInfo, origin: Request | null = null) {
    this.raw = raw;
    this.id = q.id;
    this.flags = q.flags;
    this.opcode = q.opcode;
    this.qname = q.qname;
    this.name = q.qnameLower;
    this.qtype = q.qtype;
    this.qclass = q.qclass;
    this.questionEnd = q.questionEnd;
    this.edns = q.edns;
    this.client = client;
    this.origin = origin === null ? null : (origin.origin ?? origin);
    latest.request = this;
  }

  /**
   * When the client stops waiting, in `performance.now()` milliseconds: 5 s after the query
   * arrived. Requests made from it share it. Fixed on first read, which the server makes happen
   * before anything is awaited (`answersLater`), so it counts from the query's arrival.
   */
  get deadline(): number {
    const root = this.origin ?? this;
    if (root.deadlineAt === 0) root.deadlineAt = performance.now() + REQUEST_PATIENCE_MS;
    return root.deadlineAt;
  }

  /**
   * Aborted at `deadline` or when the client leaves (a TCP connection closes), with a
   * `TimeoutError` or an `AbortError` whose message is Go's context error. Made on first use.
   */
  get signal(): AbortSignal {
    const root = this.origin ?? this;
    root.abort ??= new RequestAbort(root);
    return root.abort.signal;
  }

  /**
   * True when the client can leave before `deadline` (a TCP connection). Work that already
   * ends by `deadline` needs `signal` only then, and spares a UDP query the AbortController.
   */
  get mayLeave(): boolean {
    return this.client.follow !== undefined;
  }

  /**
   * Other askers now wait on work started under this request (a single flight): its client
   * leaving no longer aborts it (the deadline still does).
   */
  shareWork(): void {
    (this.origin ?? this).sharedWork = true;
  }

  /** @internal The chain answers later: the deadline is fixed now, before the first await resumes. */
  answersLater(): void {
    if (this.deadlineAt === 0) this.deadlineAt = performance.now() + REQUEST_PATIENCE_MS;
  }

  /** @internal The server is done with this query: its deadline timer and connection watch go. */
  settle(): void {
    if (this.abort !== null) this.abort.release();
  }

  /**
   * The answer must not be kept by the native answer table (fast-answers.ts): a plugin counted
   * or did something for this query that a repeat answered without JS would not do.
   */
  noFast(): void {
    (this.origin ?? this).fastVeto = true;
  }

  /** @internal For RequestAbort: whether the client leaving may abort this request's work. */
  get abortsOnLeave(): boolean {
    return !this.sharedWork;
  }

  get rd(): boolean {
    return (this.flags & 0x0100) !== 0;
  }

  get cd(): boolean {
    return (this.flags & 0x0010) !== 0;
  }

  get do(): boolean {
    return this.edns !== null && this.edns.do;
  }

  /** The largest reply the client accepts on this transport. */
  get maxSize(): number {
    if (this.client.proto === 'tcp') return 65535;
    if (this.edns === null) return 512;
    const size = this.edns.udpSize;
    return size < 512 ? 512 : size > this.udpCap ? this.udpCap : size;
  }

  /**
   * bufsize: a buffer size above `size` is lowered to it (in the query bytes too, which forward
   * sends upstream), and `size` replaces the default cap on UDP answers.
   */
  limitUdpSize(size: number): void {
    this.udpCap = size;
    const e = this.edns;
    if (e === null || e.udpSize <= size) return;
    this.edns = { ...e, udpSize: size };
    this.raw.writeUInt16BE(size, e.optOffset + 3);
  }

  /** A reply skeleton: same ID, opcode, RD and CD, the question as asked, QR set. */
  reply(rcode: number = Rcode.NOERROR): Message {
    const m = emptyMessage(this.id);
    m.qr = true;
    m.opcode = this.opcode;
    m.rd = this.rd;
    m.cd = this.cd;
    m.rcode = rcode;
    m.questions.push({ name: this.qname, type: this.qtype, class: this.qclass });
    return m;
  }

  /** This query's context (client, zone, server, depth, metadata) around another wire form of it. */
  withQuery(raw: Buffer, q: ParsedQuery): Request {
    const r = new Request(raw, q, this.client, this);
    r.zone = this.zone;
    r.server = this.server;
    r.depth = this.depth;
    r.metadata = this.metadata;
    return r;
  }

  /**
   * A new request for another name or type, from the same client, for plugins that
   * resolve through the chain (ExternalName targets, search paths).
   */
  derive(qname: string, qtype: number = this.qtype): Request {
    const m = emptyMessage(this.id);
    m.rd = true;
    m.questions.push({ name: qname, type: qtype, class: QClass.IN });
    if (this.edns) m.edns = { udpSize: this.edns.udpSize, version: 0, do: this.edns.do, zflags: 0, options: [] };
    const raw = encodeMessage(m);
    const questionEnd = 12 + questionLength(raw);
    const r = this.withQuery(raw, {
      id: this.id,
      flags: 0x0100,
      opcode: 0,
      qname,
      qnameLower: qname.toLowerCase(),
      qtype,
      qclass: QClass.IN,
      questionEnd,
      // The OPT written above (no options), not the client's: offsets are into this raw.
      edns: this.edns ? { ...this.edns, optOffset: questionEnd, optLength: 11 } : null,
    });
    r.udpCap = this.udpCap;
    r.depth = this.depth + 1;
    return r;
  }
}

/** Go's context errors, which CoreDNS's logs show for a query given up on. */
const DEADLINE_EXCEEDED = 'context deadline exceeded';
const CANCELED = 'context canceled';

function onDeadline(a: RequestAbort): void {
  a.fire(new DOMException(DEADLINE_EXCEEDED, 'TimeoutError'));
}

/** The abort of one client query: a timer for its deadline, and a watch on its connection. */
class RequestAbort implements LeaveListener {
  private readonly controller = new AbortController();
  private timer: NodeJS.Timeout | null = null;
  private following = false;
  /** Done with: the query was answered or aborted. */
  private released = false;

  constructor(private readonly req: Request) {
    const left = req.deadline - performance.now();
    if (left <= 0) {
      this.fire(new DOMException(DEADLINE_EXCEEDED, 'TimeoutError'));
      return;
    }
    if (req.client.gone === true && req.abortsOnLeave) {
      this.fire(new DOMException(CANCELED, 'AbortError'));
      return;
    }
    this.timer = setTimeout(onDeadline, Math.ceil(left), this);
    this.timer.unref();
    if (req.client.follow !== undefined) {
      req.client.follow(this);
      this.following = true;
    }
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  clientLeft(): void {
    if (this.req.abortsOnLeave) this.fire(new DOMException(CANCELED, 'AbortError'));
  }

  fire(reason: DOMException): void {
    if (this.released || this.controller.signal.aborted) return;
    this.release();
    this.controller.abort(reason);
  }

  release(): void {
    this.released = true;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    if (this.following) this.req.client.unfollow?.(this);
    this.following = false;
  }
}

function questionLength(raw: Buffer): number {
  let p = 12;
  while (raw[p] !== 0) p += 1 + raw[p]!;
  return p + 1 + 4 - 12;
}

/**
 * A plugin's answer. Exactly one of: a Message to encode, ready wire bytes (ID already
 * the request's), or neither (a bare reply with `rcode`, written by the server).
 */
export class Response {
  rcode: number;
  plugin: string;
  /** What went wrong, for the `errors` plugin (CoreDNS plugins return an error value). */
  error: string | undefined = undefined;
  /** True when the client gets no reply at all (the `acl` plugin's `drop`). */
  dropped = false;
  /** Further complete messages after this one, for TCP only (a zone transfer's envelopes). */
  more: readonly Buffer[] | null = null;
  /**
   * The prepared answer the reply was written from (its records, what it was built from), or
   * only what it was built from, for a cache before it, which then keeps that answer instead of
   * walking and copying the bytes. A plugin that rewrites the wire bytes in place clears it.
   */
  prepared: PreparedAnswer | null = null;
  /**
   * How long (ms) the answering plugin stands by this answer for a byte-identical query: the
   * native answer table may repeat it that long (fast-answers.ts). 0: never (the default).
   */
  fastMs = 0;
  /** What one repeat counts in the answering plugin's own counters (a cache hit), n at once. */
  fastCount: ((n: number) => void) | null = null;
  /**
   * A cache hit's TTL fields (offsets from `fastTtlBase` in the reply): the native table may go
   * on `fastSteps` more seconds past `fastMs`, every one of them one lower each second.
   */
  fastTtls: Uint16Array | null = null;
  fastTtlBase = 0;
  fastSteps = 0;
  /**
   * Set by the cache on a miss's answer it stored: the reply a hit would give this very query
   * now, its fast fields set. The native table may repeat that one (not this reply, which went
   * out as the next plugin wrote it) to the query's repeats, so the next one does not come back
   * to JS only to find the hit (fast-answers.ts).
   */
  fastRepeat: Response | null = null;
  private msg: Message | null;
  private bytes: Buffer | null;

  private constructor(rcode: number, plugin: string, msg: Message | null, bytes: Buffer | null) {
    this.rcode = rcode;
    this.plugin = plugin;
    this.msg = msg;
    this.bytes = bytes;
    latest.response = this;
  }

  static message(msg: Message, plugin: string): Response {
    return new Response(msg.rcode, plugin, msg, null);
  }

  /** Bytes of a complete reply whose ID already matches the request. */
  static wire(bytes: Buffer, plugin: string): Response {
    return new Response(bytes.length >= 4 ? bytes[3]! & 0xf : Rcode.SERVFAIL, plugin, null, bytes);
  }

  /** "I did not write a reply; answer with this rcode" (CoreDNS's return without WriteMsg). */
  static rcode(rcode: number, plugin: string, error?: string): Response {
    const r = new Response(rcode, plugin, null, null);
    r.error = error;
    return r;
  }

  /** "Send nothing back" (CoreDNS's plugins that return without writing and with success). */
  static drop(plugin: string): Response {
    const r = new Response(Rcode.NOERROR, plugin, null, null);
    r.dropped = true;
    return r;
  }

  get isBare(): boolean {
    return this.msg === null && this.bytes === null;
  }

  get hasWire(): boolean {
    return this.bytes !== null;
  }

  /** The reply as a Message, decoded from the wire form on first use. */
  toMessage(req: Request): Message {
    if (this.msg) return this.msg;
    if (this.bytes) {
      this.msg = decodeMessage(this.bytes);
      return this.msg;
    }
    this.msg = req.reply(this.rcode);
    return this.msg;
  }

  /** Replace the content with a modified message (the wire form is dropped). */
  setMessage(m: Message): void {
    this.msg = m;
    this.bytes = null;
    this.rcode = m.rcode;
  }

  /**
   * Replace the content with a complete reply's bytes (ID already the request's). For a plugin
   * that gives the dispatcher's answerLater one Response after another: it is done with each then.
   */
  setWire(bytes: Buffer): void {
    this.msg = null;
    this.bytes = bytes;
    this.rcode = bytes.length >= 4 ? bytes[3]! & 0xf : Rcode.SERVFAIL;
  }

  peekWire(): Buffer | null {
    return this.bytes;
  }

  peekMessage(): Message | null {
    return this.msg;
  }
}

export type HandlerResult = Response | Promise<Response>;
export type Next = (req: Request) => HandlerResult;

/** A plugin instance in a server block's chain. */
export interface Handler {
  readonly name: string;
  serveDNS(req: Request, next: Next): HandlerResult;
}

/** AXFR or IXFR: the question asks for a whole zone (the one check every plugin uses). */
export function isZoneTransfer(qtype: number): boolean {
  return qtype === QType.AXFR || qtype === QType.IXFR;
}

/** The options of the query's OPT record, copied (none without OPT; a truncated option ends the list). */
export function requestOptions(req: Request): EdnsOption[] {
  const out: EdnsOption[] = [];
  const e = req.edns;
  if (e === null) return out;
  const raw = req.raw;
  let p = e.optOffset + 11;
  const end = Math.min(e.optOffset + e.optLength, raw.length);
  while (p + 4 <= end) {
    const code = raw.readUInt16BE(p);
    const len = raw.readUInt16BE(p + 2);
    if (p + 4 + len > end) break;
    out.push({ code, data: Buffer.from(raw.subarray(p + 4, p + 4 + len)) });
    p += 4 + len;
  }
  return out;
}

/** True when the query's OPT record holds option `code` (walks the options; nothing is copied). */
export function hasRequestOption(req: Request, code: number): boolean {
  const e = req.edns;
  if (e === null) return false;
  const raw = req.raw;
  let p = e.optOffset + 11;
  const end = Math.min(e.optOffset + e.optLength, raw.length);
  while (p + 4 <= end) {
    if (raw.readUInt16BE(p) === code) return true;
    p += 4 + raw.readUInt16BE(p + 2);
  }
  return false;
}
