// The forward plugin's handler: picks upstreams in policy order, sends the client's query
// bytes with a new random ID, and returns the upstream's answer bytes with the client's ID
// put back. The per-query loop follows CoreDNS's Forward.ServeDNS: skip upstreams that are
// down, try one at random when all are, 2 s per try, until the request's deadline (5 s),
// SERVFAIL when nothing answered, REFUSED beyond max_concurrent. A client that leaves (a
// closed TCP connection) ends the tries at once.

import { Rcode } from '../../dns/constants.js';
import { isSubdomain } from '../../dns/name.js';
import { bareReply, writeOptEcho } from '../../server/reply.js';
import { copyBytes } from '../../dns/bytes.js';
import { Response, type Handler, type HandlerResult, type Next, type Request } from '../../server/request.js';
import { OutstandingQuery, type PendingTry } from '../../upstream/exchange.js';
import type { ForwardMetrics } from './metrics.js';

import type { Policy } from '../../upstream/policy.js';
import type { Upstream } from './upstream.js';
import type { UpstreamHealth } from '../../status/sources.js';
import type { DirectHandler, Dispatcher, Send } from '../../server/dispatcher.js';
import type { RoutedBlock } from '../../server/router.js';
import { answerCount, emptyTruncated, FLAG_TC, headerRcode, randomBelow, recordsFit } from '../../upstream/wire.js';

/** An OPT record without options. */
const OPT_LEN = 11;

/** What the reused direct answer holds between answers (so it keeps no reply alive). */
const NO_ANSWER = Buffer.alloc(12);

/** Longest pause between passes over the upstreams when every try failed at once. */
const MAX_PASS_GAP_MS = 1000;

export interface ForwardOptions {
  /** FROM: names at or below this zone are forwarded (lowercase FQDN). */
  from: string;
  /** `except`: zones not forwarded. */
  except: string[];
  upstreams: Upstream[];
  policy: Policy;
  forceTcp: boolean;
  preferUdp: boolean;
  maxFails: number;
  /** 0 = no limit. */
  maxConcurrent: number;
  /** 0 = no limit. */
  maxConnectAttempts: number;
  readTimeoutMs: number;
  /** Bit r set: rcode r goes to the next forward (`next`). */
  nextRcodes: number;
  nextOnNodata: boolean;
  /** Bit r set: rcode r makes the query try the next upstream (`failover`). */
  failoverRcodes: number;
  failfastAllUnhealthy: boolean;
  /** `next` applies only when the next plugin is another forward line of this block. */
  nextIsForward: boolean;
  /** The server's counters (its upstreams' stats come from there too). */
  metrics: ForwardMetrics;
}

export class Forward implements Handler, DirectHandler {
  readonly name = 'forward';
  /** Queries being forwarded now (for max_concurrent). */
  inflight = 0;
  stopped = false;
  private readonly limitError: string;
  /** The Response of every UDP/TCP answer given to the dispatcher directly (ForwardCall.onAnswer). */
  readonly directAnswer = Response.wire(NO_ANSWER, 'forward');

  constructor(readonly opts: ForwardOptions) {
    this.limitError = `concurrent queries exceeded maximum ${opts.maxConcurrent}`;
  }

  /** CoreDNS's match + isAllowedDomain: under FROM, and FROM itself even when excepted. */
  matches(name: string): boolean {
    const o = this.opts;
    if (!isSubdomain(name, o.from)) return false;
    if (name === o.from) return true;
    for (let i = 0; i < o.except.length; i++) if (isSubdomain(name, o.except[i]!)) return false;
    return true;
  }

  serveDNS(req: Request, next: Next): HandlerResult {
    if (!this.matches(req.name)) return next(req);
    const max = this.opts.maxConcurrent;
    if (max > 0 && this.inflight >= max) {
      this.opts.metrics.maxConcurrentRejects++;
      return Response.rcode(Rcode.REFUSED, this.name, this.limitError);
    }
    this.inflight++;
    return new Promise<Response>((resolve) => {
      new ForwardCall(this, req, next, resolve, null, null, null, 0);
    });
  }

  /**
   * The block's only plugin, called by the dispatcher: the answer goes back through
   * `Dispatcher.answerLater`, with no Promise. Anything but a query to forward takes serveDNS's way.
   */
  serveDirect(req: Request, d: Dispatcher, send: Send, block: RoutedBlock, start: number): HandlerResult | null {
    const max = this.opts.maxConcurrent;
    if (!this.matches(req.name) || (max > 0 && this.inflight >= max) || this.opts.nextIsForward)
      return block.chain(req);
    this.inflight++;
    new ForwardCall(this, req, null, null, d, send, block, start);
    return null;
  }

  stop(): void {
    this.stopped = true;
    for (const u of this.opts.upstreams) u.stop();
  }

  /** Each upstream as CoreDNS judges it (read by the status page). */
  upstreamHealth(): UpstreamHealth[] {
    const max = this.opts.maxFails;
    return this.opts.upstreams.map((u) => ({
      to: u.addr,
      state: u.down(max) ? 'down' : u.fails > 0 ? 'failing' : 'up',
    }));
  }
}

function resumeCall(call: ForwardCall): void {
  call.trouble!.gapTimer = null;
  call.loop();
}

/** What only a query that fails over, is retried or can be left by its client keeps (most are answered at once). */
class Trouble {
  failovers = 0;
  attempts = 0;
  lastError: string | undefined = undefined;
  /** The pause before the next pass over the upstreams. */
  gapTimer: NodeJS.Timeout | null = null;
  /** The request's signal, listened to while the client can leave before the deadline. */
  signal: AbortSignal | null = null;
}

/** The latest ForwardCall, held for its hidden class (request.ts `latest` says why). */
const latestCall: { call: ForwardCall | null } = { call: null };

/** One client query on its way through the upstreams. */
class ForwardCall extends OutstandingQuery {
  private readonly list: readonly Upstream[];
  /** Position in `list`, and CoreDNS's count of upstreams skipped as down. */
  private i = 0;
  private fails = 0;
  private upstream: Upstream | null = null;
  /** Where the current try waits for its answer, and how many tries went out. */
  private pending: PendingTry | null = null;
  private tries = 0;
  /** Made on the first failure, failover or for a client that can leave. */
  trouble: Trouble | null = null;
  private done = false;
  private overTcp: boolean;
  private tryStart = 0;
  /** When the current pass over the upstreams started (0: not yet, the first loop sets it). */
  private passStart = 0;

  constructor(
    private readonly fwd: Forward,
    private readonly req: Request,
    private readonly next: Next | null,
    /** Where the answer goes: the Promise's, or (a direct call) the dispatcher's. */
    private readonly resolve: ((r: HandlerResult) => void) | null,
    private readonly dispatcher: Dispatcher | null,
    private readonly send: Send | null,
    private readonly block: RoutedBlock | null,
    private readonly start: number,
  ) {
    // A direct call's query is seen by no other plugin: the tries' IDs are written into it and
    // the client's put back at the end, instead of copying it. (A size below 512 is raised in a copy.)
    const edns = req.edns;
    super(req.raw, req.questionEnd, dispatcher !== null && (edns === null || edns.udpSize >= 512));
    // The upstream may send as much over UDP as the client takes, but never less than 512.
    if (edns !== null && edns.udpSize < 512) this.query.writeUInt16BE(512, edns.optOffset + 3);
    this.udpSize = edns === null || edns.udpSize < 512 ? 512 : edns.udpSize;
    this.overTcp = this.startsOverTcp();
    this.list = fwd.opts.policy.order(fwd.opts.upstreams);
    latestCall.call = this; // its hidden class through a quiet spell: request.ts `latest`
    // Every try's timer ends by the deadline, so only a client that can leave earlier needs the signal.
    if (req.mayLeave) {
      const signal = req.signal;
      if (signal.aborted) {
        this.finish(Response.rcode(Rcode.SERVFAIL, 'forward', (signal.reason as Error).message));
        return;
      }
      signal.addEventListener('abort', this);
      this.troubled().signal = signal;
    }
    this.loop();
  }

  private troubled(): Trouble {
    return (this.trouble ??= new Trouble());
  }

  /** The client left: the try in flight is taken back and no other one goes out. */
  handleEvent(): void {
    if (this.done) return;
    this.pending?.cancel(this);
    this.pending = null;
    const t = this.trouble!;
    if (t.gapTimer !== null) clearTimeout(t.gapTimer);
    t.gapTimer = null;
    this.finish(Response.rcode(Rcode.SERVFAIL, 'forward', (t.signal!.reason as Error).message));
  }

  /** force_tcp wins, then prefer_udp, else the client's own transport. */
  private startsOverTcp(): boolean {
    const o = this.fwd.opts;
    if (o.forceTcp) return true;
    if (o.preferUdp) return false;
    return this.req.client.proto === 'tcp';
  }

  /** Picks the next upstream to try, or ends with SERVFAIL. */
  loop(): void {
    const o = this.fwd.opts;
    const n = o.upstreams.length;
    for (;;) {
      const now = performance.now();
      if (this.passStart === 0) this.passStart = now;
      if (now >= this.req.deadline || this.fwd.stopped) break;
      if (o.maxConnectAttempts > 0 && this.trouble !== null && this.trouble.attempts >= o.maxConnectAttempts) break;
      if (this.i >= this.list.length) {
        // Upstreams that fail at once (connection refused) would be retried in a tight loop
        // until marked down; start passes at most once per read timeout (1 s at most) instead.
        const gap = Math.min(o.readTimeoutMs, MAX_PASS_GAP_MS) - (now - this.passStart);
        if (gap > 0) {
          if (now + gap >= this.req.deadline) break;
          this.troubled().gapTimer = setTimeout(resumeCall, gap, this);
          return;
        }
        this.passStart = now;
        this.i = 0;
        this.fails = 0;
      }
      let up = this.list[this.i++]!;
      if (up.down(o.maxFails)) {
        this.fails++;
        if (this.fails < n) continue;
        // Every upstream is down: assume the checks are what is broken and try one at random.
        o.metrics.healthcheckBroken++;
        if (o.failfastAllUnhealthy) break;
        up = o.upstreams[randomBelow(n)]!;
      }
      this.overTcp = this.startsOverTcp();
      this.attempt(up, now);
      return;
    }
    this.finish(Response.rcode(Rcode.SERVFAIL, 'forward', this.trouble?.lastError ?? 'no healthy proxies'));
  }

  private attempt(up: Upstream, now: number): void {
    this.upstream = up;
    this.tryStart = now;
    const left = this.req.deadline - now;
    const timeout = left < this.fwd.opts.readTimeoutMs ? Math.max(1, Math.ceil(left)) : this.fwd.opts.readTimeoutMs;
    const tryNo = ++this.tries;
    const pending = up.send(this, up.protoFor(this.overTcp ? 'tcp' : 'udp'), timeout);
    // A try that failed at once (inside send) may already have been followed by another.
    if (tryNo === this.tries && !this.done) this.pending = pending;
  }

  onAnswer(reply: Buffer): void {
    if (this.done) return;
    this.pending = null;
    const up = this.upstream!;
    const o = this.fwd.opts;
    let msg = reply;
    if (!recordsFit(reply, this.questionEnd)) {
      // CoreDNS: TC set but records cut off mid-way gives an empty TC reply; other garbage is an error.
      if ((reply[2]! & FLAG_TC) === 0) {
        this.onFailure(`dns: overflow unpacking reply from ${up.addr}`, false);
        return;
      }
      msg = emptyTruncated(reply, this.questionEnd);
    }
    // An empty TC answer (records cut off here or by the receive slot) still echoes the client's
    // OPT, as CoreDNS's SizeAndDo adds it to any reply to an EDNS query.
    if (this.req.edns !== null && msg.length === this.questionEnd && (msg[2]! & FLAG_TC) !== 0) {
      const withOpt = Buffer.allocUnsafe(this.questionEnd + OPT_LEN);
      copyBytes(msg, 0, this.questionEnd, withOpt, 0);
      withOpt.writeUInt16BE(1, 10);
      writeOptEcho(withOpt, this.questionEnd, this.req, headerRcode(msg));
      msg = withOpt;
    }
    const now = performance.now();
    const rcode = headerRcode(msg);
    up.stats.observe(rcode, (now - this.tryStart) / 1000);
    if ((msg[2]! & FLAG_TC) !== 0 && !this.overTcp && !up.isTls && o.preferUdp && !o.forceTcp) {
      // prefer_udp: a truncated answer is asked again over TCP, same upstream.
      this.overTcp = true;
      if (now < this.req.deadline) {
        this.attempt(up, now);
        return;
      }
    }
    if (
      o.failoverRcodes !== 0 &&
      (o.failoverRcodes & (1 << rcode)) !== 0 &&
      ++this.troubled().failovers < o.upstreams.length
    ) {
      this.loop();
      return;
    }
    if (
      o.nextIsForward &&
      ((o.nextRcodes & (1 << rcode)) !== 0 || (o.nextOnNodata && rcode === Rcode.NOERROR && answerCount(msg) === 0))
    ) {
      let r: HandlerResult;
      try {
        r = this.next!(this.req);
      } catch (e) {
        // We are in a socket callback here: hand the failure to the server as a rejection.
        r = Promise.reject(e);
      }
      this.finish(r);
      return;
    }
    msg.writeUInt16BE(this.req.id, 0);
    if (this.dispatcher === null) {
      this.finish(Response.wire(msg, 'forward'));
      return;
    }
    // The dispatcher is done with the answer when answerLater returns: one Response serves them all.
    const res = this.fwd.directAnswer;
    res.setWire(msg);
    this.finish(res);
    res.setWire(NO_ANSWER);
  }

  onFailure(error: string, cachedClosed: boolean): void {
    if (this.done) return;
    this.pending = null;
    const up = this.upstream!;
    const o = this.fwd.opts;
    const now = performance.now();
    if (cachedClosed && now < this.req.deadline && !this.fwd.stopped) {
      // The upstream closed a pooled connection under us: CoreDNS retries, not counting it.
      this.attempt(up, now);
      return;
    }
    const t = this.troubled();
    t.lastError = error;
    if (o.maxFails !== 0) up.healthcheck();
    if (o.maxConnectAttempts > 0) t.attempts++;
    if (this.fails < o.upstreams.length) this.loop();
    else this.finish(Response.rcode(Rcode.SERVFAIL, 'forward', error));
  }

  onMismatch(): void {
    if (this.done) return;
    this.pending = null;
    // The bare reply copies the query's header: the client's ID first.
    this.req.raw.writeUInt16BE(this.req.id, 0);
    this.finish(Response.wire(bareReply(this.req, Rcode.FORMERR), 'forward'));
  }

  private finish(r: HandlerResult): void {
    if (this.done) return;
    this.done = true;
    if (this.trouble?.signal) this.trouble.signal.removeEventListener('abort', this);
    this.fwd.inflight--;
    const d = this.dispatcher;
    if (d === null) {
      this.resolve!(r);
      return;
    }
    // The tries' IDs went into the client's query: a reply built from it (SERVFAIL) needs its own.
    this.req.raw.writeUInt16BE(this.req.id, 0);
    d.answerLater(this.req, r, this.send!, this.block!, this.start);
  }
}
