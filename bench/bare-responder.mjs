#!/usr/bin/env node
// The ceiling for a Node DNS server on this machine: a hand-written parser for the header
// and question, a Map from the question's wire bytes to a ready answer, copy + patch ID.
// No codec, no plugin chain, no Promise. UDP only; anything that is not a plain query for a
// known name gets REFUSED (or is dropped when it cannot be parsed).
//
//   node bench/bare-responder.mjs --port 5300 --hosts hosts.txt [--ttl 30] [--workers N]
//
// With --workers N > 1 it forks N cluster workers sharing one socket, as clusterdns does.

import cluster from 'node:cluster';
import dgram from 'node:dgram';
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

const { values } = parseArgs({
  options: {
    port: { type: 'string' },
    address: { type: 'string', default: '127.0.0.1' },
    hosts: { type: 'string' },
    ttl: { type: 'string', default: '30' },
    workers: { type: 'string', default: '1' },
  },
});
const port = Number(values.port);
const ttl = Number(values.ttl);
const workers = Number(values.workers);
if (!Number.isInteger(port) || !values.hosts) {
  process.stderr.write('usage: bare-responder.mjs --port N --hosts FILE [--ttl S] [--workers N]\n');
  process.exit(2);
}

if (workers > 1 && cluster.isPrimary) {
  cluster.schedulingPolicy = cluster.SCHED_NONE;
  for (let i = 0; i < workers; i++) cluster.fork();
  let stopping = false;
  const stop = () => {
    stopping = true;
    for (const w of Object.values(cluster.workers ?? {})) w?.kill('SIGTERM');
    setTimeout(() => process.exit(0), 200).unref();
  };
  cluster.on('exit', () => {
    if (!stopping) stop();
  });
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
} else {
  serve();
}

/** Wire-format name for a dotted name, lowercase. */
function wireName(name) {
  const parts = name.toLowerCase().replace(/\.$/, '').split('.');
  const out = [];
  for (const p of parts) {
    out.push(p.length, ...Buffer.from(p, 'latin1'));
  }
  out.push(0);
  return Buffer.from(out);
}

function buildAnswers() {
  const answers = new Map();
  for (const raw of readFileSync(values.hosts, 'utf8').split('\n')) {
    const line = raw.replace(/#.*/, '').trim();
    if (!line) continue;
    const [ip, ...names] = line.split(/\s+/);
    const octets = ip.split('.').map(Number);
    if (octets.length !== 4 || octets.some((o) => !(o >= 0 && o <= 255))) continue; // A records only
    for (const name of names) {
      const qname = wireName(name);
      // key: qname + qtype A (1) + qclass IN (1), as the bytes appear in a lowercase query.
      const question = Buffer.concat([qname, Buffer.from([0, 1, 0, 1])]);
      const msg = Buffer.alloc(12 + question.length + 16);
      msg.writeUInt16BE(0x8400, 2); // QR AA, RD patched per query
      msg.writeUInt16BE(1, 4); // QDCOUNT
      msg.writeUInt16BE(1, 6); // ANCOUNT
      question.copy(msg, 12);
      let o = 12 + question.length;
      msg.writeUInt16BE(0xc00c, o); // pointer to the question's name
      msg.writeUInt16BE(1, o + 2);
      msg.writeUInt16BE(1, o + 4);
      msg.writeUInt32BE(ttl, o + 6);
      msg.writeUInt16BE(4, o + 10);
      for (let i = 0; i < 4; i++) msg[o + 12 + i] = octets[i];
      answers.set(question.toString('latin1'), msg);
    }
  }
  return answers;
}

function serve() {
  const answers = buildAnswers();
  const sock = dgram.createSocket({ type: 'udp4', recvBufferSize: 4 << 20, sendBufferSize: 4 << 20 });

  sock.on('message', (buf, rinfo) => {
    const len = buf.length;
    if (len < 17 || (buf[2] & 0xf8) !== 0 || buf[4] !== 0 || buf[5] !== 1) {
      // a response, a non-QUERY opcode, or QDCOUNT != 1
      if (len >= 12 && (buf[2] & 0x80) === 0) refuse(buf, 12, rinfo);
      return;
    }
    let i = 12;
    let upper = false;
    for (;;) {
      if (i >= len) return;
      const l = buf[i];
      if (l === 0) break;
      if (l > 63) return; // compression in a question: drop (a real server says FORMERR)
      const end = i + 1 + l;
      if (end > len) return;
      for (let j = i + 1; j < end; j++) {
        const c = buf[j];
        if (c >= 65 && c <= 90) upper = true;
      }
      i = end;
    }
    const qend = i + 5;
    if (qend > len) return;
    let key = buf.latin1Slice(12, qend);
    if (upper) key = key.toLowerCase();
    const ready = answers.get(key);
    if (ready === undefined) {
      refuse(buf, qend, rinfo);
      return;
    }
    const out = Buffer.allocUnsafe(ready.length);
    ready.copy(out);
    out[0] = buf[0];
    out[1] = buf[1];
    out[2] |= buf[2] & 1; // RD
    sock.send(out, rinfo.port, rinfo.address);
  });

  function refuse(buf, qend, rinfo) {
    const out = Buffer.from(buf.subarray(0, Math.min(qend, buf.length)));
    out[2] = 0x80 | (buf[2] & 0x79);
    out[3] = 5; // REFUSED
    out.fill(0, 6, 12);
    if (qend <= 12) out.fill(0, 4, 6);
    sock.send(out, rinfo.port, rinfo.address);
  }

  sock.bind({ port, address: values.address, exclusive: false });
  const stop = () => sock.close(() => process.exit(0));
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}
