import cluster from 'node:cluster';
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { directiveError } from '../../corefile/errors.js';
import type { PluginSetup } from '../plugin.js';
import { leadProcess } from '../../log.js';
import { durationArg, noBlock, once } from '../../corefile/args.js';

/**
 * `reload [INTERVAL [JITTER]]` (defaults 30s and 15s): checks the Corefile and its imports
 * every INTERVAL (plus a random part of JITTER) and reloads when their SHA-512 changes.
 * SIGUSR1 reloads at once whether or not this plugin is used.
 */
export const setup: PluginSetup = (ds, ctx) => {
  const d = once(ds, 'reload');
  noBlock(d);
  if (d.args.length > 2) throw directiveError(d.args[2]!, 'reload [INTERVAL [JITTER]]');
  let interval = 30_000;
  let jitter = 15_000;
  if (d.args[0]) {
    interval = durationArg(d.args[0], d, 'reload interval');
    if (interval < 2000)
      throw directiveError(d.args[0], `interval value must be greater or equal to 2s: ${d.args[0].text}`);
  }
  if (d.args[1]) {
    jitter = durationArg(d.args[1], d, 'reload jitter');
    if (jitter < 1000)
      throw directiveError(d.args[1], `jitter value must be greater or equal to 1s: ${d.args[1].text}`);
  }
  if (jitter > interval / 2) jitter = interval / 2;
  const files = [...ctx.configFiles];
  let timer: NodeJS.Timeout | null = null;
  let lastHash = '';
  const digest = async (): Promise<string> => {
    const h = createHash('sha512');
    for (const f of files) {
      try {
        h.update(await readFile(f));
      } catch {
        h.update(`missing:${f}`);
      }
    }
    return h.digest('hex');
  };
  return {
    name: 'reload',
    async startup() {
      if (files.length === 0) return; // the built-in configuration has no file to watch
      // With workers the primary polls and reloads them all together (serve.ts).
      if (cluster.isWorker) return;
      lastHash = await digest();
      // CoreDNS logs this at every start and reload: operators compare it with `sha512sum Corefile`.
      if (leadProcess()) ctx.logger.info(`Running configuration SHA512 = ${lastHash}`);
      const period = interval + Math.floor(Math.random() * jitter);
      timer = setInterval(() => {
        void digest().then((h) => {
          if (h !== lastHash) {
            lastHash = h;
            ctx.requestReload('changed');
          }
        });
      }, period);
      timer.unref();
    },
    shutdown() {
      if (timer) clearInterval(timer);
      timer = null;
    },
  };
};
