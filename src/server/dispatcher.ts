// Answering one message, whatever socket it came from: parsing the question, routing to a
// server block, FORMERR/NOTIMP/REFUSED/BADVERS, panics, metrics, and the count of answers in flight.

import { QClass, Rcode } from '../dns/constants.js';
import { parseQuery, QueryProblem, scratchQuery } from '../dns/query.js';
import { logger } from '../log.js';
import { bareReply, finalizeReply } from './reply.js';
import { Request, type ClientInfo, type HandlerResult, type Response } from './request.js';
import type { RoutedBlock, Router } from './router.js';
import { ServerStats, type ZoneStats } from './stats.js';
import { QueryNames } from '../status/names.js';

const log = logger('');

/** The question being parsed: Request copies it out at once, so one serves every query. */
const parsed = scratchQuery();

/**
 * Where a message's answer goes (null: nothing is sent). It is given the client back, so that
 * one function can serve every client of a socket instead of a closure per query.
 */
export type Send = (out: Buffer | null, client: ClientInfo) => void;

/**
 * A block's only plugin when it can answer later without a Promise (forward): it keeps `send`,
 * `block` and `start`, and gives its answer back with `Dispatcher.answerLater`; it returns null
 * when it will, or an answer (a Response or a Promise) as `serveDNS` would.
 */
export interface DirectHandler {
  serveDirect(req: Request, d: Dispatcher, send: Send, block: RoutedBlock, start: number): HandlerResult | null;
}

/** State shared by all listeners of a server: the current routing tables and counters. */
export class Dispatcher {
  routers = new Map<string, Router>();
  inflight = 0;
  private idleWaiters: Array<() => void> = [];

  constructor(
    readonly stats: ServerStats = new ServerStats(),
    readonly names: QueryNames = new QueryNames(),
  ) {}

  /** Handles one message; `send` is called exactly once, with null when the message is dropped. */
  handle(buf: Buffer, client: ClientInfo, router: Router | undefined, send: Send): void {
    const q = parseQuery(buf, parsed);
    if (typeof q === 'number') {
      if (q === QueryProblem.Drop) {
        send(null, client);
        return;
      }
      send(headerOnlyReply(buf, q), client);
      return;
    }
    const req = new Request(buf, q, client);
    const counting = this.stats.enabled;
    const start = counting ? performance.now() : 0;
    let early = -1;
    let block: RoutedBlock | undefined;
    if (req.edns !== null && req.edns.version > 0) early = Rcode.BADVERS;
    else {
      block = router?.route(req);
      if (block === undefined || (req.qclass !== QClass.IN && block.anyClass !== true)) {
        block = undefined;
        early = Rcode.REFUSED;
      }
    }
    if (block === undefined) {
      const out = bareReply(req, early);
      send(out, client);
      if (counting && router?.dropped) this.count(router.dropped, req, out, '', start);
      return;
    }
    req.zone = block.zone;
    req.server = block.serverLabel;
    let result: HandlerResult;
    try {
      const direct = block.direct;
      if (direct !== undefined && direct.chain === block.chain) {
        // No Promise and no closures per query: the plugin calls answerLater (a config gate swaps the chain).
        this.inflight++;
        let r: HandlerResult | null | undefined;
        try {
          r = direct.handler.serveDirect(req, this, send, block, counting ? start : -1);
        } finally {
          if (r !== null) this.inflight--;
        }
        if (r === null) return;
        result = r;
      } else result = block.chain(req);
    } catch (e) {
      req.settle();
      this.panic(req, e);
      const out = bareReply(req, Rcode.SERVFAIL);
      send(out, client);
      if (counting && block.stats) this.count(block.stats, req, out, '', start);
      return;
    }
    if (result instanceof Promise) {
      req.answersLater();
      this.inflight++;
      const b = block;
      const from = counting ? start : -1;
      result.then(
        (res) => this.answered(req, res, send, b, from),
        (e: unknown) => this.failed(req, e, send, b, from),
      );
      return;
    }
    req.settle();
    if (result.dropped) {
      send(null, client);
      return;
    }
    const out = finalizeReply(req, result);
    send(out, client);
    if (result.more !== null && client.sendMore) for (const m of result.more) client.sendMore(m);
    if (counting && block.stats) this.count(block.stats, req, out, result.plugin, start);
    // A repeat of this exact query may be answered by the native table (fast-answers.ts).
    if (client.keep !== undefined && block.fast === true && router!.views === false) {
      if (result.fastMs > 0) client.keep(req, result, out, block.stats);
      else if (result.fastRepeat !== null) keepRepeat(req, result.fastRepeat, block);
    }
  }

  /** The answer of a direct handler (`start` -1: not counted); once per query it was given. */
  answerLater(req: Request, r: HandlerResult, send: Send, block: RoutedBlock, start: number): void {
    if (r instanceof Promise) {
      r.then(
        (res) => this.answered(req, res, send, block, start),
        (e: unknown) => this.failed(req, e, send, block, start),
      );
      return;
    }
    this.answered(req, r, send, block, start);
  }

  private answered(req: Request, res: Response, send: Send, b: RoutedBlock, start: number): void {
    const client = req.client;
    req.settle();
    if (res.dropped || client.gone === true) {
      // Nothing to send: `acl`'s drop, or a TCP client that left while its answer was worked out.
      send(null, client);
      this.done();
      return;
    }
    const out = finalizeReply(req, res);
    send(out, client);
    if (res.more !== null && client.sendMore) for (const m of res.more) client.sendMore(m);
    if (start >= 0 && b.stats) this.count(b.stats, req, out, res.plugin, start);
    // A cache miss's answer, stored: its next repeat need not come back to JS (the client checks the views).
    if (res.fastRepeat !== null && client.keep !== undefined && b.fast === true) keepRepeat(req, res.fastRepeat, b);
    this.done();
  }

  private failed(req: Request, e: unknown, send: Send, b: RoutedBlock, start: number): void {
    req.settle();
    this.panic(req, e);
    const out = bareReply(req, Rcode.SERVFAIL);
    send(out, req.client);
    if (start >= 0 && b.stats) this.count(b.stats, req, out, '', start);
    this.done();
  }

  private count(stats: ZoneStats, req: Request, out: Buffer, plugin: string, start: number): void {
    const rcode = out.length >= 4 ? out[3]! & 0xf : 0;
    stats.record(
      req.client.proto === 'udp' ? 0 : 1,
      req.client.family,
      req.qtype,
      req.do,
      req.raw.length,
      out.length,
      rcode,
      plugin,
      (performance.now() - start) / 1000,
    );
    if (this.names.enabled) this.names.record(req.name, rcode);
  }

  private panic(req: Request, e: unknown): void {
    this.stats.panics++;
    log.error(`plugin failed on ${req.qname}: ${(e as Error)?.stack ?? String(e)}`);
  }

  private done(): void {
    this.inflight--;
    if (this.inflight === 0 && this.idleWaiters.length) {
      const w = this.idleWaiters;
      this.idleWaiters = [];
      for (const f of w) f();
    }
  }

  /** Resolves when no query is in flight (or after `timeoutMs`). */
  drained(timeoutMs: number): Promise<void> {
    if (this.inflight === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const t = setTimeout(resolve, timeoutMs);
      this.idleWaiters.push(() => {
        clearTimeout(t);
        resolve();
      });
    });
  }
}

/** FORMERR/NOTIMP for a message whose header is readable but that is not a usable query. */
export function headerOnlyReply(buf: Buffer, rcode: number, at = 0): Buffer {
  const out = Buffer.alloc(12);
  out.writeUInt16BE(buf.readUInt16BE(at), 0);
  const flags = buf.readUInt16BE(at + 2);
  out.writeUInt16BE(0x8000 | (flags & 0x7900) | (rcode & 0xf), 2);
  return out;
}

/**
 * Offers the native table `rep`, the hit a cache would now give `req` (Response.fastRepeat),
 * written as a reply to it exactly as the hit's own would be.
 */
function keepRepeat(req: Request, rep: Response, block: RoutedBlock): void {
  req.client.keep!(req, rep, finalizeReply(req, rep), block.stats);
}
