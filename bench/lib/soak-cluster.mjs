// The soak's cluster: Services in the test API server (test/helpers/kubeapi.ts, imported from
// dist after the build), changed at a steady rate, with the history of every name's value so
// the checker can tell a right answer from a wrong one while changes are in flight.

import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { seededRandom } from './workload.mjs';

const ZONE = 'cluster.local';

/** A ClusterIP Service as the API server stores it. */
function serviceObject(namespace, name, ip) {
  return {
    kind: 'Service',
    apiVersion: 'v1',
    metadata: { name, namespace },
    spec: {
      type: 'ClusterIP',
      clusterIP: ip,
      clusterIPs: [ip],
      ports: [{ name: 'http', protocol: 'TCP', port: 80 }],
      selector: { app: name },
    },
  };
}

/** Distinct ClusterIPs from 10.96.0.0/12, one per change, so a stale answer is never right by chance. */
function ipFor(n) {
  return `10.${96 + ((n >> 16) & 15)}.${(n >> 8) & 255}.${n & 255}`;
}

export class SoakCluster {
  /**
   * @param {import('../../dist/test/helpers/kubeapi.js').KubeApiServer} api
   * @param {{ namespaces?: number, perNamespace?: number, seed?: number }} o
   */
  constructor(api, { namespaces = 20, perNamespace = 100, seed = 20261201 } = {}) {
    this.api = api;
    this.namespaces = namespaces;
    this.perNamespace = perNamespace;
    this.rnd = seededRandom(seed);
    /** fqdn -> [{ t, ip }] (ip null: no such Service), t from performance.now(). */
    this.history = new Map();
    /** Every name that ever existed: the checker samples these (deleted ones check NXDOMAIN). */
    this.names = [];
    /** Names that exist now, as { namespace, name, fqdn }. */
    this.live = [];
    this.nextIp = 1;
    this.created = 0;
    this.changes = { modified: 0, deleted: 0, created: 0 };
    this.timer = null;
  }

  fqdn(namespace, name) {
    return `${name}.${namespace}.svc.${ZONE}.`;
  }

  #set(namespace, name, ip) {
    const fqdn = this.fqdn(namespace, name);
    let h = this.history.get(fqdn);
    if (!h) {
      h = [];
      this.history.set(fqdn, h);
      this.names.push(fqdn);
    }
    // Recorded just before the API server sends the watch event: the earliest a server can know.
    h.push({ t: performance.now(), ip });
    if (ip === null) this.api.remove('Service', namespace, name);
    else this.api.apply(serviceObject(namespace, name, ip));
  }

  /** The initial Services (and their Namespaces, which the plugin needs to answer under them). */
  populate() {
    for (let m = 0; m < this.namespaces; m++) {
      this.api.apply({ kind: 'Namespace', apiVersion: 'v1', metadata: { name: `ns-${m}` } });
      for (let n = 0; n < this.perNamespace; n++) {
        const s = { namespace: `ns-${m}`, name: `svc-${n}` };
        this.#set(s.namespace, s.name, ipFor(this.nextIp++));
        this.live.push({ ...s, fqdn: this.fqdn(s.namespace, s.name) });
      }
    }
  }

  /** One change: half of them a new ClusterIP, a quarter deletions, a quarter creations. */
  change() {
    const r = this.rnd();
    const i = Math.floor(this.rnd() * this.live.length);
    const s = this.live[i];
    if (r < 0.5 && s) {
      this.#set(s.namespace, s.name, ipFor(this.nextIp++));
      this.changes.modified++;
    } else if (r < 0.75 && s && this.live.length > (this.namespaces * this.perNamespace) / 2) {
      this.#set(s.namespace, s.name, null);
      this.live[i] = this.live[this.live.length - 1];
      this.live.pop();
      this.changes.deleted++;
    } else {
      const namespace = `ns-${Math.floor(this.rnd() * this.namespaces)}`;
      const name = `new-${this.created++}`;
      this.#set(namespace, name, ipFor(this.nextIp++));
      this.live.push({ namespace, name, fqdn: this.fqdn(namespace, name) });
      this.changes.created++;
    }
  }

  /** Changes `perMinute` Services a minute, spread evenly (every 100 ms). */
  startChurn(perMinute) {
    let owed = 0;
    const perTick = perMinute / 600;
    this.timer = setInterval(() => {
      owed += perTick;
      while (owed >= 1) {
        this.change();
        owed--;
      }
    }, 100);
  }

  stopChurn() {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  get changeCount() {
    return this.changes.modified + this.changes.deleted + this.changes.created;
  }

  /**
   * The values `fqdn` may rightly have in an answer to a query sent at t0 and answered at t1:
   * its value at t0 - lagMs and every value it took after that, up to t1.
   */
  acceptable(fqdn, t0, t1, lagMs) {
    const h = this.history.get(fqdn);
    const out = [];
    if (!h) return [null];
    let before = null;
    for (const e of h) {
      if (e.t <= t0 - lagMs) before = e.ip;
      else if (e.t <= t1) out.push(e.ip);
    }
    out.unshift(before);
    return out;
  }

  /**
   * How long before t0 the value `ip` had already been replaced (0 when it was current at t0;
   * Infinity when `fqdn` never had it): how stale an answer with that value is.
   */
  staleness(fqdn, ip, t0) {
    const h = this.history.get(fqdn) ?? [];
    let best = Infinity;
    for (let k = 0; k < h.length; k++) {
      if (h[k].ip !== ip || h[k].t > t0) continue;
      const next = h[k + 1];
      best = Math.min(best, next === undefined || next.t > t0 ? 0 : t0 - next.t);
    }
    return best;
  }

  /** dnsperf's query file: A queries for the names that exist now, a tenth for names that do not. */
  writeQueryFile(dir, count = 100_000) {
    const lines = new Array(count);
    for (let i = 0; i < count; i++) {
      if (this.rnd() < 0.1) lines[i] = `gone-${i % 1000}.ns-${i % this.namespaces}.svc.${ZONE} A`;
      else lines[i] = `${this.live[Math.floor(this.rnd() * this.live.length)].fqdn.slice(0, -1)} A`;
    }
    const file = join(dir, 'soak-queries.txt');
    writeFileSync(file, lines.join('\n') + '\n');
    return file;
  }

  /** unbound's local-data for the names that exist now (the peer answers the same query file). */
  localData(ttl = 5) {
    return this.live.map((s) => {
      const h = this.history.get(s.fqdn);
      return `  local-data: "${s.fqdn} ${ttl} IN A ${h[h.length - 1].ip}"`;
    });
  }
}
