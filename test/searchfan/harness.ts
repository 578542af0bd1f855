// Runs a searchfan instance in the test process (real sockets to FakeUpstreams on loopback),
// so tests can look at its cache, flights and counters; e2e tests use the real binary.

import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseCorefile } from '../../src/corefile/parser.js';
import { Rcode } from '../../src/dns/constants.js';
import { decodeMessage, type Message } from '../../src/dns/message.js';
import { parseQuery } from '../../src/dns/query.js';
import { SearchFan } from '../../src/plugins/searchfan/handler.js';
import { parseSearchFan } from '../../src/plugins/searchfan/setup.js';
import { finalizeReply } from '../../src/server/reply.js';
import { Request, Response, type ClientInfo } from '../../src/server/request.js';
import { buildQuery, type QueryOptions } from '../helpers/dns.js';

export interface Asked {
  res: Response;
  msg: Message;
  wire: Buffer;
  ms: number;
}

export interface FanHarness {
  fan: SearchFan;
  ask(name: string, type: number, o?: QueryOptions): Promise<Asked>;
  stop(): void;
}

/** Each harness gets a server label of its own, so its counters start at zero. */
let harnesses = 0;

const CLIENT: ClientInfo = {
  proto: 'udp',
  remoteAddress: '127.0.0.1',
  remotePort: 40000,
  family: 1,
  localAddress: '127.0.0.1',
  localPort: 53,
};

/** A searchfan from `searchfan ...` Corefile text (a relative resolv.conf is read from `dir`). */
export function searchfan(line: string, dir = mkdtempSync(join(tmpdir(), 'clusterdns-fan-'))): FanHarness {
  const corefile = join(dir, 'Corefile');
  const d = parseCorefile(`. {\n${line}\n}\n`, corefile)[0]!.directives[0]!;
  const server = `dns://:${++harnesses}`;
  const fan = new SearchFan(parseSearchFan(d, corefile), server);
  fan.start();
  return {
    fan,
    async ask(name, type, o = {}) {
      const raw = buildQuery(name, type, o);
      const q = parseQuery(raw);
      if (typeof q === 'number') throw new Error('bad query');
      const req = new Request(raw, q, o.tcp ? { ...CLIENT, proto: 'tcp' } : CLIENT);
      req.server = server;
      const t0 = performance.now();
      const res = await fan.serveDNS(req, () => Response.rcode(Rcode.SERVFAIL, 'next'));
      const ms = performance.now() - t0;
      const wire = finalizeReply(req, res);
      return { res, msg: decodeMessage(wire), wire, ms };
    },
    stop: () => fan.stop(),
  };
}
