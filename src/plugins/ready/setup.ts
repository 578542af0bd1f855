import { directiveError } from '../../corefile/errors.js';
import type { PluginSetup } from '../plugin.js';
import { once, unknownProperty } from '../../corefile/args.js';

/**
 * `ready [ADDRESS] { monitor until-ready|continuously }`: GET /ready is 200 OK once every
 * plugin that reports readiness is ready, else 503 with their names, comma separated.
 */
export const setup: PluginSetup = (ds, ctx) => {
  const d = once(ds, 'ready');
  if (d.args.length > 1) throw directiveError(d.args[1]!, 'ready takes at most one address');
  const address = d.args[0]?.text || ':8181';
  let continuously = false;
  for (const p of d.block ?? []) {
    if (p.name === 'monitor') {
      const m = p.args[0]?.text;
      if (p.args.length !== 1 || (m !== 'until-ready' && m !== 'continuously'))
        throw directiveError(p, 'monitor until-ready|continuously');
      continuously = m === 'continuously';
    } else unknownProperty(p, 'ready');
  }
  let release: (() => Promise<void>) | null = null;
  let wasReady = false;
  return {
    name: 'ready',
    async startup() {
      release = await ctx.http.route(address, '/ready', (_req, res) => {
        if (ctx.shuttingDown()) {
          res.writeHead(503, { 'content-type': 'text/plain; charset=utf-8' });
          res.end('Shutting down');
          return;
        }
        if (!wasReady || continuously) {
          const waiting = ctx.instances().filter((i) => i.ready !== undefined && !i.ready());
          const names = [...new Set(waiting.map((i) => i.name))].sort();
          if (names.length) {
            // CoreDNS's line of names first; then, one a line, what the user must fix.
            const details = [
              ...new Set(
                waiting.map((i) => (i.readyDetail?.() ? `${i.name}: ${i.readyDetail()}` : '')).filter(Boolean),
              ),
            ];
            res.writeHead(503, { 'content-type': 'text/plain; charset=utf-8' });
            res.end([names.join(','), ...details].join('\n'));
            return;
          }
          wasReady = true;
        }
        res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' });
        res.end('OK');
      });
    },
    async shutdown() {
      await release?.();
    },
  };
};
