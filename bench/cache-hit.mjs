#!/usr/bin/env node
// Cost of a cache hit in process (no sockets): parse the query, serveDNS, finalize the
// reply. The baseline row is parse + Request alone, so the difference is the cache's own
// share. Also the clock reads the hit path avoids.
//
//   npm run build && node bench/cache-hit.mjs [--n 2000000]

import { parseArgs } from 'node:util';
import { performance } from 'node:perf_hooks';
import { parseQuery } from '../dist/src/dns/query.js';
import { emptyMessage, encodeMessage } from '../dist/src/dns/message.js';
import { Request, Response } from '../dist/src/server/request.js';
import { finalizeReply } from '../dist/src/server/reply.js';
import { CacheHandler } from '../dist/src/plugins/cache/handler.js';
import { parseCache } from '../dist/src/plugins/cache/setup.js';
import { clock } from '../dist/src/server/clock.js';

const { values } = parseArgs({ options: { n: { type: 'string', default: '2000000' } } });
const N = Number(values.n);

function query(name, edns) {
  const m = emptyMessage(1234);
  m.rd = true;
  m.questions.push({ name, type: 1, class: 1 });
  if (edns) m.edns = { udpSize: 1232, version: 0, do: false, zflags: 0, options: [] };
  return encodeMessage(m);
}

const client = {
  proto: 'udp',
  remoteAddress: '127.0.0.1',
  remotePort: 5353,
  family: 1,
  localAddress: '127.0.0.1',
  localPort: 53,
};
const directive = { name: 'cache', args: [], block: null, file: 'Corefile', line: 1 };
const h = new CacheHandler(parseCache([directive], ['.'], 'dns://:53'));
h.start();
const upstream = (req) => {
  const m = emptyMessage(req.id);
  m.qr = true;
  m.rd = true;
  m.ra = true;
  m.questions.push({ name: req.qname, type: req.qtype, class: 1 });
  m.answers.push({ name: req.qname, type: 1, class: 1, ttl: 300, data: { address: '10.0.0.1' } });
  m.answers.push({ name: req.qname, type: 1, class: 1, ttl: 300, data: { address: '10.0.0.2' } });
  return Response.wire(encodeMessage(m), 'upstream');
};

function bench(label, raw, fn) {
  for (let i = 0; i < 200_000; i++) fn(raw);
  const t0 = process.hrtime.bigint();
  let bytes = 0;
  for (let i = 0; i < N; i++) bytes += fn(raw);
  const ns = Number(process.hrtime.bigint() - t0) / N;
  console.log(`| ${label} | ${ns.toFixed(0)} ns | ${(1e9 / ns / 1000).toFixed(0)}k/s |`);
  return bytes;
}

const parseOnly = (raw) => {
  const q = parseQuery(raw);
  const req = new Request(raw, q, client);
  return req.qtype;
};
const hit = (raw) => {
  const q = parseQuery(raw);
  const req = new Request(raw, q, client);
  const res = h.serveDNS(req, upstream);
  return finalizeReply(req, res).length;
};

console.log('| path | per query | rate (one core) |');
console.log('|---|---|---|');
for (const edns of [false, true]) {
  const raw = query('web.default.svc.cluster.local.', edns);
  hit(raw); // the miss that fills the entry
  bench(`parse + Request only${edns ? ' (EDNS)' : ''}`, raw, parseOnly);
  bench(`cache hit, parse to reply bytes${edns ? ' (EDNS)' : ''}`, raw, hit);
}
const reads = (label, f) => {
  const t0 = process.hrtime.bigint();
  let x = 0;
  for (let i = 0; i < N; i++) x += f();
  console.log(`| clock read: ${label} | ${(Number(process.hrtime.bigint() - t0) / N).toFixed(1)} ns | |`);
  return x;
};
reads('coarse clock.ms (used)', () => clock.ms);
reads('Date.now()', () => Date.now());
reads('performance.now()', () => performance.now());
h.stop();
