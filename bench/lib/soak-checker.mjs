// The soak's own client: A queries for sampled names at a fixed rate over UDP, alongside
// dnsperf. It records each query's latency (dnsperf reports only an average) and checks each
// answer against the API state (SoakCluster's history), allowing for changes in flight: an
// answer is right when it matches a value the name had between `lagMs` before the query was
// sent and the moment the answer came back. Decoding uses dns-packet, not the codec under test.

import dgram from 'node:dgram';
import dnsPacket from 'dns-packet';

export class SoakChecker {
  /**
   * @param {{ port: number, cluster: import('./soak-cluster.mjs').SoakCluster, qps?: number,
   *   timeoutMs?: number, lagMs?: number, windowMs?: number }} o
   */
  constructor({ port, cluster, qps = 100, timeoutMs = 2000, lagMs = 2000, windowMs = 10_000 }) {
    this.port = port;
    this.cluster = cluster;
    this.qps = qps;
    this.timeoutMs = timeoutMs;
    this.lagMs = lagMs;
    this.windowMs = windowMs;
    this.outstanding = new Map(); // id -> { fqdn, t0 }
    this.nextId = 1;
    this.sent = 0;
    this.answered = 0;
    this.lost = 0;
    this.right = 0;
    this.wrong = 0;
    this.servfail = 0;
    this.otherRcode = 0;
    /** Right answers that were already replaced when the query was sent (within lagMs). */
    this.late = 0;
    this.maxStalenessMs = 0;
    this.wrongSamples = [];
    /** [{ startMs, latencies: number[] }], one per window. */
    this.windows = [];
    this.latencies = [];
    this.sock = null;
    this.timer = null;
    this.sweeper = null;
    this.startedAt = 0;
  }

  async start() {
    this.sock = dgram.createSocket('udp4');
    this.sock.on('message', (msg) => this.#onReply(msg));
    this.sock.on('error', () => {});
    await new Promise((r) => this.sock.bind(0, '127.0.0.1', r));
    this.startedAt = performance.now();
    // A tick every 10 ms sends what the rate owes so far: a fixed rate, not a closed loop.
    let owed = 0;
    let last = performance.now();
    this.timer = setInterval(() => {
      const now = performance.now();
      owed += ((now - last) / 1000) * this.qps;
      last = now;
      while (owed >= 1) {
        this.#send();
        owed--;
      }
    }, 10);
    this.sweeper = setInterval(() => this.#expire(performance.now()), 100);
  }

  #window(now) {
    const idx = Math.floor((now - this.startedAt) / this.windowMs);
    while (this.windows.length <= idx)
      this.windows.push({ startMs: this.windows.length * this.windowMs, latencies: [], lost: 0 });
    return this.windows[idx];
  }

  #send() {
    const names = this.cluster.names;
    const fqdn = names[Math.floor(Math.random() * names.length)];
    let id = this.nextId;
    // Skip IDs still in flight (65,535 of them is more than 2 s of any rate we use).
    while (this.outstanding.has(id)) id = (id % 65535) + 1;
    this.nextId = (id % 65535) + 1;
    const q = dnsPacket.encode({
      type: 'query',
      id,
      flags: dnsPacket.RECURSION_DESIRED,
      questions: [{ type: 'A', name: fqdn.slice(0, -1) }],
    });
    const t0 = performance.now();
    this.outstanding.set(id, { fqdn, t0 });
    this.sent++;
    this.sock.send(q, this.port, '127.0.0.1');
  }

  #expire(now) {
    for (const [id, q] of this.outstanding) {
      if (now - q.t0 < this.timeoutMs) continue;
      this.outstanding.delete(id);
      this.lost++;
      this.#window(q.t0).lost++;
    }
  }

  #onReply(msg) {
    const t1 = performance.now();
    let p;
    try {
      p = dnsPacket.decode(msg);
    } catch {
      return; // counted as lost when it times out
    }
    const q = this.outstanding.get(p.id);
    if (!q || p.questions?.[0]?.name?.toLowerCase() !== q.fqdn.slice(0, -1)) return;
    this.outstanding.delete(p.id);
    this.answered++;
    const ms = t1 - q.t0;
    this.latencies.push(ms);
    this.#window(q.t0).latencies.push(ms);
    if (p.rcode === 'SERVFAIL') {
      this.servfail++;
      this.#noteWrong(q, 'SERVFAIL', t1);
      return;
    }
    let value;
    if (p.rcode === 'NXDOMAIN') value = null;
    else if (p.rcode === 'NOERROR') {
      const a = (p.answers ?? []).filter((r) => r.type === 'A').map((r) => r.data);
      value = a.length === 1 ? a[0] : `records: ${a.join(',') || 'none'}`;
    } else {
      this.otherRcode++;
      this.#noteWrong(q, p.rcode, t1);
      return;
    }
    const ok = this.cluster.acceptable(q.fqdn, q.t0, t1, this.lagMs);
    if (!ok.includes(value)) {
      this.wrong++;
      this.#noteWrong(q, value, t1);
      return;
    }
    this.right++;
    if (!this.cluster.acceptable(q.fqdn, q.t0, t1, 0).includes(value)) {
      this.late++;
      this.maxStalenessMs = Math.max(this.maxStalenessMs, this.cluster.staleness(q.fqdn, value, q.t0));
    }
  }

  #noteWrong(q, got, t1) {
    if (this.wrongSamples.length >= 20) return;
    const h = this.cluster.history.get(q.fqdn) ?? [];
    this.wrongSamples.push({
      name: q.fqdn,
      got,
      sentAtMs: Math.round(q.t0 - this.startedAt),
      answeredAfterMs: Math.round(t1 - q.t0),
      expected: this.cluster.acceptable(q.fqdn, q.t0, t1, this.lagMs),
      history: h.slice(-4).map((e) => ({ atMs: Math.round(e.t - this.startedAt), ip: e.ip })),
    });
  }

  /** Stops sending, waits for the answers still due, and closes the socket. */
  async stop() {
    clearInterval(this.timer);
    const until = performance.now() + this.timeoutMs + 100;
    while (this.outstanding.size > 0 && performance.now() < until) await new Promise((r) => setTimeout(r, 50));
    this.#expire(Infinity);
    clearInterval(this.sweeper);
    await new Promise((r) => this.sock.close(r));
  }
}
