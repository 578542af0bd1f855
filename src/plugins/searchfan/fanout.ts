// One resolution: every candidate name × every upstream asked at once, each pair over a
// socket of its own (the core's UdpChannel; TCP when the UDP answer is truncated). The
// answers are then read the way a resolver walking the search list in order would read
// them: candidate i is used only once every candidate before it is NXDOMAIN. For each
// candidate the first upstream with a real answer (NOERROR or NXDOMAIN) decides, and the
// other upstreams' branches for it are cancelled; once the result is known every branch
// still in flight is cancelled: its socket is closed, and nothing is ever retried. The same
// happens when nobody waits for the answer any more (cancel).

import { emptyMessage, encodeMessage } from '../../dns/message.js';
import { Rcode } from '../../dns/constants.js';
import { OutstandingQuery } from '../../upstream/exchange.js';
import { StreamConn } from '../../upstream/stream.js';
import { UdpChannel } from '../../upstream/udp.js';
import { FLAG_TC, recordsFit } from '../../upstream/wire.js';
import type { UpstreamTarget } from './setup.js';

/** EDNS buffer size asked of upstreams (the DNS flag day's 1232). */
const UPSTREAM_UDP_SIZE = 1232;
const OPT_LEN = 11;

/** What is known about one candidate name. */
export type Outcome =
  | 'pending'
  /** NOERROR with records in the answer section. */
  | 'found'
  /** NOERROR and no answer: the name exists. */
  | 'nodata'
  | 'nxdomain'
  /** Every upstream answered with another rcode (SERVFAIL, REFUSED...) or failed, at least one answered. */
  | 'servfail'
  /** No upstream answered at all (timeout, refused, network error). */
  | 'timeout';

export type FanResult =
  /** `reply` is the upstream's answer for `names[index]`, ID not yet the client's. */
  { kind: 'answer'; reply: Buffer; index: number } | { kind: 'servfail'; error: string };

/** Counts a resolution reports as it goes. */
export interface FanCounters {
  /** One query sent to upstream `to` (UDP, or a TCP retry). */
  sent(to: string): void;
  /** Branches cancelled before they finished. */
  cancelled: number;
}

class Candidate {
  outcome: Outcome = 'pending';
  reply: Buffer | null = null;
  readonly branches: Branch[] = [];
  /** Branches not finished yet. */
  open = 0;
  /** Some upstream answered (with an rcode that decides nothing). */
  answered = false;
  constructor(readonly name: string) {}
}

/** One candidate name asked of one upstream. */
class Branch extends OutstandingQuery {
  done = false;
  private udp: UdpChannel | null = null;
  private tcp: StreamConn | null = null;

  constructor(
    private readonly fan: FanOut,
    readonly candidate: Candidate,
    readonly upstream: UpstreamTarget,
    wire: Buffer,
    questionEnd: number,
  ) {
    super(wire, questionEnd);
  }

  start(timeoutMs: number): void {
    this.udp = new UdpChannel(this.upstream.host, this.upstream.port);
    this.udp.send(this, timeoutMs);
    // The socket closes by itself once this query is answered or timed out.
    this.udp.retire();
  }

  onAnswer(reply: Buffer): void {
    if (this.done) return;
    if (!recordsFit(reply, this.questionEnd)) {
      this.onFailure(`malformed reply from ${this.upstream.addr}`);
      return;
    }
    if ((reply[2]! & FLAG_TC) !== 0 && this.tcp === null) {
      // Truncated: the same question again over TCP, within what is left of the deadline.
      const left = this.fan.timeLeft();
      if (left > 0) {
        this.tcp = new StreamConn({ host: this.upstream.host, port: this.upstream.port, tls: null }, null, undefined);
        this.fan.counters.sent(this.upstream.addr);
        this.tcp.send(this, left);
        this.tcp.retire();
        return;
      }
    }
    this.done = true;
    this.fan.onReply(this, reply);
  }

  onFailure(error: string): void {
    if (this.done) return;
    this.done = true;
    this.fan.onFailure(this, error);
  }

  onMismatch(): void {
    this.onFailure(`reply from ${this.upstream.addr} does not match the question`);
  }

  /** Stops waiting: closes the socket (the kernel drops any late answer), never retries. */
  cancel(): boolean {
    if (this.done) return false;
    this.done = true;
    this.udp?.close();
    this.tcp?.destroy();
    return true;
  }
}

/** The query sent for one candidate: RD set, EDNS with a 1232-octet buffer. */
function candidateQuery(name: string, qtype: number, qclass: number): { wire: Buffer; questionEnd: number } {
  const m = emptyMessage(0);
  m.rd = true;
  m.questions.push({ name, type: qtype, class: qclass });
  m.edns = { udpSize: UPSTREAM_UDP_SIZE, version: 0, do: false, zflags: 0, options: [] };
  const wire = encodeMessage(m);
  return { wire, questionEnd: wire.length - OPT_LEN };
}

export class FanOut {
  readonly promise: Promise<FanResult>;
  private resolvePromise!: (r: FanResult) => void;
  private readonly candidates: Candidate[];
  private readonly deadline: number;
  /** Candidates before this one are settled and NXDOMAIN (or SERVFAIL). */
  private cursor = 0;
  private sawServfail = false;
  private lastError = '';
  finished = false;

  constructor(
    names: readonly string[],
    /** Position of the name as asked: its NXDOMAIN is the one returned when every name fails. */
    private readonly bare: number,
    qtype: number,
    qclass: number,
    upstreams: readonly UpstreamTarget[],
    timeoutMs: number,
    readonly counters: FanCounters,
  ) {
    this.promise = new Promise<FanResult>((resolve) => {
      this.resolvePromise = resolve;
    });
    this.deadline = performance.now() + timeoutMs;
    this.candidates = names.map((n) => new Candidate(n));
    for (const c of this.candidates) {
      const q = candidateQuery(c.name, qtype, qclass);
      for (const u of upstreams) c.branches.push(new Branch(this, c, u, q.wire, q.questionEnd));
      c.open = c.branches.length;
    }
    // Everything leaves at once.
    for (const c of this.candidates) {
      for (const b of c.branches) {
        counters.sent(b.upstream.addr);
        b.start(timeoutMs);
      }
    }
  }

  timeLeft(): number {
    return Math.floor(this.deadline - performance.now());
  }

  onReply(b: Branch, reply: Buffer): void {
    const c = b.candidate;
    c.open--;
    if (this.finished || c.outcome !== 'pending') return;
    const rcode = reply[3]! & 0xf;
    if (rcode === Rcode.NOERROR || rcode === Rcode.NXDOMAIN) {
      c.outcome = rcode === Rcode.NXDOMAIN ? 'nxdomain' : reply.readUInt16BE(6) > 0 ? 'found' : 'nodata';
      c.reply = reply;
      // The first upstream to answer decides for this candidate.
      this.cancelBranches(c);
    } else {
      c.answered = true;
      this.lastError = `${c.name} answered ${rcode} by ${b.upstream.addr}`;
      if (c.open === 0) c.outcome = 'servfail';
    }
    this.walk();
  }

  onFailure(b: Branch, error: string): void {
    const c = b.candidate;
    c.open--;
    if (this.finished || c.outcome !== 'pending') return;
    this.lastError = error;
    if (c.open === 0) c.outcome = c.answered ? 'servfail' : 'timeout';
    this.walk();
  }

  /** Reads the candidates in order as far as they are known. */
  private walk(): void {
    const list = this.candidates;
    for (let i = this.cursor; i < list.length; i++) {
      const c = list[i]!;
      switch (c.outcome) {
        case 'pending':
          this.cursor = i;
          return;
        case 'found':
        case 'nodata':
          this.finish({ kind: 'answer', reply: c.reply!, index: i });
          return;
        case 'nxdomain':
          continue;
        case 'servfail':
          // As glibc: a failing server for one name does not stop the walk, but the end result
          // can then no longer be "this name does not exist".
          this.sawServfail = true;
          continue;
        case 'timeout':
          // Whether this name exists is unknown, so no later name may be used in its place.
          this.finish({ kind: 'servfail', error: `no upstream answered for ${c.name}: ${this.lastError}` });
          return;
      }
    }
    this.cursor = list.length;
    if (this.sawServfail) {
      this.finish({ kind: 'servfail', error: `no name resolved and some upstreams failed: ${this.lastError}` });
      return;
    }
    const bare = list[this.bare]!;
    this.finish({ kind: 'answer', reply: bare.reply!, index: this.bare });
  }

  /** Nobody waits for the answer any more: every branch still in flight is cancelled. */
  cancel(reason: string): void {
    this.finish({ kind: 'servfail', error: reason });
  }

  private cancelBranches(c: Candidate): void {
    for (const b of c.branches) if (b.cancel()) this.counters.cancelled++;
  }

  private finish(r: FanResult): void {
    if (this.finished) return;
    this.finished = true;
    for (const c of this.candidates) this.cancelBranches(c);
    this.resolvePromise(r);
  }
}
