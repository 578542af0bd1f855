// autopath's walk and setup, in process: a scripted rest-of-chain records every name the
// walk asks for and answers from a table.
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { parseCorefile } from '../../src/corefile/parser.js';
import { QClass, QType, Rcode } from '../../src/dns/constants.js';
import { decodeMessage, type Message } from '../../src/dns/message.js';
import { parseQuery } from '../../src/dns/query.js';
import { AutoPath } from '../../src/plugins/autopath/handler.js';
import { StaticSearchPath } from '../../src/plugins/autopath/searchpath.js';
import { parseAutoPath, type AutoPathConfig } from '../../src/plugins/autopath/setup.js';
import { finalizeReply } from '../../src/server/reply.js';
import { Request, Response, type Next } from '../../src/server/request.js';
import { buildQuery } from '../helpers/dns.js';
import { rrText } from '../kubernetes/fixtures.js';

const CLIENT = {
  proto: 'udp' as const,
  remoteAddress: '127.0.0.5',
  remotePort: 40000,
  family: 1 as const,
  localAddress: '127.0.0.1',
  localPort: 53,
};

function request(name: string, type: number): Request {
  const raw = buildQuery(name, type, { id: 0x4242 });
  const q = parseQuery(raw);
  if (typeof q === 'number') throw new Error('bad query');
  const r = new Request(raw, q, CLIENT);
  r.server = 'dns://:53';
  return r;
}

/** The rest of the chain: A records from `table`, NXDOMAIN otherwise; `special` overrides per name. */
function chain(table: Record<string, string>, asked: string[], special: Record<string, () => Response> = {}): Next {
  return (req) => {
    asked.push(req.qname);
    const s = special[req.name];
    if (s) return s();
    const m = req.reply(table[req.name] ? Rcode.NOERROR : Rcode.NXDOMAIN);
    const ip = table[req.name];
    if (ip) m.answers.push({ name: req.qname, type: QType.A, class: QClass.IN, ttl: 42, data: { address: ip } });
    return Promise.resolve(Response.message(m, 'test'));
  };
}

async function run(ap: AutoPath, name: string, next: Next): Promise<Message> {
  const req = request(name, QType.A);
  const res = await ap.serveDNS(req, next);
  return decodeMessage(finalizeReply(req, res));
}

const PATH = ['ns1.svc.cluster.local.', 'svc.cluster.local.', 'cluster.local.', 'corp.example.', ''];

describe('autopath: the walk', () => {
  const ap = new AutoPath(['.'], new StaticSearchPath(PATH));

  it('walks the rest of the path through the chain and answers with a CNAME to the first name that is not NXDOMAIN', async () => {
    const asked: string[] = [];
    const m = await run(ap, 'Web.ns1.svc.cluster.local.', chain({ 'web.corp.example.': '10.1.1.1' }, asked));
    assert.deepEqual(asked, [
      'Web.ns1.svc.cluster.local.',
      'Web.svc.cluster.local.',
      'Web.cluster.local.',
      'Web.corp.example.',
    ]);
    assert.equal(m.id, 0x4242);
    assert.deepEqual(m.questions, [{ name: 'Web.ns1.svc.cluster.local.', type: QType.A, class: QClass.IN }]);
    assert.deepEqual(m.answers.map(rrText), [
      'Web.ns1.svc.cluster.local. 42 CNAME Web.corp.example.',
      'Web.corp.example. 42 A 10.1.1.1',
    ]);
  });

  it('the bare name comes last (the "" element)', async () => {
    const asked: string[] = [];
    const m = await run(ap, 'example.org.ns1.svc.cluster.local.', chain({ 'example.org.': '93.184.216.34' }, asked));
    assert.equal(asked.at(-1), 'example.org.');
    assert.deepEqual(m.answers.map(rrText), [
      'example.org.ns1.svc.cluster.local. 42 CNAME example.org.',
      'example.org. 42 A 93.184.216.34',
    ]);
  });

  it('leaves alone a name that is not the first expansion, and the first element itself', async () => {
    for (const name of ['web.svc.cluster.local.', 'ns1.svc.cluster.local.', 'www.example.org.']) {
      const asked: string[] = [];
      await run(ap, name, chain({}, asked));
      assert.deepEqual(asked, [name], name);
    }
  });

  it('a reply that is not a client write (bare SERVFAIL) is skipped; a plugin error ends the walk', async () => {
    const asked: string[] = [];
    const m = await run(
      ap,
      'x.ns1.svc.cluster.local.',
      chain({ 'x.cluster.local.': '10.0.0.9' }, asked, {
        'x.svc.cluster.local.': () => Response.rcode(Rcode.SERVFAIL, 'test'),
      }),
    );
    assert.deepEqual(m.answers.map(rrText), [
      'x.ns1.svc.cluster.local. 42 CNAME x.cluster.local.',
      'x.cluster.local. 42 A 10.0.0.9',
    ]);
    const asked2: string[] = [];
    const e = await run(
      ap,
      'y.ns1.svc.cluster.local.',
      chain({ 'y.cluster.local.': '10.0.0.9' }, asked2, {
        'y.svc.cluster.local.': () => Response.rcode(Rcode.SERVFAIL, 'test', 'upstream down'),
      }),
    );
    assert.equal(e.rcode, Rcode.SERVFAIL);
    assert.equal(asked2.length, 2, 'stopped at the failing plugin');
  });

  it('every name NXDOMAIN: the first reply, question as asked', async () => {
    const asked: string[] = [];
    const m = await run(ap, 'gone.ns1.svc.cluster.local.', chain({}, asked));
    assert.equal(asked.length, 5);
    assert.equal(m.rcode, Rcode.NXDOMAIN);
    assert.equal(m.questions[0]!.name, 'gone.ns1.svc.cluster.local.');
  });

  it('outside its zones it does nothing', async () => {
    const only = new AutoPath(['example.org.'], new StaticSearchPath(PATH));
    const asked: string[] = [];
    await run(only, 'a.ns1.svc.cluster.local.', chain({ 'a.svc.cluster.local.': '10.0.0.1' }, asked));
    assert.deepEqual(asked, ['a.ns1.svc.cluster.local.']);
  });
});

describe('autopath: setup', () => {
  const dir = mkdtempSync(join(tmpdir(), 'clusterdns-autopath-'));
  writeFileSync(join(dir, 'resolv.conf'), 'nameserver 10.0.0.2\nsearch Corp.Example. lab.example\n');
  const parse = (line: string, zones = ['.']): AutoPathConfig =>
    parseAutoPath(
      parseCorefile(`. {\n${line}\n}\n`, join(dir, 'Corefile'))[0]!.directives[0]!,
      zones,
      join(dir, 'Corefile'),
    );

  it('@kubernetes, with the block zones by default or the zones given', () => {
    assert.deepEqual(parse('autopath @kubernetes', ['cluster.local.']), {
      zones: ['cluster.local.'],
      plugin: 'kubernetes',
      staticPath: [],
      serverResolvConf: '/etc/resolv.conf',
    });
    assert.deepEqual(parse('autopath Example.ORG @kubernetes {\n resolvconf resolv.conf\n}').zones, ['example.org.']);
    assert.equal(
      parse('autopath @kubernetes {\n resolvconf resolv.conf\n}').serverResolvConf,
      join(dir, 'resolv.conf'),
    );
  });

  it('a resolv.conf file gives every client its search list, then the bare name', () => {
    assert.deepEqual(parse('autopath resolv.conf').staticPath, ['corp.example.', 'lab.example.', '']);
  });

  it('rejects other plugins, missing files and unknown options with the Corefile line', () => {
    assert.throws(
      () => parse('autopath @etcd'),
      /Corefile:2 - Error during parsing: autopath: etcd does not implement the AutoPather interface/,
    );
    assert.throws(() => parse('autopath nope.conf'), /autopath: failed to parse "nope\.conf"/);
    assert.throws(() => parse('autopath'), /Wrong argument count/);
    assert.throws(() => parse('autopath resolv.conf {\n resolvconf x\n}'), /resolvconf only applies to @kubernetes/);
    assert.throws(() => parse('autopath @kubernetes {\n other 1\n}'), /Corefile:3 - .*unknown property 'other'/);
  });
});
