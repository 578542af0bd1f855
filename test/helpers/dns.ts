// A test DNS client over real UDP/TCP sockets, using the project's codec to build queries
// and dns-packet (an independent implementation) available to check what comes back.

import dgram from 'node:dgram';
import net from 'node:net';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { decodeMessage, emptyMessage, encodeMessage, type Message } from '../../src/dns/message.js';
import { QClass } from '../../src/dns/constants.js';

const execFileP = promisify(execFile);

export interface QueryOptions {
  tcp?: boolean;
  /** EDNS UDP size; undefined = no OPT record. */
  edns?: number;
  do?: boolean;
  id?: number;
  rd?: boolean;
  timeoutMs?: number;
  qclass?: number;
}

export function buildQuery(name: string, type: number, o: QueryOptions = {}): Buffer {
  const m = emptyMessage(o.id ?? Math.floor(Math.random() * 65536));
  m.rd = o.rd ?? true;
  m.questions.push({ name, type, class: o.qclass ?? QClass.IN });
  if (o.edns !== undefined) m.edns = { udpSize: o.edns, version: 0, do: o.do ?? false, zflags: 0, options: [] };
  return encodeMessage(m);
}

export function sendUdp(port: number, payload: Buffer, timeoutMs = 2000, host = '127.0.0.1'): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const s = dgram.createSocket(host.includes(':') ? 'udp6' : 'udp4');
    const t = setTimeout(() => {
      s.close();
      reject(new Error(`timeout waiting for UDP reply from ${host}:${port}`));
    }, timeoutMs);
    s.on('message', (msg) => {
      clearTimeout(t);
      s.close();
      resolve(msg);
    });
    s.send(payload, port, host);
  });
}

export function sendTcp(port: number, payloads: Buffer[], timeoutMs = 2000, host = '127.0.0.1'): Promise<Buffer[]> {
  return new Promise((resolve, reject) => {
    const out: Buffer[] = [];
    let pending = Buffer.alloc(0);
    const sock = net.connect({ port, host });
    const t = setTimeout(() => {
      sock.destroy();
      reject(new Error(`timeout waiting for TCP replies (${out.length}/${payloads.length})`));
    }, timeoutMs);
    sock.on('error', (e) => {
      clearTimeout(t);
      reject(e);
    });
    sock.on('connect', () => {
      const frames = payloads.map((p) => {
        const f = Buffer.alloc(2 + p.length);
        f.writeUInt16BE(p.length, 0);
        p.copy(f, 2);
        return f;
      });
      sock.write(Buffer.concat(frames));
    });
    sock.on('data', (d) => {
      pending = Buffer.concat([pending, d]);
      while (pending.length >= 2 && pending.length >= 2 + pending.readUInt16BE(0)) {
        const len = pending.readUInt16BE(0);
        out.push(pending.subarray(2, 2 + len));
        pending = pending.subarray(2 + len);
      }
      if (out.length === payloads.length) {
        clearTimeout(t);
        sock.end();
        resolve(out);
      }
    });
  });
}

/** Sends one query and decodes the reply with the project's codec. */
export async function query(port: number, name: string, type: number, o: QueryOptions = {}): Promise<Message> {
  const q = buildQuery(name, type, o);
  const raw = o.tcp ? (await sendTcp(port, [q], o.timeoutMs))[0]! : await sendUdp(port, q, o.timeoutMs);
  return decodeMessage(raw);
}

export interface DigResult {
  status: string;
  flags: string[];
  answer: string[];
  authority: string[];
  additional: string[];
  raw: string;
}

/** Runs Debian's dig against 127.0.0.1:port and parses its sections. */
export async function dig(port: number, args: string[], host = '127.0.0.1'): Promise<DigResult> {
  const { stdout } = await execFileP('dig', [`@${host}`, '-p', String(port), '+tries=1', '+time=2', ...args], {
    timeout: 10000,
  });
  const status = /status: (\w+)/.exec(stdout)?.[1] ?? '';
  const flags = (/flags: ([a-z ]+);/.exec(stdout)?.[1] ?? '').trim().split(/\s+/).filter(Boolean);
  const section = (name: string): string[] => {
    const m = new RegExp(`;; ${name} SECTION:\\n([\\s\\S]*?)(?:\\n\\n|$)`).exec(stdout);
    return m
      ? m[1]!
          .split('\n')
          .filter((l) => l && !l.startsWith(';'))
          .map((l) => l.replace(/\s+/g, ' ').trim())
      : [];
  };
  return {
    status,
    flags,
    answer: section('ANSWER'),
    authority: section('AUTHORITY'),
    additional: section('ADDITIONAL'),
    raw: stdout,
  };
}
