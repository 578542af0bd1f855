// CPA's health endpoints: /healthz is always 200 while the process runs; /last-poll is 500
// with the error text when the most recent poll failed.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { LastPoll } from './autoscaler.js';

export async function startHealthServer(
  port: number,
  lastPoll: () => LastPoll,
): Promise<{ port: number; close(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    const reply = (status: number, text: string) => {
      res.writeHead(status, { 'Content-Type': 'text/plain; charset=utf-8' });
      res.end(text.endsWith('\n') ? text : `${text}\n`);
    };
    if (req.method !== 'GET' && req.method !== 'HEAD') return reply(405, 'method not allowed');
    if (path === '/healthz') return reply(200, 'ok');
    if (path === '/last-poll') {
      const p = lastPoll();
      if (p === undefined) return reply(200, 'no poll yet');
      if (p.ok) return reply(200, `ok ${new Date(p.time).toISOString()}`);
      return reply(500, `${new Date(p.time).toISOString()} ${p.error}`);
    }
    reply(404, 'not found: try /healthz or /last-poll');
  });
  await new Promise<void>((ok, fail) => {
    server.once('error', fail);
    server.listen(port, () => {
      server.off('error', fail);
      ok();
    });
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((ok) => {
        server.close(() => ok());
        server.closeAllConnections();
      }),
  };
}
