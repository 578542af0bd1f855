// One upstream server: its transports (a UDP socket pool, TCP and TLS connection pools)
// and its health. As in CoreDNS, health is only checked after a query to it failed: a
// `. IN NS` check runs at once and then every `health_check` interval until one succeeds;
// after more than `max_fails` failed checks in a row the upstream is down.

import type tls from 'node:tls';
import { emptyMessage, encodeMessage } from '../../dns/message.js';
import { QClass, QType } from '../../dns/constants.js';
import {
  joinHostPort,
  OutstandingQuery,
  type Outstanding,
  type PendingTry,
  type UpstreamProto,
} from '../../upstream/exchange.js';
import type { ForwardMetrics, UpstreamStats } from './metrics.js';
import { StreamConn, StreamPool } from '../../upstream/stream.js';
import { UdpChannel, UdpPool } from '../../upstream/udp.js';

/** Where and how to reach an upstream, as parsed from a TO. */
export interface UpstreamAddress {
  host: string;
  port: number;
  /** DNS over TLS (`tls://`); its settings come from the forward block. */
  tls: boolean;
  /** Per-upstream server name from `tls://IP%NAME`. */
  serverName?: string;
}

export interface HealthCheckSettings {
  intervalMs: number;
  /** RD bit of the check query (`no_rec` clears it). */
  recursionDesired: boolean;
  /** Name asked (`domain`), "." by default. */
  domain: string;
  /** Wait for a check's answer: CoreDNS's 1 s, or read_timeout when that is shorter. */
  timeoutMs: number;
  /** Use TCP for checks of plain-DNS upstreams (`force_tcp`). */
  overTcp: boolean;
}

export interface TransportSettings {
  expireMs: number;
  maxIdleConns: number;
  /** TLS client settings for `tls://` upstreams (CA, client cert, server name). */
  tls: tls.ConnectionOptions | null;
}

/** A health check in flight: an Outstanding whose answer (any answer) means healthy. */
class HealthProbe extends OutstandingQuery {
  constructor(
    private readonly upstream: Upstream,
    settings: HealthCheckSettings,
  ) {
    const m = emptyMessage(0);
    m.rd = settings.recursionDesired;
    m.questions.push({ name: settings.domain, type: QType.NS, class: QClass.IN });
    const wire = encodeMessage(m);
    super(wire, wire.length);
  }

  onAnswer(): void {
    this.upstream.checkPassed();
  }

  onMismatch(): void {
    // A reply is a reply: the upstream is alive.
    this.upstream.checkPassed();
  }

  onFailure(): void {
    this.upstream.checkFailed();
  }
}

export class Upstream {
  /** "127.0.0.1:53": the `to` label and what errors name. */
  readonly addr: string;
  readonly host: string;
  readonly port: number;
  readonly isTls: boolean;
  readonly stats: UpstreamStats;
  /** Failed health checks in a row. */
  fails = 0;
  private readonly udp: UdpPool | null;
  private readonly tcp: StreamPool | null;
  private readonly dot: StreamPool | null;
  private readonly probe: HealthProbe;
  private readonly dotOptions: tls.ConnectionOptions | null;
  private checking = false;
  private stopped = false;
  private hcTimer: NodeJS.Timeout | null = null;

  constructor(
    address: UpstreamAddress,
    transport: TransportSettings,
    private readonly health: HealthCheckSettings,
    /** The server's forward counters: this address's are shared by its forward lines. */
    metrics: ForwardMetrics,
  ) {
    this.host = address.host;
    this.port = address.port;
    this.addr = joinHostPort(address.host, address.port);
    this.isTls = address.tls;
    this.stats = metrics.upstreamStats(this.addr);
    const poolOpts = { expireMs: transport.expireMs, maxIdle: transport.maxIdleConns };
    if (address.tls) {
      const t: tls.ConnectionOptions = { ...(transport.tls ?? {}), minVersion: 'TLSv1.2' };
      if (address.serverName) t.servername = address.serverName;
      this.dotOptions = t;
      this.dot = new StreamPool({ host: this.host, port: this.port, tls: t }, poolOpts, this.stats);
      this.udp = null;
      this.tcp = null;
    } else {
      this.dotOptions = null;
      this.dot = null;
      this.udp = new UdpPool(this.host, this.port, this.stats);
      this.tcp = new StreamPool({ host: this.host, port: this.port, tls: null }, poolOpts, this.stats);
    }
    this.probe = new HealthProbe(this, health);
  }

  /** Sends one try of `o` over `proto` (TLS upstreams always use their TLS pool); returns where it waits. */
  send(o: Outstanding, proto: UpstreamProto, timeoutMs: number): PendingTry {
    this.stats.requests++;
    if (this.dot !== null) return this.dot.send(o, timeoutMs);
    if (proto === 'udp') return this.udp!.send(o, timeoutMs);
    return this.tcp!.send(o, timeoutMs);
  }

  /** The protocol a try uses: TLS upstreams always TLS. */
  protoFor(wanted: 'udp' | 'tcp'): UpstreamProto {
    return this.isTls ? 'tcp-tls' : wanted;
  }

  /** Down: more failed checks in a row than max_fails (never, when max_fails is 0). */
  down(maxFails: number): boolean {
    return maxFails !== 0 && this.fails > maxFails;
  }

  /** Starts checking this upstream unless a check loop already runs. */
  healthcheck(): void {
    if (this.checking || this.stopped) return;
    this.checking = true;
    this.runCheck();
  }

  private readonly runCheck = (): void => {
    this.hcTimer = null;
    if (this.stopped) return;
    // Each check uses a connection of its own, as CoreDNS's health checker does.
    if (this.isTls) {
      const c = new StreamConn({ host: this.host, port: this.port, tls: this.dotOptions }, null, undefined);
      c.send(this.probe, this.health.timeoutMs);
      c.retire();
    } else if (this.health.overTcp) {
      const c = new StreamConn({ host: this.host, port: this.port, tls: null }, null, undefined);
      c.send(this.probe, this.health.timeoutMs);
      c.retire();
    } else {
      const c = new UdpChannel(this.host, this.port);
      c.send(this.probe, this.health.timeoutMs);
      c.retire();
    }
  };

  /** Called by the probe: the upstream answered. */
  checkPassed(): void {
    this.fails = 0;
    this.checking = false;
  }

  /** Called by the probe: no answer. Checks again after the interval. */
  checkFailed(): void {
    this.stats.healthcheckFailures++;
    this.fails++;
    if (this.stopped) {
      this.checking = false;
      return;
    }
    this.hcTimer = setTimeout(this.runCheck, this.health.intervalMs);
    this.hcTimer.unref();
  }

  /** TCP/TLS connections open now (for tests). */
  get openConnections(): number {
    return (this.tcp?.size ?? 0) + (this.dot?.size ?? 0);
  }

  stop(): void {
    this.stopped = true;
    if (this.hcTimer) clearTimeout(this.hcTimer);
    this.hcTimer = null;
    this.udp?.close();
    this.tcp?.close();
    this.dot?.close();
  }
}
