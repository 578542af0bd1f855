// `pprof [ADDRESS]`: CoreDNS's profiling endpoint, with what a Node.js process can give: a CPU
// profile for N seconds (V8 .cpuprofile JSON) and a heap snapshot (V8 .heapsnapshot), both of which
// Chrome DevTools and VS Code open. Bound to localhost:6053 by default, as CoreDNS.

import { Session } from 'node:inspector';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { directiveError } from '../../corefile/errors.js';
import type { PluginSetup } from '../plugin.js';
import { intArg, once, unknownProperty } from '../../corefile/args.js';

/** Longest CPU profile one request may ask for (pprof's own limit is the client's timeout). */
const MAX_SECONDS = 300;

/** One profile at a time: V8 has one profiler, and two snapshots at once would double the pause. */
let busy = false;

function post<T>(s: Session, method: string, params?: object): Promise<T> {
  return new Promise((resolve, reject) =>
    s.post(method, params ?? {}, (err, res) => (err ? reject(err) : resolve(res as T))),
  );
}

function refuse(res: ServerResponse, code: number, text: string): void {
  res.writeHead(code, { 'content-type': 'text/plain; charset=utf-8' });
  res.end(text + '\n');
}

async function cpuProfile(req: IncomingMessage, res: ServerResponse): Promise<void> {
  const q = new URL(req.url ?? '/', 'http://x').searchParams.get('seconds') ?? '30';
  const seconds = Number(q);
  if (!Number.isInteger(seconds) || seconds < 1 || seconds > MAX_SECONDS)
    return refuse(res, 400, `seconds must be 1..${MAX_SECONDS}`);
  if (busy) return refuse(res, 409, 'another profile is being taken');
  busy = true;
  const s = new Session();
  s.connect();
  try {
    await post(s, 'Profiler.enable');
    await post(s, 'Profiler.start');
    await new Promise((r) => setTimeout(r, seconds * 1000));
    const { profile } = await post<{ profile: unknown }>(s, 'Profiler.stop');
    res.writeHead(200, {
      'content-type': 'application/json',
      'content-disposition': 'attachment; filename="clusterdns.cpuprofile"',
    });
    res.end(JSON.stringify(profile));
  } finally {
    s.disconnect();
    busy = false;
  }
}

async function heapSnapshot(_req: IncomingMessage, res: ServerResponse): Promise<void> {
  if (busy) return refuse(res, 409, 'another profile is being taken');
  busy = true;
  const s = new Session();
  s.connect();
  try {
    res.writeHead(200, {
      'content-type': 'application/json',
      'content-disposition': 'attachment; filename="clusterdns.heapsnapshot"',
    });
    // The snapshot arrives in chunks; each goes out as it comes instead of being held whole.
    s.on('HeapProfiler.addHeapSnapshotChunk', (m) => res.write(m.params.chunk));
    await post(s, 'HeapProfiler.takeHeapSnapshot', { reportProgress: false });
    res.end();
  } finally {
    s.disconnect();
    busy = false;
  }
}

const INDEX = `clusterdns profiles (V8 formats; open them in Chrome DevTools or VS Code)
/debug/pprof/profile?seconds=N   CPU profile for N seconds (default 30): clusterdns.cpuprofile
/debug/pprof/heap                heap snapshot: clusterdns.heapsnapshot
`;

export const setup: PluginSetup = (ds, ctx) => {
  const d = once(ds, 'pprof');
  if (d.args.length > 1) throw directiveError(d.args[1]!, 'pprof takes at most one address');
  const address = d.args[0]?.text ?? 'localhost:6053';
  for (const p of d.block ?? []) {
    // `block [RATE]` (Go's blocking profile) has no Node equivalent: accepted and ignored.
    if (p.name === 'block') {
      if (p.args.length) intArg(p.args[0], p, 'block', 0, 2 ** 31 - 1);
    } else unknownProperty(p, 'pprof');
  }
  const wrap =
    (f: (req: IncomingMessage, res: ServerResponse) => Promise<void>) =>
    (req: IncomingMessage, res: ServerResponse) => {
      f(req, res).catch((e: unknown) => {
        ctx.logger.error(`profile failed: ${(e as Error).message}`);
        if (!res.headersSent) refuse(res, 500, 'profile failed');
        else res.destroy();
      });
    };
  const releases: Array<() => Promise<void>> = [];
  return {
    name: 'pprof',
    async startup() {
      releases.push(
        await ctx.http.route(address, '/debug/pprof/', (_req, res) => {
          res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' });
          res.end(INDEX);
        }),
      );
      releases.push(await ctx.http.route(address, '/debug/pprof/profile', wrap(cpuProfile)));
      releases.push(await ctx.http.route(address, '/debug/pprof/heap', wrap(heapSnapshot)));
    },
    async shutdown() {
      for (const r of releases.splice(0)) await r();
    },
  };
};
