// etcd v3 through its own JSON gateway (grpc-gateway, built into every etcd v3 server at /v3/):
// a range read of a prefix and a watch stream from the revision after it. No gRPC stack to
// load (an etcd3 client brings @grpc/grpc-js and protobufjs); one HTTP/1.1 keep-alive agent.

import http from 'node:http';
import https from 'node:https';
import { readFileSync } from 'node:fs';

export interface EtcdOptions {
  endpoints: string[];
  username?: string;
  password?: string;
  tls?: { cert: string; key: string; ca: string };
}

export interface KeyValue {
  key: string;
  value: string;
  /** Lease ID (0: none): a leased key's TTL is the lease's. */
  lease: string;
}

export interface WatchEvent {
  type: 'put' | 'delete';
  kv: KeyValue;
}

const b64 = (s: string) => Buffer.from(s, 'utf8').toString('base64');
const unb64 = (s: string | undefined) => (s === undefined ? '' : Buffer.from(s, 'base64').toString('utf8'));

/** The first key after every key with this prefix (etcd's range_end for a prefix). */
export function prefixEnd(prefix: string): string {
  const b = Buffer.from(prefix, 'utf8');
  for (let i = b.length - 1; i >= 0; i--) {
    if (b[i]! < 0xff) {
      b[i]!++;
      return b.subarray(0, i + 1).toString('latin1');
    }
  }
  return '\0';
}

function rangeEnd64(prefix: string): string {
  const e = prefixEnd(prefix);
  return Buffer.from(e, 'latin1').toString('base64');
}

interface RawKv {
  key?: string;
  value?: string;
  lease?: string;
}

function kvOf(r: RawKv): KeyValue {
  return { key: unb64(r.key), value: unb64(r.value), lease: r.lease ?? '0' };
}

export class EtcdError extends Error {
  constructor(
    message: string,
    readonly status: number,
  ) {
    super(message);
    this.name = 'EtcdError';
  }
}

export class EtcdClient {
  private readonly agent: http.Agent;
  private token: string | null = null;
  private next = 0;
  private readonly tlsFiles: { cert: Buffer; key: Buffer; ca: Buffer } | null;

  constructor(private readonly o: EtcdOptions) {
    this.tlsFiles = o.tls
      ? { cert: readFileSync(o.tls.cert), key: readFileSync(o.tls.key), ca: readFileSync(o.tls.ca) }
      : null;
    this.agent = this.tlsFiles
      ? new https.Agent({ keepAlive: true, maxSockets: 4 })
      : new http.Agent({ keepAlive: true, maxSockets: 4 });
  }

  close(): void {
    this.agent.destroy();
  }

  /** Round-robin over the endpoints: a request that fails tries the next one next time. */
  private endpoint(): URL {
    const e = this.o.endpoints[this.next % this.o.endpoints.length]!;
    return new URL(e);
  }

  private rotate(): void {
    this.next++;
  }

  private request(
    path: string,
    body: unknown,
    stream?: (obj: Record<string, unknown>) => void,
    signal?: AbortSignal,
  ): Promise<Record<string, unknown>> {
    const url = this.endpoint();
    const mod = url.protocol === 'https:' ? https : http;
    const payload = JSON.stringify(body);
    return new Promise((resolve, reject) => {
      const req = mod.request(
        {
          host: url.hostname,
          port: url.port || (url.protocol === 'https:' ? 443 : 2379),
          path,
          method: 'POST',
          agent: stream ? false : this.agent,
          headers: {
            'content-type': 'application/json',
            'content-length': Buffer.byteLength(payload),
            ...(this.token ? { authorization: this.token } : {}),
          },
          ...(this.tlsFiles ?? {}),
          signal,
          timeout: stream ? 0 : 5000,
        },
        (res) => {
          let buf = '';
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => {
            buf += chunk;
            if (!stream) {
              if (buf.length > 64 * 1024 * 1024) req.destroy(new Error('etcd reply larger than 64 MB'));
              return;
            }
            // The gateway streams one JSON object per line.
            let nl: number;
            while ((nl = buf.indexOf('\n')) >= 0) {
              const line = buf.slice(0, nl).trim();
              buf = buf.slice(nl + 1);
              if (line) {
                try {
                  stream(JSON.parse(line) as Record<string, unknown>);
                } catch (e) {
                  req.destroy(e as Error);
                  return;
                }
              }
            }
            if (buf.length > 16 * 1024 * 1024) req.destroy(new Error('etcd watch message larger than 16 MB'));
          });
          res.on('end', () => {
            if (res.statusCode !== 200) {
              let msg = `HTTP ${res.statusCode}`;
              try {
                const j = JSON.parse(buf) as { error?: string; message?: string };
                msg = j.message ?? j.error ?? msg;
              } catch {
                // not JSON: the status says enough
              }
              reject(new EtcdError(msg, res.statusCode ?? 0));
              return;
            }
            try {
              resolve(stream ? {} : (JSON.parse(buf || '{}') as Record<string, unknown>));
            } catch (e) {
              reject(e);
            }
          });
          res.on('error', reject);
        },
      );
      req.on('timeout', () => req.destroy(new Error('etcd did not answer in 5 s')));
      req.on('error', (e) => {
        this.rotate();
        reject(e);
      });
      req.end(payload);
    });
  }

  /** With credentials, a token first (and again when etcd says it expired). */
  private async call(path: string, body: unknown): Promise<Record<string, unknown>> {
    if (this.o.username !== undefined && this.token === null) await this.authenticate();
    try {
      return await this.request(path, body);
    } catch (e) {
      if (e instanceof EtcdError && this.o.username !== undefined && /token|auth/i.test(e.message)) {
        await this.authenticate();
        return this.request(path, body);
      }
      throw e;
    }
  }

  private async authenticate(): Promise<void> {
    this.token = null;
    const r = await this.request('/v3/auth/authenticate', { name: this.o.username, password: this.o.password });
    if (typeof r.token !== 'string') throw new EtcdError('authentication gave no token', 0);
    this.token = r.token;
  }

  /** Every key under `prefix`, and the store's revision they were read at. */
  async range(prefix: string): Promise<{ kvs: KeyValue[]; revision: number }> {
    const r = await this.call('/v3/kv/range', { key: b64(prefix), range_end: rangeEnd64(prefix) });
    const kvs = Array.isArray(r.kvs) ? (r.kvs as RawKv[]).map(kvOf) : [];
    const header = r.header as { revision?: string } | undefined;
    return { kvs, revision: Number(header?.revision ?? 0) };
  }

  /**
   * Watches `prefix` from `fromRevision` until the stream ends, fails or `signal` fires. Resolves
   * with the compacted revision when etcd no longer has `fromRevision` (the caller reads again).
   */
  async watch(
    prefix: string,
    fromRevision: number,
    onEvents: (ev: WatchEvent[], revision: number) => void,
    signal: AbortSignal,
  ): Promise<{ compacted: boolean }> {
    if (this.o.username !== undefined && this.token === null) await this.authenticate();
    let compacted = false;
    await this.request(
      '/v3/watch',
      { create_request: { key: b64(prefix), range_end: rangeEnd64(prefix), start_revision: String(fromRevision) } },
      (obj) => {
        const res = obj.result as
          | {
              events?: Array<{ type?: string; kv?: RawKv }>;
              header?: { revision?: string };
              compact_revision?: string;
              canceled?: boolean;
            }
          | undefined;
        if (obj.error !== undefined) throw new EtcdError(JSON.stringify(obj.error).slice(0, 200), 0);
        if (res === undefined) return;
        if (res.compact_revision !== undefined && res.compact_revision !== '0') {
          // etcd no longer has that revision: end this stream, the caller reads the prefix again.
          compacted = true;
          throw new EtcdError('watch revision compacted', 0);
        }
        if (!res.events?.length) return;
        const evs: WatchEvent[] = res.events.map((e) => ({
          type: e.type === 'DELETE' ? 'delete' : 'put',
          kv: kvOf(e.kv ?? {}),
        }));
        onEvents(evs, Number(res.header?.revision ?? 0));
      },
      signal,
    ).catch((e: unknown) => {
      if (compacted || signal.aborted) return;
      throw e;
    });
    return { compacted };
  }
}
