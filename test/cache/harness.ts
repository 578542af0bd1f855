// In-process test rig for the cache: the project's real listener (UDP and TCP on
// 127.0.0.1) routing to a CacheHandler configured from Corefile text, whose `next` is a
// small test-only forwarder to an upstream DNS server the test controls over UDP.

import dgram from 'node:dgram';
import { parseCorefile } from '../../src/corefile/parser.js';
import {
  decodeMessage,
  emptyMessage,
  encodeMessage,
  type Message,
  type ResourceRecord,
} from '../../src/dns/message.js';
import { QClass, QType, Rcode } from '../../src/dns/constants.js';
import { Dispatcher } from '../../src/server/dispatcher.js';
import { DnsListener, listenerKey } from '../../src/server/listeners.js';
import { Router } from '../../src/server/router.js';
import { Response, type HandlerResult, type Next, type Request } from '../../src/server/request.js';
import { CacheHandler } from '../../src/plugins/cache/handler.js';
import { parseCache } from '../../src/plugins/cache/setup.js';
import { CACHE_METRICS } from '../../src/plugins/cache/metrics.js';
import { ServerServices } from '../../src/server/services.js';

/** Parses `cache ...` (a directive with its block) as it would appear in `example.org { ... }`. */
export function cacheOptionsFrom(directive: string, blockZones = '.') {
  const blocks = parseCorefile(`${blockZones} {\n${directive}\n}\n`, 'Corefile');
  const b = blocks[0]!;
  return parseCache(
    b.directives.filter((d) => d.name === 'cache'),
    b.keys.map((k) => k.zone),
    'dns://:53',
  );
}

export interface Upstream {
  port: number;
  /** Queries received, in order, as "name type" (name as received). */
  log: string[];
  count(name?: string): number;
  /** Replace the answering function. */
  respond: (q: Message) => Message | null;
  delayMs: number;
  close(): Promise<void>;
}

/** A UDP DNS server answering with `respond(query)` after `delayMs`; null means no answer. */
export async function startUpstream(respond: (q: Message) => Message | null, delayMs = 0): Promise<Upstream> {
  const sock = dgram.createSocket('udp4');
  await new Promise<void>((r) => sock.bind(0, '127.0.0.1', () => r()));
  const up: Upstream = {
    port: sock.address().port,
    log: [],
    count(name?: string) {
      return name === undefined
        ? this.log.length
        : this.log.filter((l) => l.split(' ')[0]!.toLowerCase() === name.toLowerCase()).length;
    },
    respond,
    delayMs,
    close: () => new Promise<void>((r) => sock.close(() => r())),
  };
  sock.on('message', (msg, rinfo) => {
    const q = decodeMessage(msg);
    up.log.push(`${q.questions[0]!.name} ${q.questions[0]!.type}`);
    const send = () => {
      const a = up.respond(q);
      if (a === null) return;
      a.id = q.id;
      a.qr = true;
      sock.send(encodeMessage(a), rinfo.port, rinfo.address);
    };
    if (up.delayMs > 0) setTimeout(send, up.delayMs);
    else send();
  });
  return up;
}

/** A test-only forwarder: the query's bytes to the upstream over UDP, its answer back as wire. */
export function forwardTo(port: number, timeoutMs = 2000): Next {
  return (req: Request): HandlerResult =>
    new Promise<Response>((resolve) => {
      const s = dgram.createSocket('udp4');
      const t = setTimeout(() => {
        s.close();
        resolve(Response.rcode(Rcode.SERVFAIL, 'forward', 'timeout'));
      }, timeoutMs);
      s.on('message', (m) => {
        clearTimeout(t);
        s.close();
        resolve(Response.wire(m, 'forward'));
      });
      s.send(req.raw, port, '127.0.0.1');
    });
}

export interface CacheRig {
  port: number;
  handler: CacheHandler;
  close(): Promise<void>;
}

/** The real listener on 127.0.0.1:random with a chain of [cache, next]. */
/** The rigs' server: their caches count into its metrics (rigServices.metrics()). */
export const rigServices = new ServerServices();

export async function startRig(directive: string, next: Next, blockZones = '.'): Promise<CacheRig> {
  const handler = new CacheHandler(cacheOptionsFrom(directive, blockZones), undefined, rigServices.get(CACHE_METRICS));
  handler.start();
  const dispatcher = new Dispatcher();
  const key = listenerKey('127.0.0.1', 0);
  const router = new Router();
  router.add({ zone: '.', serverLabel: 'dns://:53', chain: (req) => handler.serveDNS(req, next) });
  dispatcher.routers.set(key, router);
  // UDP binds a random port and TCP then takes the same number, which another socket
  // may hold already: try again with a new one.
  let l = new DnsListener({ host: '127.0.0.1', port: 0, routerKey: key }, dispatcher);
  for (let attempt = 0; ; attempt++) {
    try {
      await l.start();
      break;
    } catch (e) {
      await l.close();
      if (attempt >= 10 || (e as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw e;
      l = new DnsListener({ host: '127.0.0.1', port: 0, routerKey: key }, dispatcher);
    }
  }
  return {
    port: l.boundPort,
    handler,
    async close() {
      await l.close();
      handler.stop();
    },
  };
}

export function rr(name: string, type: number, ttl: number, data: ResourceRecord['data']): ResourceRecord {
  return { name, type, class: QClass.IN, ttl, data };
}

export function soa(zone: string, ttl: number, minimum: number): ResourceRecord {
  return rr(zone, QType.SOA, ttl, {
    mname: `ns.${zone}`,
    rname: `hostmaster.${zone}`,
    serial: 1,
    refresh: 7200,
    retry: 1800,
    expire: 86400,
    minimum,
  });
}

/** A reply skeleton for the upstream: the question copied, RA set. */
export function answerTo(q: Message, rcode: number = Rcode.NOERROR): Message {
  const m = emptyMessage(q.id);
  m.qr = true;
  m.rd = q.rd;
  m.ra = true;
  m.cd = q.cd;
  m.rcode = rcode;
  m.questions = q.questions.map((x) => ({ ...x }));
  if (q.edns)
    m.edns = {
      udpSize: 1232,
      version: 0,
      do: q.edns.do,
      zflags: 0,
      options: [{ code: 3, data: Buffer.from('upstream-nsid') }],
    };
  return m;
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
