// The searchfan handler, KubeVPN's DNS forward server done the way a resolver walking the
// search list would answer: cache check, single-flight, search expansion, fan-out to every
// upstream at once (fanout.ts), ordered choice of the answer, rewrite to the asked name
// (rewrite.ts), store (store.ts). Every query it gets is answered here; nothing goes on.
// A lookup ends by the deadline of the query that started it, and is cancelled once every
// query waiting on it has left (closed TCP connections).

import { Rcode } from '../../dns/constants.js';
import { Response, type Handler, type HandlerResult, type Next, type Request } from '../../server/request.js';
import { clock, releaseClock, retainClock } from '../../server/clock.js';
import { expand } from './candidates.js';
import { FanOut, type FanResult } from './fanout.js';
import { SearchFanMetrics, type SearchFanCounters } from './metrics.js';
import { prepareAnswer, type PreparedAnswer } from './rewrite.js';
import type { SearchFanConfig } from './setup.js';
import { AnswerStore, StoredAnswer, writeAnswer } from './store.js';

const NAME = 'searchfan';

/** What a lookup settles to, shared by every query that waited on it. */
type Settled = StoredAnswer | { error: string };

/** One lookup in flight and how many queries still wait on it. */
class Flight {
  waiting = 0;
  fan: FanOut | null = null;
  promise!: Promise<Settled>;
  constructor(readonly key: string) {}
}

export class SearchFan implements Handler {
  readonly name = NAME;
  readonly store = new AnswerStore();
  readonly counters: SearchFanCounters;
  /** Lookups in flight, by question; identical misses wait on the same one. */
  private readonly flights = new Map<string, Flight>();
  private started = false;
  private stopped = false;

  constructor(
    readonly cfg: SearchFanConfig,
    private readonly server: string,
    /** The server's searchfan metrics (SEARCHFAN_METRICS). */
    private readonly metrics: SearchFanMetrics = new SearchFanMetrics(),
  ) {
    this.counters = metrics.countersFor(server);
  }

  /** Before the first query: the coarse clock the cache ages by, and the entries gauge. */
  start(): void {
    if (this.started) return;
    this.started = true;
    retainClock();
    this.metrics.trackEntries(this, this.server, () => this.store.size);
  }

  serveDNS(req: Request, _next: Next): HandlerResult {
    this.counters.requests++;
    const now = clock.ms;
    const hit = this.store.get(req.name, req.qtype, req.qclass, now);
    if (hit !== undefined && hit.answer.questionEnd === req.questionEnd) {
      this.counters.cacheHits++;
      return Response.wire(writeAnswer(req, hit, now), NAME);
    }
    const key = `${req.qtype}/${req.qclass}/${req.name}`;
    let flight = this.flights.get(key);
    if (flight !== undefined) this.counters.coalesced++;
    else if (this.flights.size >= this.cfg.maxConcurrent) {
      this.counters.refused++;
      return Response.rcode(Rcode.REFUSED, NAME, `concurrent lookups exceeded maximum ${this.cfg.maxConcurrent}`);
    } else flight = this.begin(req, key);
    return this.wait(req, flight);
  }

  /** The reply once `flight` settles; a query whose client can leave stops waiting when it does. */
  private wait(req: Request, flight: Flight): Promise<Response> {
    flight.waiting++;
    if (!req.mayLeave) return flight.promise.then((s) => this.reply(req, s));
    const signal = req.signal;
    const left = (): void => this.leave(flight, (signal.reason as Error).message);
    if (signal.aborted) left();
    else signal.addEventListener('abort', left, { once: true });
    return flight.promise.then((s) => {
      signal.removeEventListener('abort', left);
      return this.reply(req, s);
    });
  }

  /** A waiting query's client left; the last one to leave cancels the lookup. */
  private leave(flight: Flight, reason: string): void {
    if (--flight.waiting > 0) return;
    if (this.flights.get(flight.key) === flight) this.flights.delete(flight.key);
    flight.fan?.cancel(reason);
  }

  /** Starts the one lookup for this question; concurrent askers join it. */
  private begin(req: Request, key: string): Flight {
    const cfg = this.cfg;
    const flight = new Flight(key);
    const exp = expand(req.qname, cfg.search, cfg.ndots);
    // The lookup ends by the asking query's deadline: nobody waits for it after that.
    const left = Math.floor(req.deadline - performance.now());
    let fan: FanOut;
    try {
      fan = new FanOut(
        exp.names,
        exp.bare,
        req.qtype,
        req.qclass,
        cfg.upstreams,
        Math.max(1, Math.min(cfg.timeoutMs, left)),
        this.counters,
      );
    } catch (e) {
      flight.promise = Promise.resolve({ error: `cannot ask for ${req.qname}: ${(e as Error).message}` });
      return flight;
    }
    flight.fan = fan;
    const qname = req.qname;
    const name = req.name;
    const qtype = req.qtype;
    const qclass = req.qclass;
    flight.promise = fan.promise.then((r: FanResult): Settled => {
      if (this.flights.get(key) === flight) this.flights.delete(key);
      if (r.kind === 'servfail') return { error: r.error };
      let answer: PreparedAnswer;
      try {
        answer = prepareAnswer(r.reply, exp.names[r.index]!, qname, qtype, qclass);
      } catch (e) {
        return { error: `cannot use the answer for ${exp.names[r.index]}: ${(e as Error).message}` };
      }
      const storedAt = clock.ms;
      const stored = new StoredAnswer(answer, storedAt, storedAt + answer.cacheSeconds * 1000);
      if (answer.cacheSeconds > 0 && !this.stopped) this.store.set(name, qtype, qclass, stored);
      return stored;
    });
    this.flights.set(key, flight);
    return flight;
  }

  private reply(req: Request, s: Settled): Response {
    if (!(s instanceof StoredAnswer)) {
      this.counters.failures++;
      return Response.rcode(Rcode.SERVFAIL, NAME, s.error);
    }
    if (s.answer.questionEnd !== req.questionEnd)
      return Response.rcode(Rcode.SERVFAIL, NAME, 'searchfan: question changed');
    return Response.wire(writeAnswer(req, s, clock.ms), NAME);
  }

  /** Replaced (reload) or stopping: lookups in flight finish (each within its deadline) but are not kept. */
  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    this.store.clear();
    if (!this.started) return;
    this.metrics.untrackEntries(this);
    releaseClock();
  }
}
