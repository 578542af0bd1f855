// Loop detection as CoreDNS does it: at start-up, ask our own listen address for
// `<random>.<random>.<zone>` HINFO. The query runs through this block's chain; if a
// forwarder sends it back to us, we see it again and again. More than twice is a loop:
// log FATAL and exit, so the orchestrator restarts us (CrashLoopBackOff in Kubernetes).

import cluster from 'node:cluster';
import dgram from 'node:dgram';
import { randomBytes } from 'node:crypto';
import { shardOf, workerShard } from '../../server/shards.js';
import { QClass, QType } from '../../dns/constants.js';
import { isSubdomain } from '../../dns/name.js';
import { emptyMessage, encodeMessage } from '../../dns/message.js';
import type { Handler, HandlerResult, Next, Request } from '../../server/request.js';
import type { Logger } from '../../log.js';

/** How long the probe keeps trying to reach our own listener. */
export const PROBE_WINDOW_MS = 30_000;
/** Pause between probe attempts, and how long one waits for its answer (dns.Exchange's 2 s). */
const RETRY_MS = 1000;
const EXCHANGE_TIMEOUT_MS = 2000;
/** First attempt: the listeners bind right after start-up hooks return. */
const FIRST_PROBE_MS = 100;

/** A random non-negative 63-bit integer in decimal, like Go's rand.Int(). */
function randomLabel(): string {
  return (randomBytes(8).readBigUInt64BE() >> 1n).toString();
}

/** `<rand>.<rand>.<zone>` as CoreDNS's qname(). */
export function probeName(zone: string): string {
  return zone === '.' ? `${randomLabel()}.${randomLabel()}.` : `${randomLabel()}.${randomLabel()}.${zone}`;
}

/** What happens on a detected loop; replaceable in tests. */
export type LoopExit = (message: string) => void;

/** Logs FATAL and ends the process with status 1 (telling a cluster primary first). */
export function fatalExit(log: Logger): LoopExit {
  return (message) => {
    log.fatal(message);
    if (cluster.isWorker && process.send) {
      process.send({ type: 'fatal', message: `plugin/loop: ${message}` }, () => process.exit(1));
      setTimeout(() => process.exit(1), 500).unref();
      return;
    }
    process.exit(1);
  };
}

/**
 * With several workers each question name belongs to one of them (shards.ts): a worker's probe
 * must come back to that worker to be counted, so it takes a name its own shard owns.
 */
function ownProbeName(zone: string): string {
  const shard = workerShard();
  let name = probeName(zone);
  for (let i = 0; shard !== null && i < 1000; i++, name = probeName(zone)) {
    const m = emptyMessage(0);
    m.questions.push({ name, type: QType.HINFO, class: QClass.IN });
    if (shardOf(encodeMessage(m), shard.count) === shard.index) break;
  }
  return name;
}

export class LoopHandler implements Handler {
  readonly name = 'loop';
  readonly qname: string;
  /** Times our probe was seen. */
  seen = 0;
  disabled = false;
  /** The address probed, as CoreDNS prints it: ":53" when listening everywhere. */
  address = '';
  private timer: NodeJS.Timeout | null = null;
  private sock: dgram.Socket | null = null;
  private stopped = false;

  constructor(
    readonly zone: string,
    private readonly exit: LoopExit,
    /** The server's probe names (services.ts), which its cache lets through. */
    private readonly selfProbes: Set<string> = new Set(),
  ) {
    this.qname = ownProbeName(zone);
  }

  /** Probing is over: the probe name is an ordinary name again. */
  private disable(): void {
    this.disabled = true;
    this.selfProbes.delete(this.qname);
  }

  serveDNS(req: Request, next: Next): HandlerResult {
    if (this.disabled || req.qtype !== QType.HINFO || !isSubdomain(req.name, this.zone)) return next(req);
    // Each probe must be seen here: a repeat answered natively would hide a loop.
    req.noFast();
    if (req.name === this.qname) this.seen++;
    if (this.seen > 2) {
      const from = req.client.remoteAddress.includes(':')
        ? `[${req.client.remoteAddress}]:${req.client.remotePort}`
        : `${req.client.remoteAddress}:${req.client.remotePort}`;
      this.disable();
      this.exit(
        `Loop (${from} -> ${this.address}) detected for zone "${this.zone}", see https://coredns.io/plugins/loop#troubleshooting. Query: "HINFO ${this.qname}"`,
      );
    }
    return next(req);
  }

  /**
   * Starts probing `host`:`port` in the background: retried every second for up to 30 s
   * until one exchange gets any answer, after which the plugin turns itself off.
   */
  start(host: string, port: number, printedHost: string): void {
    this.address = `${printedHost.includes(':') ? `[${printedHost}]` : printedHost}:${port}`;
    // Registered only while probing: a configuration set up and never started leaves nothing behind.
    this.selfProbes.add(this.qname);
    const deadline = Date.now() + PROBE_WINDOW_MS;
    const attempt = (): void => {
      this.timer = null;
      if (this.stopped || this.disabled) return;
      if (Date.now() >= deadline) {
        this.disable();
        return;
      }
      this.exchange(host, port, (ok) => {
        if (this.stopped) return;
        if (ok) {
          this.disable();
          return;
        }
        this.seen = 0;
        this.timer = setTimeout(attempt, RETRY_MS);
      });
    };
    this.timer = setTimeout(attempt, FIRST_PROBE_MS);
  }

  /** One HINFO query to ourselves; `done(true)` on any answer with our ID. */
  private exchange(host: string, port: number, done: (ok: boolean) => void): void {
    const m = emptyMessage(randomBytes(2).readUInt16BE());
    m.rd = true;
    m.questions.push({ name: this.qname, type: QType.HINFO, class: QClass.IN });
    const q = encodeMessage(m);
    const sock = dgram.createSocket(host.includes(':') ? 'udp6' : 'udp4');
    this.sock = sock;
    let finished = false;
    const finish = (ok: boolean): void => {
      if (finished) return;
      finished = true;
      clearTimeout(t);
      this.sock = null;
      try {
        sock.close();
      } catch {
        // Already closed.
      }
      done(ok);
    };
    const t = setTimeout(() => finish(false), EXCHANGE_TIMEOUT_MS);
    sock.on('error', () => finish(false));
    sock.on('message', (msg) => {
      if (msg.length >= 12 && msg.readUInt16BE(0) === m.id) finish(true);
    });
    sock.connect(port, host, () => sock.send(q));
  }

  stop(): void {
    this.stopped = true;
    this.selfProbes.delete(this.qname);
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    try {
      this.sock?.close();
    } catch {
      // Already closed.
    }
    this.sock = null;
  }
}
