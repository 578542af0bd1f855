import { directiveError } from '../../corefile/errors.js';
import type { PluginSetup } from '../plugin.js';
import { durationArg, noArgs, once, unknownProperty } from '../../corefile/args.js';
import { serveStatus } from '../../status/serve.js';

/**
 * `health [ADDRESS] { lameduck DURATION; status }`: GET /health answers 200 OK while the
 * process runs; with `status`, /status and /status.json show live numbers on the same port.
 */
export const setup: PluginSetup = (ds, ctx) => {
  const d = once(ds, 'health');
  if (d.args.length > 1) throw directiveError(d.args[1]!, 'health takes at most one address');
  const address = d.args[0]?.text || ':8080';
  let lameduck = 0;
  let status = false;
  for (const p of d.block ?? []) {
    if (p.name === 'lameduck') {
      if (p.args.length !== 1) throw directiveError(p, 'lameduck needs one duration');
      lameduck = durationArg(p.args[0], p, 'lameduck');
    } else if (p.name === 'status') {
      noArgs(p);
      status = true;
    } else unknownProperty(p, 'health');
  }
  let release: (() => Promise<void>) | null = null;
  let releaseStatus: (() => Promise<void>) | null = null;
  return {
    name: 'health',
    async startup() {
      release = await ctx.http.route(address, '/health', (_req, res) => {
        res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' });
        res.end('OK');
      });
      if (status) releaseStatus = await serveStatus(ctx.http, address, () => ctx.instances(), ctx.services);
    },
    async shutdown() {
      await releaseStatus?.();
      await release?.();
    },
    lameduckMs: () => lameduck,
  };
};
