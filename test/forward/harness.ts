// Runs forward instances in the test process (real sockets to real upstreams on loopback)
// so tests can look at metrics and connection counts; e2e tests use the real binary.

import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseCorefile } from '../../src/corefile/parser.js';
import { decodeMessage, type Message } from '../../src/dns/message.js';
import { parseQuery } from '../../src/dns/query.js';
import { Rcode } from '../../src/dns/constants.js';
import type { Forward } from '../../src/plugins/forward/handler.js';
import { ForwardMetrics } from '../../src/plugins/forward/metrics.js';
import { buildForward, parseForward } from '../../src/plugins/forward/setup.js';
import { bareReply, finalizeReply } from '../../src/server/reply.js';
import { Request, Response, type ClientInfo, type HandlerResult, type Next } from '../../src/server/request.js';
import { buildQuery, type QueryOptions } from '../helpers/dns.js';

export interface Asked {
  res: Response;
  /** What the client would receive. */
  wire: Buffer;
  msg: Message;
  ms: number;
  /** The query as the client sent it. */
  raw: Buffer;
}

export interface Harness {
  forwards: Forward[];
  ask(name: string, type: number, o?: QueryOptions & { tcp?: boolean }): Promise<Asked>;
  stop(): void;
}

/** The plugin after the last forward line: answers NOERROR from plugin "next". */
const terminal: Next = (req) => Response.wire(bareReply(req, Rcode.NOERROR), 'next');

/** Forward instances for the `forward` lines of a block body, as the plugin's setup makes them (one server's counters). */
export function buildForwards(body: string, corefile: string, metrics = new ForwardMetrics()): Forward[] {
  const blocks = parseCorefile(`. {\n${body}\n}\n`, corefile);
  const configs = blocks[0]!.directives.filter((d) => d.name === 'forward').map((d) => parseForward(d, corefile));
  return configs.map((c, i) => buildForward(c, i < configs.length - 1, metrics));
}

/** Sets up the `forward` lines in `body` (Corefile block content) as one chain. */
export function forwardChain(
  body: string,
  dir = mkdtempSync(join(tmpdir(), 'clusterdns-fwd-')),
  metrics = new ForwardMetrics(),
): Harness {
  const forwards = buildForwards(body, join(dir, 'Corefile'), metrics);
  let chain: Next = terminal;
  for (let i = forwards.length - 1; i >= 0; i--) {
    const h = forwards[i]!;
    const n = chain;
    chain = (req: Request): HandlerResult => h.serveDNS(req, n);
  }
  return {
    forwards,
    async ask(name, type, o = {}) {
      const raw = buildQuery(name, type, o);
      const q = parseQuery(raw);
      if (typeof q === 'number') throw new Error('bad query');
      const client: ClientInfo = {
        proto: o.tcp ? 'tcp' : 'udp',
        remoteAddress: '127.0.0.1',
        remotePort: 40000,
        family: 1,
        localAddress: '127.0.0.1',
        localPort: 53,
      };
      const req = new Request(raw, q, client);
      const t0 = performance.now();
      const res = await chain(req);
      const ms = performance.now() - t0;
      const wire = finalizeReply(req, res);
      return { res, wire, msg: decodeMessage(wire), ms, raw };
    },
    stop() {
      for (const f of forwards) f.stop();
    },
  };
}
