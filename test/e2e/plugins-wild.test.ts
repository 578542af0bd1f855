// The CoreDNS plugins real Corefiles use beyond the cluster zone (issue "Corefiles from the wild"),
// each through the real binary with Debian's dig: file, acl, chaos, nsid, local, dns64, debug,
// any, minimal, header, and `-validate`.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { BIN, startServer, type RunningServer } from '../helpers/server.js';
import { dig } from '../helpers/dns.js';

const execFileP = promisify(execFile);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// CoreDNS's plugin/file tests use this zone (lookup_test.go's dbMiekNL-style example.org).
const EXAMPLE_ORG = `$ORIGIN example.org.
$TTL 1800
@       IN SOA a.iana-servers.net. devnull.example.org. (
            1282630057 ; serial
            14400      ; refresh
            3600       ; retry
            1209600    ; expire
            14400 )    ; minimum
        IN NS  a.iana-servers.net.
        IN NS  b.iana-servers.net.
        IN MX  10 mail
cname   IN CNAME www
www     IN A     127.0.0.1
        IN AAAA  ::1
mail    300 IN A 10.0.0.25
*.wild  IN A     10.0.0.42
a.b.ent IN A     10.0.0.7
chain1  IN CNAME chain2
chain2  IN CNAME www.example.org.
ext     IN CNAME target.other.test.
txt     IN TXT   "v=spf1 -all" "second \\"quoted\\" string"
srv     IN SRV   0 5 5060 www
private IN TYPE65280 \\# 4 0A000001
delegated IN NS  a.delegated
a.delegated IN A 139.162.196.78
$INCLUDE extra.db
`;
const EXTRA_DB = 'included 60 IN A 10.0.0.99\n';

describe('file, minimal, header, any, chaos, local, nsid, acl, dns64, debug through one server', () => {
  let s: RunningServer;
  before(async () => {
    s = await startServer({
      corefile: `
example.org:PORT {
    bind 127.0.0.1
    file example.org.db {
        reload 200ms
    }
    any
}
min.test:PORT {
    bind 127.0.0.1
    file min.db
    minimal
}
other.test:PORT {
    bind 127.0.0.1
    hosts {
        10.9.9.9 target.other.test
        10.0.0.1 v4only.other.test
        fallthrough
    }
    dns64 {
        allow_ipv4
    }
    header {
        response set ra
        response clear rd
    }
}
acl.test:PORT {
    bind 127.0.0.1
    acl {
        block type A net 127.0.0.0/8
        filter type AAAA
        drop type MX
        allow net 10.0.0.0/8
    }
    hosts {
        10.1.1.1 name.acl.test
        fd00::1 name.acl.test
    }
}
.:PORT {
    bind 127.0.0.1
    chaos clusterdns-test Alice Bob
    local
    nsid e2e-node
    debug
    whoami
}
`,
      files: {
        'example.org.db': EXAMPLE_ORG,
        'extra.db': EXTRA_DB,
        'min.db':
          '$ORIGIN min.test.\n$TTL 60\n@ IN SOA ns hostmaster 1 7200 3600 86400 60\n@ IN NS ns\nns IN A 10.0.0.53\nwww IN A 10.0.0.80\n',
      },
    });
  });
  after(async () => {
    await s.stop();
  });

  test('file: an A record answers with the apex NS in the authority section, AA set (as CoreDNS)', async () => {
    const r = await dig(s.port, ['www.example.org', 'A']);
    assert.equal(r.status, 'NOERROR');
    assert.ok(r.flags.includes('aa'));
    assert.deepEqual(r.answer, ['www.example.org. 1800 IN A 127.0.0.1']);
    assert.deepEqual(r.authority.sort(), [
      'example.org. 1800 IN NS a.iana-servers.net.',
      'example.org. 1800 IN NS b.iana-servers.net.',
    ]);
  });

  test('file: CNAMEs are followed inside the zone, chain and all', async () => {
    const one = await dig(s.port, ['cname.example.org', 'A']);
    assert.deepEqual(one.answer, [
      'cname.example.org. 1800 IN CNAME www.example.org.',
      'www.example.org. 1800 IN A 127.0.0.1',
    ]);
    const two = await dig(s.port, ['chain1.example.org', 'AAAA']);
    assert.deepEqual(two.answer, [
      'chain1.example.org. 1800 IN CNAME chain2.example.org.',
      'chain2.example.org. 1800 IN CNAME www.example.org.',
      'www.example.org. 1800 IN AAAA ::1',
    ]);
  });

  test('file: a CNAME leaving the zone keeps the CNAME (no upstream for it in this block)', async () => {
    const r = await dig(s.port, ['ext.example.org', 'A']);
    assert.equal(r.status, 'NOERROR');
    assert.deepEqual(r.answer, ['ext.example.org. 1800 IN CNAME target.other.test.']);
  });

  test('file: NXDOMAIN and NODATA carry the SOA; an empty non-terminal is NODATA, not NXDOMAIN', async () => {
    const nx = await dig(s.port, ['doesnotexist.example.org', 'A']);
    assert.equal(nx.status, 'NXDOMAIN');
    assert.deepEqual(nx.answer, []);
    assert.deepEqual(nx.authority, [
      'example.org. 1800 IN SOA a.iana-servers.net. devnull.example.org. 1282630057 14400 3600 1209600 14400',
    ]);
    const nodata = await dig(s.port, ['www.example.org', 'SRV']);
    assert.equal(nodata.status, 'NOERROR');
    assert.deepEqual(nodata.answer, []);
    assert.equal(nodata.authority.length, 1);
    const ent = await dig(s.port, ['b.ent.example.org', 'A']);
    assert.equal(ent.status, 'NOERROR');
    assert.deepEqual(ent.answer, []);
    assert.match(ent.authority[0]!, /IN SOA/);
  });

  test('file: wildcards synthesize the asked name; MX gets its in-zone address as additional data', async () => {
    const w = await dig(s.port, ['anything.wild.example.org', 'A']);
    assert.deepEqual(w.answer, ['anything.wild.example.org. 1800 IN A 10.0.0.42']);
    const mx = await dig(s.port, ['example.org', 'MX']);
    assert.deepEqual(mx.answer, ['example.org. 1800 IN MX 10 mail.example.org.']);
    assert.deepEqual(mx.additional, ['mail.example.org. 300 IN A 10.0.0.25']);
  });

  test('file: a delegation answers with a referral and glue, without AA', async () => {
    const r = await dig(s.port, ['foo.delegated.example.org', 'A', '+norec']);
    assert.equal(r.status, 'NOERROR');
    assert.ok(!r.flags.includes('aa'));
    assert.deepEqual(r.answer, []);
    assert.deepEqual(r.authority, ['delegated.example.org. 1800 IN NS a.delegated.example.org.']);
    assert.deepEqual(r.additional, ['a.delegated.example.org. 1800 IN A 139.162.196.78']);
  });

  test('file: TXT with quotes and escapes, SRV, RFC 3597 generic RDATA, $INCLUDE', async () => {
    const t = await dig(s.port, ['txt.example.org', 'TXT']);
    assert.deepEqual(t.answer, ['txt.example.org. 1800 IN TXT "v=spf1 -all" "second \\"quoted\\" string"']);
    const srv = await dig(s.port, ['srv.example.org', 'SRV']);
    assert.deepEqual(srv.answer, ['srv.example.org. 1800 IN SRV 0 5 5060 www.example.org.']);
    const g = await dig(s.port, ['private.example.org', 'TYPE65280']);
    assert.deepEqual(g.answer, ['private.example.org. 1800 IN TYPE65280 \\# 4 0A000001']);
    const inc = await dig(s.port, ['included.example.org', 'A']);
    assert.deepEqual(inc.answer, ['included.example.org. 60 IN A 10.0.0.99']);
  });

  test('file: a zone is reloaded when its SOA serial changes, and only then', async () => {
    const path = join(s.dir, 'example.org.db');
    writeFileSync(path, EXAMPLE_ORG.replace('127.0.0.1', '127.0.0.2'));
    await sleep(700);
    assert.deepEqual(
      (await dig(s.port, ['www.example.org', 'A'])).answer,
      ['www.example.org. 1800 IN A 127.0.0.1'],
      'same serial: kept',
    );
    writeFileSync(path, EXAMPLE_ORG.replace('127.0.0.1', '127.0.0.2').replace('1282630057', '1282630058'));
    await s.waitFor('with 1282630058 SOA serial', 5000);
    assert.deepEqual((await dig(s.port, ['www.example.org', 'A'])).answer, ['www.example.org. 1800 IN A 127.0.0.2']);
  });

  test('any: ANY gets the RFC 8482 HINFO', async () => {
    const r = await dig(s.port, ['www.example.org', 'ANY']);
    assert.deepEqual(r.answer, ['www.example.org. 8482 IN HINFO "ANY obsoleted" "See RFC 8482"']);
  });

  test('minimal: positive answers lose authority and additional; NXDOMAIN keeps its SOA', async () => {
    const r = await dig(s.port, ['www.min.test', 'A']);
    assert.deepEqual(r.answer, ['www.min.test. 60 IN A 10.0.0.80']);
    assert.deepEqual(r.authority, []);
    assert.deepEqual(r.additional, []);
    const nx = await dig(s.port, ['nope.min.test', 'A']);
    assert.equal(nx.status, 'NXDOMAIN');
    assert.equal(nx.authority.length, 1);
  });

  test('dns64: an AAAA question for a v4-only name gets AAAA synthesized in 64:ff9b::/96; real AAAA and A untouched', async () => {
    const r = await dig(s.port, ['v4only.other.test', 'AAAA']);
    assert.equal(r.status, 'NOERROR');
    assert.deepEqual(r.answer, ['v4only.other.test. 3600 IN AAAA 64:ff9b::a00:1']);
    const a = await dig(s.port, ['v4only.other.test', 'A']);
    assert.deepEqual(a.answer, ['v4only.other.test. 3600 IN A 10.0.0.1']);
  });

  test('header: response flags set and cleared as configured', async () => {
    const r = await dig(s.port, ['v4only.other.test', 'A']);
    assert.ok(r.flags.includes('ra'), r.raw);
    assert.ok(!r.flags.includes('rd'), r.raw);
  });

  test('acl: block is REFUSED with EDE Blocked, filter is an empty NOERROR, drop gets nothing, the rest passes', async () => {
    const blocked = await dig(s.port, ['name.acl.test', 'A']);
    assert.equal(blocked.status, 'REFUSED');
    assert.match(blocked.raw, /EDE: 15 \(Blocked\)/);
    const filtered = await dig(s.port, ['name.acl.test', 'AAAA']);
    assert.equal(filtered.status, 'NOERROR');
    assert.deepEqual(filtered.answer, []);
    assert.match(filtered.raw, /EDE: 17 \(Filtered\)/);
    await assert.rejects(dig(s.port, ['name.acl.test', 'MX', '+time=1']), 'drop: dig gets no reply');
    const txt = await dig(s.port, ['name.acl.test', 'TXT']);
    assert.equal(txt.status, 'NOERROR', 'no rule matches TXT from 127.0.0.1: allowed');
  });

  test('chaos: version.bind, authors.bind and hostname.bind in class CH; CH elsewhere is REFUSED', async () => {
    const v = await dig(s.port, ['CH', 'TXT', 'version.bind']);
    assert.deepEqual(v.answer, ['version.bind. 0 CH TXT "clusterdns-test"']);
    const a = await dig(s.port, ['CH', 'TXT', 'authors.bind']);
    assert.deepEqual(a.answer.sort(), ['authors.bind. 0 CH TXT "Alice"', 'authors.bind. 0 CH TXT "Bob"']);
    const h = await dig(s.port, ['CH', 'TXT', 'hostname.bind']);
    assert.equal(h.answer.length, 1);
    const other = await dig(s.port, ['CH', 'TXT', 'version.bind.example.org']);
    assert.equal(other.status, 'REFUSED', 'a block without chaos refuses CH');
  });

  test('local: localhost, its PTR, localhost.<domain> (counted, logged at debug) and NXDOMAIN in the local zones', async () => {
    assert.deepEqual((await dig(s.port, ['localhost', 'A'])).answer, ['localhost. 604800 IN A 127.0.0.1']);
    assert.deepEqual((await dig(s.port, ['localhost', 'AAAA'])).answer, ['localhost. 604800 IN AAAA ::1']);
    assert.deepEqual((await dig(s.port, ['-x', '127.0.0.1'])).answer, [
      '1.0.0.127.in-addr.arpa. 604800 IN PTR localhost.',
    ]);
    assert.deepEqual((await dig(s.port, ['localhost.corp.example', 'A'])).answer, [
      'localhost.corp.example. 604800 IN A 127.0.0.1',
    ]);
    await s.waitFor('[DEBUG] plugin/local: Intercepted localhost query for "localhost.corp.example."', 3000);
    const nx = await dig(s.port, ['foo.localhost', 'A']);
    assert.equal(nx.status, 'NXDOMAIN');
    assert.match(nx.authority[0]!, /^localhost\. 604800 IN SOA localhost\. root\.localhost\. 1 /);
  });

  test('nsid: the reply carries the NSID when the query asks for it, and only then', async () => {
    const r = await dig(s.port, ['whoami.test', '+nsid']);
    assert.match(r.raw, /NSID: .*\("e2e-node"\)/);
    const plain = await dig(s.port, ['whoami.test']);
    assert.doesNotMatch(plain.raw, /NSID/);
  });
});

describe('-validate', () => {
  const dir = mkdtempSync(join(tmpdir(), 'clusterdns-validate-'));
  const run = async (corefile: string) => {
    const f = join(dir, `Corefile-${Math.random().toString(36).slice(2)}`);
    writeFileSync(f, corefile);
    try {
      const { stdout, stderr } = await execFileP(process.execPath, [BIN, '-validate', '-conf', f], { timeout: 20000 });
      return { code: 0, out: stdout + stderr, file: f };
    } catch (e) {
      const x = e as { code: number; stdout: string; stderr: string };
      return { code: x.code, out: x.stdout + x.stderr, file: f };
    }
  };

  test('a valid Corefile exits 0 and binds nothing (port 53 as written, validated twice at once)', async () => {
    const c = '.:53 {\n    errors\n    health :8080\n    ready :8181\n    forward . 127.0.0.1\n    cache 30\n}\n';
    const [a, b] = await Promise.all([run(c), run(c)]);
    assert.equal(a.code, 0, a.out);
    assert.equal(b.code, 0, b.out);
    assert.match(a.out, /valid \(1 server block/);
  });

  test('every problem is printed as FILE:LINE, in order, with a suggestion for a typo; exit 1', async () => {
    const r = await run(
      '.:1053 {\n    forwrd . 127.0.0.1\n    cache -5\n    kubernetes cluster.local {\n        pods nonsense\n    }\n    geoip\n}\n',
    );
    assert.equal(r.code, 1);
    const lines = r.out.trim().split('\n');
    assert.match(
      lines[0]!,
      new RegExp(`^${r.file}:2 - Error during parsing: Unknown directive 'forwrd' \\(did you mean 'forward'\\?\\)`),
    );
    assert.ok(
      lines.some((l) => l.startsWith(`${r.file}:3 - `)),
      r.out,
    );
    assert.ok(
      lines.some((l) => l.startsWith(`${r.file}:5 - `)),
      r.out,
    );
    assert.ok(
      lines.some((l) => l.startsWith(`${r.file}:7 - `) && l.includes("'geoip'") && l.includes('closest here')),
      r.out,
    );
    assert.match(lines.at(-1)!, /4 problems; it would not load/);
  });

  test('a Corefile that does not exist is one clear line, exit 1', async () => {
    const { code, out } = await (async () => {
      try {
        await execFileP(process.execPath, [BIN, '-validate', '-conf', join(dir, 'missing')], { timeout: 20000 });
        return { code: 0, out: '' };
      } catch (e) {
        const x = e as { code: number; stderr: string };
        return { code: x.code, out: x.stderr };
      }
    })();
    assert.equal(code, 1);
    assert.match(out, /missing: cannot read the Corefile .*no such file or directory/);
    assert.equal(out.trim().split('\n').length, 1);
  });

  test('a zone file error names the zone file line and never echoes its content', async () => {
    const zone = join(dir, 'secret.db');
    writeFileSync(zone, '$TTL 60\n@ IN SOA ns host 1 2 3 4 5\nwww IN A TOPSECRETVALUE\n');
    const r = await run(`example.org:1053 {\n    file ${zone}\n}\n`);
    assert.equal(r.code, 1);
    assert.match(r.out, new RegExp(`${zone}:3 - not an IPv4 address`));
    assert.doesNotMatch(r.out, /TOPSECRETVALUE/);
  });
});

describe('pprof', () => {
  let s: RunningServer;
  let httpPort: number;
  before(async () => {
    httpPort = await (await import('../helpers/ports.js')).freePort();
    s = await startServer({
      corefile: `.:PORT {\n    bind 127.0.0.1\n    pprof 127.0.0.1:${httpPort}\n    whoami\n}\n`,
    });
  });
  after(async () => {
    await s.stop();
  });

  test('a CPU profile of N seconds and a heap snapshot, in V8 formats DevTools opens; one at a time', async () => {
    const base = `http://127.0.0.1:${httpPort}/debug/pprof`;
    const index = await fetch(`${base}/`);
    assert.match(await index.text(), /profile\?seconds=N/);
    const t0 = Date.now();
    const [cpu, busy] = await Promise.all([
      fetch(`${base}/profile?seconds=1`),
      sleep(200).then(() => fetch(`${base}/heap`)),
    ]);
    assert.equal(busy.status, 409, 'a second profile while one runs is refused');
    assert.equal(cpu.status, 200);
    assert.ok(Date.now() - t0 >= 1000);
    const profile = (await cpu.json()) as { nodes: unknown[]; startTime: number; endTime: number; samples: number[] };
    assert.ok(Array.isArray(profile.nodes) && profile.nodes.length > 0);
    assert.ok(profile.endTime - profile.startTime >= 900_000, 'microseconds: about a second');
    const heap = await fetch(`${base}/heap`);
    assert.equal(heap.status, 200);
    const snap = (await heap.json()) as { snapshot: { meta: { node_fields: string[] }; node_count: number } };
    assert.ok(snap.snapshot.meta.node_fields.includes('name'));
    assert.ok(snap.snapshot.node_count > 1000);
    assert.equal((await fetch(`${base}/profile?seconds=0`)).status, 400);
    assert.equal((await dig(s.port, ['still.serving'])).status, 'NOERROR');
  });
});

describe('view', () => {
  let s: RunningServer;
  before(async () => {
    s = await startServer({
      corefile: `
.:PORT {
    bind 127.0.0.1
    view local1 {
        expr incidr(client_ip(), '127.0.0.1/32')
    }
    hosts {
        10.0.0.1 test
    }
}
.:PORT {
    bind 127.0.0.1
    view aaaa {
        expr type() in ['AAAA'] && name() matches '^test\\\\.$'
    }
    hosts {
        fd00::2 test
    }
}
.:PORT {
    bind 127.0.0.1
    view tcp {
        expr proto() == 'tcp' and not (server_port() == '1')
    }
    hosts {
        10.0.0.3 test
    }
}
.:PORT {
    bind 127.0.0.1
    hosts {
        10.0.0.4 test
    }
}
`,
    });
  });
  after(async () => {
    await s.stop();
  });

  test('blocks on the same zone and port are chosen by their views, in order, the one without a view last', async () => {
    assert.deepEqual((await dig(s.port, ['-b', '127.0.0.1', 'test', 'A'])).answer, ['test. 3600 IN A 10.0.0.1']);
    assert.deepEqual((await dig(s.port, ['-b', '127.0.0.2', 'test', 'A'])).answer, ['test. 3600 IN A 10.0.0.4']);
    assert.deepEqual((await dig(s.port, ['-b', '127.0.0.2', '+tcp', 'test', 'A'])).answer, [
      'test. 3600 IN A 10.0.0.3',
    ]);
    assert.deepEqual((await dig(s.port, ['-b', '127.0.0.2', 'test', 'AAAA'])).answer, ['test. 3600 IN AAAA fd00::2']);
    assert.deepEqual(
      (await dig(s.port, ['-b', '127.0.0.1', 'test', 'AAAA'])).answer,
      [],
      'the first view takes 127.0.0.1 for every type',
    );
  });

  test('an expression that does not parse, or a second block without a view, is a start-up error with FILE:LINE', async () => {
    const bad = await startServer({
      corefile: `.:PORT {\n    view v {\n        expr incidr(client_ip(), '10.0.0.0/8'\n    }\n    whoami\n}\n`,
      noWait: true,
    });
    assert.equal(await new Promise((r) => bad.proc.on('exit', r)), 1);
    assert.match(bad.output(), /Corefile:3 - Error during parsing: view: expected '\)'/);
    const dup = await startServer({
      corefile: `.:PORT {\n    whoami\n}\n.:PORT {\n    view v {\n        expr true\n    }\n    whoami\n}\n`,
      noWait: true,
    });
    assert.equal(await new Promise((r) => dup.proc.on('exit', r)), 1);
    assert.match(
      dup.output(),
      /Corefile:4 - Error during parsing: cannot serve dns:\/\/\.:\d+ - it is already defined/,
    );
  });
});

describe('k8s_external', () => {
  const cluster = (lbIp: string) => `apiVersion: v1
kind: List
items:
  - { apiVersion: v1, kind: Namespace, metadata: { name: default } }
  - apiVersion: v1
    kind: Service
    metadata: { name: web, namespace: default }
    spec:
      type: LoadBalancer
      clusterIP: 10.96.0.50
      externalIPs: [192.0.2.10]
      ports: [{ name: http, port: 80, protocol: TCP }]
    status: { loadBalancer: { ingress: [{ ip: ${lbIp} }, { ip: "2001:db8::7" }] } }
  - apiVersion: v1
    kind: Service
    metadata: { name: lbhost, namespace: default }
    spec: { type: LoadBalancer, clusterIP: 10.96.0.51, ports: [{ name: https, port: 443, protocol: TCP }] }
    status: { loadBalancer: { ingress: [{ hostname: lb-123.elb.example.net }] } }
  - apiVersion: v1
    kind: Service
    metadata: { name: internal, namespace: default }
    spec: { clusterIP: 10.96.0.52, ports: [{ name: http, port: 80, protocol: TCP }] }
  - apiVersion: v1
    kind: Service
    metadata: { name: db, namespace: default }
    spec: { clusterIP: None, ports: [{ name: sql, port: 5432, protocol: TCP }] }
  - apiVersion: discovery.k8s.io/v1
    kind: EndpointSlice
    metadata: { name: db-1, namespace: default, labels: { kubernetes.io/service-name: db } }
    addressType: IPv4
    ports: [{ name: sql, port: 5432, protocol: TCP }]
    endpoints:
      - { addresses: [10.244.0.9], hostname: db-0, conditions: { ready: true } }
`;
  let s: RunningServer;
  before(async () => {
    s = await startServer({
      corefile: `
cluster.local:PORT example.org:PORT 198.51.100.0/24:PORT {
    bind 127.0.0.1
    kubernetes cluster.local {
        manifests cluster.yaml
    }
    k8s_external example.org 198.51.100.0/24 {
        headless
        ttl 60
    }
    cache 300
}
`,
      files: { 'cluster.yaml': cluster('198.51.100.7') },
      probe: 'web.default.svc.cluster.local',
    });
  });
  after(async () => {
    await s.stop();
  });

  test('external IPs and LoadBalancer ingress IPs answer A and AAAA under the external zone', async () => {
    const a = await dig(s.port, ['web.default.example.org', 'A']);
    assert.ok(a.flags.includes('aa'));
    assert.deepEqual(a.answer.sort(), [
      'web.default.example.org. 60 IN A 192.0.2.10',
      'web.default.example.org. 60 IN A 198.51.100.7',
    ]);
    const aaaa = await dig(s.port, ['web.default.example.org', 'AAAA']);
    assert.deepEqual(aaaa.answer, ['web.default.example.org. 60 IN AAAA 2001:db8::7']);
  });

  test('SRV for named ports, with the addresses in the additional section', async () => {
    const r = await dig(s.port, ['_http._tcp.web.default.example.org', 'SRV']);
    assert.ok(
      r.answer.includes('_http._tcp.web.default.example.org. 60 IN SRV 0 100 80 web.default.example.org.'),
      r.raw,
    );
    assert.ok(r.additional.includes('web.default.example.org. 60 IN A 192.0.2.10'), r.raw);
  });

  test('a LoadBalancer host name is a CNAME; a Service without external addresses is NXDOMAIN with the SOA', async () => {
    const c = await dig(s.port, ['lbhost.default.example.org', 'A']);
    assert.deepEqual(c.answer, ['lbhost.default.example.org. 60 IN CNAME lb-123.elb.example.net.']);
    const nx = await dig(s.port, ['internal.default.example.org', 'A']);
    assert.equal(nx.status, 'NXDOMAIN');
    assert.match(
      nx.authority[0]!,
      /^example\.org\. 60 IN SOA ns1\.dns\.example\.org\. hostmaster\.dns\.example\.org\. \d+ 7200 1800 86400 60$/,
    );
    assert.equal((await dig(s.port, ['nope.default.example.org', 'A'])).status, 'NXDOMAIN');
    const soa = await dig(s.port, ['example.org', 'SOA']);
    assert.equal(soa.answer.length, 1);
    const ns = await dig(s.port, ['example.org', 'NS']);
    assert.deepEqual(ns.answer, ['example.org. 60 IN NS ns1.dns.example.org.']);
  });

  test('PTR for an external IP names the Service under the external zone', async () => {
    assert.deepEqual(
      (await dig(s.port, ['-x', '198.51.100.7'])).answer.map((l) => l.replace(/ \d+ IN /, ' IN ')),
      ['7.100.51.198.in-addr.arpa. IN PTR web.default.example.org.'],
    );
    assert.equal(
      (await dig(s.port, ['-x', '198.51.100.99'])).status,
      'SERVFAIL',
      'not an external IP: on to the next plugin (none here)',
    );
  });

  test('headless: endpoint names and the Service name answer the endpoint addresses', async () => {
    assert.deepEqual((await dig(s.port, ['db-0.db.default.example.org', 'A'])).answer, [
      'db-0.db.default.example.org. 60 IN A 10.244.0.9',
    ]);
    assert.deepEqual((await dig(s.port, ['db.default.example.org', 'A'])).answer, [
      'db.default.example.org. 60 IN A 10.244.0.9',
    ]);
  });

  test('kept coherent with the cache: a changed LoadBalancer IP is answered at once, not after the cache TTL', async () => {
    const has = (answer: string[], ip: string) => answer.some((l) => l.endsWith(`IN A ${ip}`));
    assert.ok(
      has((await dig(s.port, ['web.default.example.org', 'A'])).answer, '198.51.100.7'),
      'cached now, for up to 60 s',
    );
    writeFileSync(join(s.dir, 'cluster.yaml'), cluster('198.51.100.8'));
    let last: string[] = [];
    for (let i = 0; i < 30; i++) {
      last = (await dig(s.port, ['web.default.example.org', 'A'])).answer;
      if (has(last, '198.51.100.8')) break;
      await sleep(200);
    }
    assert.ok(has(last, '198.51.100.8') && !has(last, '198.51.100.7'), last.join('\n'));
  });
});

describe('file: a zone file that is not there yet', () => {
  test('is a warning with reload (SERVFAIL until it appears, then served), an error without', async () => {
    const s = await startServer({
      corefile: `example.net:PORT {\n    bind 127.0.0.1\n    file later.db {\n        reload 200ms\n    }\n}\n`,
      probe: 'www.example.net',
    });
    try {
      assert.match(s.output(), /\[WARNING\] plugin\/file: Failed to open ".*later\.db": trying again in 0\.2s/);
      assert.equal((await dig(s.port, ['www.example.net', 'A'])).status, 'SERVFAIL');
      writeFileSync(
        join(s.dir, 'later.db'),
        '$ORIGIN example.net.\n$TTL 60\n@ SOA ns host 1 1 1 1 1\nwww A 10.0.0.8\n',
      );
      await s.waitFor('Successfully reloaded zone "example.net."', 5000);
      assert.deepEqual((await dig(s.port, ['www.example.net', 'A'])).answer, ['www.example.net. 60 IN A 10.0.0.8']);
    } finally {
      await s.stop();
    }
    const bad = await startServer({
      corefile: `example.net:PORT {\n    file later.db {\n        reload 0\n    }\n}\n`,
      noWait: true,
    });
    assert.equal(await new Promise((r) => bad.proc.on('exit', r)), 1);
    assert.match(bad.output(), /Corefile:2 - Error during parsing: file: later\.db: ENOENT/);
  });
});
