import { dirname, isAbsolute, resolve } from 'node:path';
import { directiveError } from '../../corefile/errors.js';
import { CorefileError } from '../../corefile/errors.js';
import { canonicalZone, isSubdomain } from '../../dns/name.js';
import type { PluginSetup } from '../plugin.js';
import { durationArg, zoneArgs } from '../../corefile/args.js';
import { Fallthrough } from '../fallthrough.js';
import { FileHandler, loadZones, type FileOptions } from './handler.js';
import { ZoneFileError } from './zonefile.js';

export const setup: PluginSetup = (ds, ctx) =>
  ds.map((d) => {
    const f = d.args[0];
    if (!f) throw directiveError(d, 'file: missing the zone file name');
    const file = isAbsolute(f.text) ? f.text : resolve(dirname(ctx.corefile), f.text);
    const zones = zoneArgs(d.args.slice(1), ctx.block.zones);
    for (const z of zones)
      if (!ctx.block.zones.some((bz) => isSubdomain(z, bz)))
        throw directiveError(d, `file: zone ${z} is not inside the server block's zones`);
    const o: FileOptions = { file, zones, reloadMs: 60_000, fallthrough: new Fallthrough(null) };
    for (const p of d.block ?? []) {
      switch (p.name) {
        case 'reload':
          o.reloadMs = durationArg(p.args[0], p, 'file: reload');
          break;
        case 'fallthrough':
          o.fallthrough = new Fallthrough(p.args.length ? p.args.map((t) => canonicalZone(t.text)) : ['.']);
          break;
        case 'upstream':
          // Accepted and ignored, as CoreDNS does since 1.7 (out-of-zone CNAMEs go through the server's own chain).
          break;
        default:
          throw directiveError(p, `file: unknown property '${p.name}'`);
      }
    }
    let loaded: ReturnType<typeof loadZones>;
    try {
      loaded = loadZones(file, zones);
    } catch (e) {
      if (e instanceof ZoneFileError) throw new CorefileError(d.file, d.line, `file: ${e.message}`);
      const code = (e as NodeJS.ErrnoException).code;
      // As CoreDNS: a file that is not there yet is an error only without reload; else it is read when it appears.
      if (code === 'ENOENT' && o.reloadMs > 0) {
        ctx.logger.warn(`Failed to open "${file}": trying again in ${o.reloadMs / 1000}s`);
        loaded = new Map();
      } else throw new CorefileError(d.file, d.line, `file: ${f.text}: ${code ?? (e as Error).message}`);
    }
    const h = new FileHandler(o, loaded, (req) => ctx.resolve(req), ctx.logger, ctx.invalidation);
    return { name: 'file', handler: h, transfer: h, startup: () => h.start(), shutdown: () => h.stop() };
  });
