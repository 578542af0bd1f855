// Shared rig for the fast-answers e2e tests: the same Corefile run twice, once with the native
// answer table off (CLUSTERDNS_FAST_ANSWERS=0) and once by default, a raw UDP client that keeps
// reply bytes, and the table's hit counter read from /metrics.
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { decodeMessage } from '../../src/dns/message.js';
import { typeToString } from '../../src/dns/constants.js';
import { buildQuery, sendTcp, type QueryOptions } from '../helpers/dns.js';
import { freePort } from '../helpers/ports.js';
import { childrenOf } from '../helpers/procs.js';
import { retryWhilePortTaken, startServer, type RunningServer, type StartOptions } from '../helpers/server.js';

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export const HITS = 'clusterdns_fast_answers_total';

export interface Mode {
  name: 'off' | 'on';
  s: RunningServer;
  port: number;
  metricsPort: number;
}

export interface Pair {
  off: Mode;
  on: Mode;
  both: [Mode, Mode];
  stop(): Promise<void>;
}

/**
 * Starts `corefile` twice (PORT: the DNS port, METRICS: a free port for `prometheus`), the table
 * off in the first, on (the default) in the second.
 */
export async function startPair(corefile: string, o: Omit<StartOptions, 'corefile'> = {}): Promise<Pair> {
  // A CLUSTERDNS_FAST_ANSWERS in the test's own environment would make both runs alike.
  delete process.env.CLUSTERDNS_FAST_ANSWERS;
  const started = await Promise.allSettled([startMode('off', corefile, o), startMode('on', corefile, o)]);
  if (started[0].status === 'rejected' || started[1].status === 'rejected') {
    // Stop the one that did start, or its process keeps the test file alive until its timeout.
    await Promise.all(started.map((r) => (r.status === 'fulfilled' ? r.value.s.stop() : undefined)));
    throw started[0].status === 'rejected' ? started[0].reason : (started[1] as PromiseRejectedResult).reason;
  }
  const [off, on] = [started[0].value, started[1].value];
  return {
    off,
    on,
    both: [off, on],
    stop: async () => {
      await Promise.all([off.s.stop(), on.s.stop()]);
    },
  };
}

/**
 * Starts `corefile` once (PORT: the DNS port, METRICS: a free port for `prometheus`), the table
 * off (CLUSTERDNS_FAST_ANSWERS=0) or on as configured by the caller's environment.
 */
export function startMode(name: 'off' | 'on', corefile: string, o: Omit<StartOptions, 'corefile'> = {}): Promise<Mode> {
  const env = { ...o.env, ...(name === 'off' ? { CLUSTERDNS_FAST_ANSWERS: '0' } : {}) };
  // The metrics port, like the DNS port, may be taken by a parallel test before the server binds it.
  return retryWhilePortTaken(async () => {
    const metricsPort = await freePort();
    const s = await startServer({ ...o, env, corefile: corefile.replaceAll('METRICS', String(metricsPort)) });
    return { name, s, port: s.port, metricsPort };
  });
}

/** One UDP socket (bound to `host`) sending many queries, replies matched by ID, bytes kept. */
export class Client {
  #sock: dgram.Socket;
  #waiting = new Map<number, (b: Buffer) => void>();
  #nextId = Math.floor(Math.random() * 65536);
  /** Replies whose ID no query waits for (a late one, or one with another asker's ID). */
  #strays: Buffer[] = [];

  private constructor(sock: dgram.Socket) {
    this.#sock = sock;
    sock.on('message', (msg) => {
      if (msg.length < 2) return;
      const w = this.#waiting.get(msg.readUInt16BE(0));
      if (w) {
        this.#waiting.delete(msg.readUInt16BE(0));
        w(msg);
      } else this.#strays.push(msg);
    });
  }

  static async open(host = '127.0.0.1'): Promise<Client> {
    const sock = dgram.createSocket('udp4');
    await new Promise<void>((r) => sock.bind(0, host, () => r()));
    return new Client(sock);
  }

  /** Sends `query` (its ID replaced by a fresh one) to 127.0.0.1:port; the reply's bytes. */
  ask(port: number, query: Buffer, timeoutMs = 3000): Promise<Buffer> {
    let id = 0;
    do {
      id = this.#nextId = (this.#nextId + 1) & 0xffff;
    } while (this.#waiting.has(id));
    const q = Buffer.from(query);
    q.writeUInt16BE(id, 0);
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => {
        this.#waiting.delete(id);
        const stray = this.#strays.at(-1);
        const strays = stray
          ? `; ${this.#strays.length} replies with IDs nobody asked, the last: ${describeReply(stray)}`
          : '';
        reject(new Error(`no UDP reply from :${port} to ${describeQuery(q)} (ID ${id}) in ${timeoutMs} ms${strays}`));
      }, timeoutMs);
      this.#waiting.set(id, (b) => {
        clearTimeout(t);
        resolve(b);
      });
      this.#sock.send(q, port, '127.0.0.1');
    });
  }

  close(): void {
    this.#sock.close();
  }
}

/** The same question over TCP (never answered by the UDP table): what the JS path answers now. */
export async function askTcp(port: number, query: Buffer): Promise<Buffer> {
  return (await sendTcp(port, [query], 3000))[0]!;
}

export function q(name: string, type: number, o: QueryOptions = {}): Buffer {
  return buildQuery(name, type, { id: 0, ...o });
}

export function describeQuery(b: Buffer): string {
  try {
    const m = decodeMessage(b);
    const qq = m.questions[0];
    return `${qq?.name} ${qq ? typeToString(qq.type) : '?'} rd=${m.rd} edns=${m.edns ? `${m.edns.udpSize}${m.edns.do ? '+DO' : ''}` : 'none'}`;
  } catch {
    return b.toString('hex');
  }
}

/** The reply as short text, for failure messages. */
export function describeReply(b: Buffer): string {
  try {
    const m = decodeMessage(b);
    const rr = (r: { name: string; type: number; ttl: number; data: unknown }) =>
      `${r.name} ${r.ttl} ${typeToString(r.type)} ${JSON.stringify(r.data)}`;
    return (
      `rcode=${m.rcode} tc=${m.tc} aa=${m.aa} rd=${m.rd} ra=${m.ra} q=${m.questions.map((x) => x.name).join()} ` +
      `an=[${m.answers.map(rr).join('; ')}] ns=[${m.authorities.map(rr).join('; ')}] edns=${m.edns ? JSON.stringify(m.edns) : 'none'}`
    );
  } catch (e) {
    return `undecodable (${(e as Error).message})`;
  }
}

/** A reply without its ID, in hex: what must be equal with the table on and off. */
export const body = (b: Buffer) => b.subarray(2).toString('hex');

export async function scrape(metricsPort: number): Promise<string> {
  return (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
}

export function sumOf(text: string, name: string, labelFilter = ''): number {
  let sum = 0;
  for (const line of text.split('\n'))
    if ((line.startsWith(name + '{') || line.startsWith(name + ' ')) && line.includes(labelFilter))
      sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  return sum;
}

let built: boolean | undefined;
/** Whether the built tree names the hit counter: the table exists in this build. */
function tableInBuild(): boolean {
  if (built !== undefined) return built;
  const walk = (dir: string): boolean => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, e.name);
      if (e.isDirectory() ? walk(p) : e.name.endsWith('.js') && readFileSync(p, 'utf8').includes(HITS)) return true;
    }
    return false;
  };
  built = walk('dist/src');
  return built;
}

/**
 * Hits answered by the table, or null when this build has no table (no `clusterdns_fast_answers_total`
 * family on /metrics and none in the built code: today's main).
 */
export async function fastHits(m: Mode): Promise<number | null> {
  const text = await scrape(m.metricsPort);
  const family = text.split('\n').some((l) => l.startsWith(HITS) || l.startsWith(`# TYPE ${HITS} `));
  if (!family && !tableInBuild()) return null;
  return sumOf(text, HITS);
}

/** With the table built, the default run answered at least `min` queries from it; the off run none. */
export async function assertTableUsed(pair: Pair, min = 1): Promise<void> {
  const on = await fastHits(pair.on);
  if (on === null) return;
  // Hits may be folded into the counters a moment after they happen.
  const end = Date.now() + 2000;
  let n = on;
  while (n < min && Date.now() < end) {
    await sleep(50);
    n = (await fastHits(pair.on)) ?? 0;
  }
  assert.ok(n >= min, `the table answered ${n} queries (expected at least ${min}) with CLUSTERDNS_FAST_ANSWERS unset`);
  assert.equal(await fastHits(pair.off), 0, 'CLUSTERDNS_FAST_ANSWERS=0 still answered from the table');
}

/** Resident memory (kB) of the server and its worker processes. */
export function rssKb(pid: number): number {
  let sum = 0;
  for (const p of [pid, ...childrenOf(pid)]) {
    try {
      const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${p}/status`, 'utf8'));
      sum += Number(m?.[1] ?? 0);
    } catch {
      /* gone */
    }
  }
  return sum;
}
