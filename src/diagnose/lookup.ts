// One candidate name asked the way glibc's res_send does it (resolv/res_send.c): `attempts`
// rounds over the nameservers (from a random one with `rotate`), each try with glibc's
// timeout (`timeout` for the first server, (timeout << i) / nservers for server i), A and
// AAAA together on one socket unless single-request, TCP after a truncated reply or with
// use-vc, and SERVFAIL, NOTIMP or REFUSED passed on to the next server.
// Then the candidate's outcome is decided as __res_context_query does for the pair.

import { randomInt } from 'node:crypto';
import { Rcode } from '../dns/constants.js';
import type { Message } from '../dns/message.js';
import {
  buildWireQuery,
  exchangeTcp,
  exchangeUdp,
  type ExchangeOutcome,
  type QueryFlags,
  type ServerAddress,
  type Transport,
  type UdpMode,
} from './transport.js';

export interface LookupSettings extends QueryFlags {
  servers: ServerAddress[];
  /** First try's timeout in ms (resolv.conf `timeout` × 1000, or --timeout). */
  timeoutMs: number;
  attempts: number;
  rotate: boolean;
  udpMode: UdpMode;
  useVc: boolean;
}

/** What happened on the wire for one query type in one try. */
export interface Try {
  server: string;
  transport: Transport;
  result: 'reply' | 'truncated' | 'timeout' | 'refused' | 'error';
  rcode?: number;
  latencyMs: number;
  error?: string;
}

export interface TypeResult {
  qtype: number;
  /** The reply the resolver ends up using, if any arrived (possibly a SERVFAIL). */
  reply: Message | null;
  server?: string;
  transport?: Transport;
  latencyMs?: number;
  /** Without a reply: why. */
  failure?: 'timeout' | 'refused' | 'error';
  error?: string;
  tries: Try[];
}

/** How glibc classifies the candidate (h_errno in words); `answered` ends the search. */
export type CandidateOutcome =
  'answered' | 'nxdomain' | 'nodata' | 'servfail' | 'rejected' | 'timeout' | 'unreachable' | 'invalid' | 'error';

export interface CandidateResult {
  outcome: CandidateOutcome;
  types: TypeResult[];
  /** One of A/AAAA answered while the other was lost: glibc then retried in single-request mode. */
  partialLoss: boolean;
}

/** glibc's per-server timeout: RES_TIMEOUT for the first, (timeout << i) / nscount after, at least 1 s (or 1 ms when set in ms). */
export function tryTimeoutMs(timeoutMs: number, serverIndex: number, nservers: number, floorMs = 1000): number {
  let t = timeoutMs * 2 ** serverIndex;
  if (serverIndex > 0) t = Math.floor(t / nservers);
  return Math.max(t, floorMs);
}

const PASS_ON: ReadonlySet<number> = new Set([Rcode.SERVFAIL, Rcode.NOTIMP, Rcode.REFUSED]);

export async function lookupCandidate(
  name: string,
  qtypes: number[],
  s: LookupSettings,
  timeoutFloorMs = 1000,
): Promise<CandidateResult> {
  const types: TypeResult[] = qtypes.map((qtype) => ({ qtype, reply: null, tries: [] }));
  const open = new Set(types);
  const n = s.servers.length;
  const offset = s.rotate && n > 1 ? randomInt(0, n) : 0;
  let partialLoss = false;
  for (let attempt = 0; attempt < s.attempts && open.size > 0; attempt++) {
    for (let shift = 0; shift < n && open.size > 0; shift++) {
      const index = (shift + offset) % n;
      const server = s.servers[index]!;
      const timeoutMs = tryTimeoutMs(s.timeoutMs, index, n, timeoutFloorMs);
      const asking = [...open];
      for (;;) {
        const lost = await tryServer(name, asking, server, timeoutMs, s, open);
        const replied = asking.filter((t) => !lost.includes(t) && t.tries.at(-1)?.result === 'reply');
        if (s.useVc || lost.length === 0 || replied.length === 0) break;
        // One of the pair answered, the other lost: glibc blames the server or a firewall for the
        // two outstanding queries and asks both again, one after the other (single-request), then
        // on a new socket each (single-request-reopen), and keeps that mode for later lookups.
        // When even that loses one, it returns what it has.
        partialLoss = true;
        if (s.udpMode === 'parallel') s.udpMode = 'sequential';
        else if (s.udpMode === 'sequential') s.udpMode = 'reopen';
        else {
          for (const t of lost) open.delete(t);
          break;
        }
      }
    }
  }
  for (const t of types) settle(t);
  return { outcome: classify(types), types, partialLoss };
}

/** One try of the open types against one server; returns the types whose query timed out. */
async function tryServer(
  name: string,
  asking: TypeResult[],
  server: ServerAddress,
  timeoutMs: number,
  s: LookupSettings,
  open: Set<TypeResult>,
): Promise<TypeResult[]> {
  const taken = new Set<number>();
  const queries = asking.map((t) => {
    const q = buildWireQuery(name, t.qtype, s, taken);
    taken.add(q.id);
    return q;
  });
  const transport: Transport = s.useVc ? 'tcp' : 'udp';
  const outcomes =
    transport === 'tcp'
      ? await exchangeTcp(server, queries, timeoutMs)
      : await exchangeUdp(server, queries, timeoutMs, s.udpMode);
  const truncated: number[] = [];
  const lost: TypeResult[] = [];
  outcomes.forEach((o, i) => {
    if (o.kind === 'reply' && o.message.tc && transport === 'udp') truncated.push(i);
    else {
      record(asking[i]!, server, transport, o, open);
      if (o.kind === 'timeout') lost.push(asking[i]!);
    }
  });
  if (truncated.length > 0) {
    // glibc asks again over TCP, on the same server, at once.
    for (const i of truncated) {
      const o = outcomes[i]!;
      asking[i]!.tries.push({
        server: server.label,
        transport: 'udp',
        result: 'truncated',
        rcode: o.kind === 'reply' ? o.message.rcode : undefined,
        latencyMs: o.latencyMs,
      });
    }
    const again = truncated.map((i) => buildWireQuery(name, asking[i]!.qtype, s, taken));
    const tcp = await exchangeTcp(server, again, timeoutMs);
    tcp.forEach((o, j) => record(asking[truncated[j]!]!, server, 'tcp', o, open));
  }
  return lost;
}

function record(
  t: TypeResult,
  server: ServerAddress,
  transport: Transport,
  o: ExchangeOutcome,
  open: Set<TypeResult>,
): void {
  if (o.kind === 'reply') {
    t.tries.push({ server: server.label, transport, result: 'reply', rcode: o.message.rcode, latencyMs: o.latencyMs });
    t.reply = o.message;
    t.server = server.label;
    t.transport = transport;
    t.latencyMs = o.latencyMs;
    // SERVFAIL, NOTIMP and REFUSED: glibc asks the next server (and the next round).
    if (!PASS_ON.has(o.message.rcode)) open.delete(t);
    return;
  }
  const tr: Try = { server: server.label, transport, result: o.kind, latencyMs: o.latencyMs };
  if (o.kind === 'refused' || o.kind === 'error') tr.error = o.error;
  t.tries.push(tr);
}

/** Without a reply: timeout once any try timed out (glibc's ETIMEDOUT), refused when every try was, else error. */
function settle(t: TypeResult): void {
  if (t.reply) return;
  const last = t.tries[t.tries.length - 1];
  if (last) {
    t.server = last.server;
    t.transport = last.transport;
  }
  if (t.tries.some((x) => x.result === 'timeout')) t.failure = 'timeout';
  else if (t.tries.length > 0 && t.tries.every((x) => x.result === 'refused')) t.failure = 'refused';
  else t.failure = 'error';
  t.error = t.failure === 'timeout' ? undefined : (last?.error ?? 'no query was sent');
}

function answered(m: Message | null): boolean {
  return m !== null && m.rcode === Rcode.NOERROR && m.answers.length > 0;
}

/** __res_context_query's reading of the (A, AAAA) pair: any answer wins, else the first non-NOERROR rcode. */
export function classify(types: TypeResult[]): CandidateOutcome {
  if (types.some((t) => answered(t.reply))) return 'answered';
  const replies = types.filter((t) => t.reply !== null).map((t) => t.reply!);
  if (replies.length === 0) {
    if (types.some((t) => t.failure === 'timeout')) return 'timeout';
    // Nothing sent at all (attempts:0) is no evidence that nothing listens.
    if (types.every((t) => t.tries.length === 0)) return 'error';
    if (types.every((t) => t.failure === 'refused' || t.tries.length === 0)) return 'unreachable';
    return 'error';
  }
  const first = replies[0]!;
  const rcode = first.rcode === Rcode.NOERROR && replies[1] ? replies[1].rcode : first.rcode;
  switch (rcode) {
    case Rcode.NXDOMAIN:
      return 'nxdomain';
    case Rcode.SERVFAIL:
      return 'servfail';
    case Rcode.NOERROR:
      return 'nodata';
    default:
      return 'rejected';
  }
}
