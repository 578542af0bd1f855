// Two servers in one process, each with its own Corefile, addresses and ports: neither sees
// the other's counters (its own and its plugins'), enabled plugins, probe names or watch of
// the cluster (services.ts).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as dnsPacket from 'dns-packet';
import { DnsServer } from '../../src/server/server.js';
import type { LoopHandler } from '../../src/plugins/loop/handler.js';
import { QType, Rcode } from '../../src/dns/constants.js';
import { KubeApiServer } from '../helpers/kubeapi.js';
import { buildQuery, sendUdp } from '../helpers/dns.js';
import { decodeMessage, type Message } from '../../src/dns/message.js';
import { freePort } from '../helpers/ports.js';
import { total } from '../helpers/workers.js';
import { namespace, service } from '../kubernetes/fixtures.js';

async function serverWith(corefile: string): Promise<DnsServer> {
  const dir = mkdtempSync(join(tmpdir(), 'clusterdns-services-'));
  const conf = join(dir, 'Corefile');
  writeFileSync(conf, corefile);
  const s = new DnsServer({ conf, defaultPort: 53 });
  await s.start();
  return s;
}

async function ask(host: string, port: number, name: string, type: number): Promise<Message> {
  return decodeMessage(await sendUdp(port, buildQuery(name, type), 2000, host));
}

async function scrape(host: string, port: number): Promise<string> {
  return (await fetch(`http://${host}:${port}/metrics`)).text();
}

/** Lines of `name` in an exposition text. */
function samples(text: string, name: string): string[] {
  return text.split('\n').filter((l) => l.startsWith(name + '{'));
}

/** An upstream that answers every question with one HINFO record and counts what it got. */
async function countingUpstream(): Promise<{ port: number; asked: string[]; close(): void }> {
  const sock = dgram.createSocket('udp4');
  await new Promise<void>((r) => sock.bind(0, '127.0.0.1', () => r()));
  const asked: string[] = [];
  sock.on('message', (msg, rinfo) => {
    const q = dnsPacket.decode(msg);
    const name = q.questions![0]!.name;
    asked.push(name);
    const reply = dnsPacket.encode({
      id: q.id,
      type: 'response',
      flags: dnsPacket.RECURSION_DESIRED | dnsPacket.RECURSION_AVAILABLE,
      questions: q.questions,
      answers: [{ name, type: 'HINFO', class: 'IN', ttl: 300, data: { cpu: 'test', os: 'test' } }],
    });
    sock.send(reply, rinfo.port, rinfo.address);
  });
  return { port: sock.address().port, asked, close: () => sock.close() };
}

test(
  'two servers in one process keep their own counters, enabled plugins, probe names and cluster watch',
  { timeout: 60000 },
  async () => {
    const api = await KubeApiServer.create();
    api.apply(namespace('default'));
    api.apply(service('default', 'web', ['10.96.0.50'], [['http', 'TCP', 80]]));
    const upstream = await countingUpstream();
    const [portA, metricsA, healthA] = [
      await freePort('127.0.0.2'),
      await freePort('127.0.0.2'),
      await freePort('127.0.0.2'),
    ];
    const [portB, metricsB, healthB] = [
      await freePort('127.0.0.3'),
      await freePort('127.0.0.3'),
      await freePort('127.0.0.3'),
    ];
    // A: kubernetes behind a cache, and a loop probe its own block drops, so the probe name stays live.
    const a = await serverWith(
      `cluster.local:${portA} {\n bind 127.0.0.2\n prometheus 127.0.0.2:${metricsA}\n health 127.0.0.2:${healthA} {\n status\n }\n cache 30\n kubernetes {\n endpoint http://127.0.0.1:${api.port}\n }\n}\n` +
        `probe.test:${portA} {\n bind 127.0.0.2\n acl {\n drop\n }\n loop\n}\n`,
    );
    let b: DnsServer | null = null;
    try {
      // B: the same cluster, and a cache in front of an upstream.
      b = await serverWith(
        `cluster.local:${portB} {\n bind 127.0.0.3\n prometheus 127.0.0.3:${metricsB}\n health 127.0.0.3:${healthB} {\n status\n }\n kubernetes {\n endpoint http://127.0.0.1:${api.port}\n }\n}\n` +
          `.:${portB} {\n bind 127.0.0.3\n cache 30\n forward . 127.0.0.1:${upstream.port}\n}\n`,
      );
      for (let i = 0; i < 3; i++) {
        const r = await ask('127.0.0.2', portA, 'web.default.svc.cluster.local.', QType.A);
        assert.equal(r.rcode, Rcode.NOERROR);
      }
      const r = await ask('127.0.0.3', portB, 'web.default.svc.cluster.local.', QType.A);
      assert.equal((r.answers[0]?.data as { address?: string }).address, '10.96.0.50');

      // Counters and enabled plugins: each /metrics shows its own server only.
      const serverA = `server="dns://:${portA}"`;
      // The loop plugin's self-probe (dropped by A's acl) is sent after start-up: wait for it, up to 5 s.
      let textA = await scrape('127.0.0.2', metricsA);
      for (
        let i = 0;
        i < 50 && !samples(textA, 'coredns_acl_dropped_requests_total').some((l) => l.includes(serverA));
        i++
      ) {
        await new Promise((r) => setTimeout(r, 100));
        textA = await scrape('127.0.0.2', metricsA);
      }
      const textB = await scrape('127.0.0.3', metricsB);
      const serverB = `server="dns://:${portB}"`;
      assert.equal(total(textA, 'coredns_dns_requests_total'), 3, 'A counted its own three queries');
      assert.equal(total(textB, 'coredns_dns_requests_total'), 1, 'B counted its one query, none of A');
      for (const name of ['coredns_dns_requests_total', 'coredns_plugin_enabled']) {
        assert.ok(samples(textA, name).length > 0 && samples(textB, name).length > 0, name);
        assert.ok(!samples(textA, name).some((l) => l.includes(serverB)), `${name}: A shows nothing of B`);
        assert.ok(!samples(textB, name).some((l) => l.includes(serverA)), `${name}: B shows nothing of A`);
      }
      assert.ok(samples(textA, 'coredns_plugin_enabled').some((l) => l.includes('name="cache"')));
      // A plugin's own counters too: A's acl dropped its loop probe; B has no acl.
      assert.ok(samples(textA, 'coredns_acl_dropped_requests_total').some((l) => l.includes(serverA)));
      assert.equal(samples(textB, 'coredns_acl_dropped_requests_total').length, 0, "B shows none of A's acl counts");
      assert.ok(
        !samples(textB, 'coredns_plugin_enabled').some((l) => l.includes('name="cache"')),
        'B enables no cache in its prometheus block',
      );

      // The status pages: each counts its own server's queries.
      const statusTotal = async (host: string, port: number) =>
        ((await (await fetch(`http://${host}:${port}/status.json`)).json()) as { queries: { total: number } }).queries
          .total;
      // Ticks once a second: wait for the number, then hold it to it.
      const settled = async (host: string, port: number, want: number) => {
        const end = Date.now() + 5000;
        let got = await statusTotal(host, port);
        while (got !== want && Date.now() < end) {
          await new Promise((res) => setTimeout(res, 200));
          got = await statusTotal(host, port);
        }
        return got;
      };
      assert.equal(await settled('127.0.0.2', healthA, 3), 3, "A's page counts A's queries");
      assert.equal(await settled('127.0.0.3', healthB, 1), 1, "B's page counts B's query only");

      // Probe names: A's probe is A's; B caches the same name like any other.
      const loop = a.runtime!.instances.find((i) => i.name === 'loop')!.handler as LoopHandler;
      assert.equal(loop.disabled, false, "A's probe is still live (its block drops it)");
      for (let i = 0; i < 2; i++) {
        const h = await ask('127.0.0.3', portB, loop.qname, QType.HINFO);
        assert.equal(h.rcode, Rcode.NOERROR);
      }
      assert.equal(
        upstream.asked.filter((n) => n.toLowerCase() + '.' === loop.qname).length,
        1,
        "B's cache answered the second from its store: A's probe name is no probe of B's",
      );

      // The cluster watch: each server lists and watches the API itself.
      const servicesLists = api.requestLog.filter((x) => x.verb === 'list' && x.path === '/api/v1/services').length;
      assert.equal(servicesLists, 2, 'one list of Services per server');
      // B keeps following the cluster after A is gone.
      await a.shutdown();
      api.apply(service('default', 'web', ['10.96.0.51'], [['http', 'TCP', 80]]));
      const end = Date.now() + 5000;
      let seen: string | undefined;
      while (Date.now() < end) {
        const m = await ask('127.0.0.3', portB, 'web.default.svc.cluster.local.', QType.A);
        seen = (m.answers[0]?.data as { address?: string } | undefined)?.address;
        if (seen === '10.96.0.51') break;
        await new Promise((res) => setTimeout(res, 100));
      }
      assert.equal(seen, '10.96.0.51');
    } finally {
      await a.shutdown();
      await b?.shutdown();
      upstream.close();
      await api.close();
    }
  },
);

test(
  "queries to one server move only that server's forward, cache and searchfan counters, and a reload keeps them",
  { timeout: 60000 },
  async () => {
    const upstream = await countingUpstream();
    const to = `127.0.0.1:${upstream.port}`;
    // The same Corefile on two addresses: the same upstream, so the same `to` labels.
    const corefile = (host: string, port: number, metrics: number) =>
      `.:${port} {\n bind ${host}\n prometheus ${host}:${metrics}\n cache 30\n forward . ${to}\n}\n` +
      `fan.test:${port} {\n bind ${host}\n prometheus ${host}:${metrics}\n searchfan ${to} {\n search\n }\n}\n`;
    const [portA, metricsA] = [await freePort('127.0.0.2'), await freePort('127.0.0.2')];
    const [portB, metricsB] = [await freePort('127.0.0.3'), await freePort('127.0.0.3')];
    const a = await serverWith(corefile('127.0.0.2', portA, metricsA));
    let b: DnsServer | null = null;
    try {
      b = await serverWith(corefile('127.0.0.3', portB, metricsB));
      for (const name of ['one.example.', 'two.example.', 'three.example.', 'one.example.'])
        assert.equal((await ask('127.0.0.2', portA, name, QType.HINFO)).rcode, Rcode.NOERROR);
      for (let i = 0; i < 2; i++)
        assert.equal((await ask('127.0.0.2', portA, 'host.fan.test.', QType.HINFO)).rcode, Rcode.NOERROR);

      const counts = async (host: string, port: number) => {
        const text = await scrape(host, port);
        return {
          forward: total(text, 'coredns_forward_requests_total'),
          proxy: total(text, 'coredns_proxy_request_duration_seconds_count'),
          cacheRequests: total(text, 'coredns_cache_requests_total'),
          cacheHits: total(text, 'coredns_cache_hits_total'),
          searchfan: total(text, 'coredns_searchfan_requests_total'),
          searchfanUpstream: total(text, 'coredns_searchfan_upstream_requests_total'),
        };
      };
      const afterA = { forward: 3, proxy: 3, cacheRequests: 4, cacheHits: 1, searchfan: 2, searchfanUpstream: 1 };
      const none = { forward: 0, proxy: 0, cacheRequests: 0, cacheHits: 0, searchfan: 0, searchfanUpstream: 0 };
      assert.deepEqual(await counts('127.0.0.2', metricsA), afterA, "A's /metrics counts A's queries");
      assert.deepEqual(await counts('127.0.0.3', metricsB), none, "B's /metrics shows nothing of A's queries");

      // B's own query moves B's counters only.
      assert.equal((await ask('127.0.0.3', portB, 'four.example.', QType.HINFO)).rcode, Rcode.NOERROR);
      assert.deepEqual(await counts('127.0.0.3', metricsB), { ...none, forward: 1, proxy: 1, cacheRequests: 1 });
      assert.deepEqual(await counts('127.0.0.2', metricsA), afterA, "A's counters did not move");
      // CoreDNS's names and labels, with the server of the block that counted.
      const textA = await scrape('127.0.0.2', metricsA);
      assert.match(textA, new RegExp(`^coredns_forward_requests_total\\{to="${to}"\\} 3$`, 'm'));
      assert.match(
        textA,
        new RegExp(`^coredns_cache_requests_total\\{server="dns://:${portA}",zones="\\.",view=""\\} 4$`, 'm'),
      );
      assert.match(textA, new RegExp(`^coredns_searchfan_requests_total\\{server="dns://:${portA}"\\} 2$`, 'm'));

      // A reload (a new configuration, new plugin instances) keeps the server's counters, as CoreDNS does.
      const before = a.runtime;
      await a.reload('SIGUSR1');
      assert.notEqual(a.runtime, before, 'A runs a new configuration');
      assert.deepEqual(await counts('127.0.0.2', metricsA), afterA, 'nothing counted before the reload is lost');
      assert.equal((await ask('127.0.0.2', portA, 'five.example.', QType.HINFO)).rcode, Rcode.NOERROR);
      const reloaded = await counts('127.0.0.2', metricsA);
      assert.equal(reloaded.forward, 4, 'the new configuration counts on from there');
      assert.equal(reloaded.cacheRequests, 5);
    } finally {
      await a.shutdown();
      await b?.shutdown();
      upstream.close();
    }
  },
);

test(
  "one server's API outage is not another's: coredns_kubernetes_api_up is each server's own",
  { timeout: 60000 },
  async () => {
    const apis = [await KubeApiServer.create(), await KubeApiServer.create()];
    for (const api of apis) {
      api.apply(namespace('default'));
      api.apply(service('default', 'web', ['10.96.0.50'], [['http', 'TCP', 80]]));
    }
    const servers: DnsServer[] = [];
    try {
      const metrics: number[] = [];
      for (const [i, host] of ['127.0.0.2', '127.0.0.3'].entries()) {
        const port = await freePort(host);
        metrics.push(await freePort(host));
        servers.push(
          await serverWith(
            `cluster.local:${port} {\n bind ${host}\n prometheus ${host}:${metrics[i]}\n kubernetes {\n endpoint http://127.0.0.1:${apis[i]!.port}\n }\n}\n`,
          ),
        );
      }
      const apiUp = async (i: number) =>
        /^coredns_kubernetes_api_up (\d)$/m.exec(await scrape(i === 0 ? '127.0.0.2' : '127.0.0.3', metrics[i]!))?.[1];
      assert.equal(await apiUp(0), '1');
      assert.equal(await apiUp(1), '1');
      await apis[1]!.stop();
      const end = Date.now() + 10000;
      while (Date.now() < end && (await apiUp(1)) !== '0') await new Promise((r) => setTimeout(r, 100));
      assert.equal(await apiUp(1), '0', 'B serves the last known state');
      assert.equal(await apiUp(0), '1', "A still reaches its API: B's outage is not A's");
    } finally {
      for (const s of servers) await s.shutdown();
      for (const api of apis) await api.close();
    }
  },
);
