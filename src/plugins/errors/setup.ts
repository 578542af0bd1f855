import { directiveError } from '../../corefile/errors.js';
import type { PluginSetup } from '../plugin.js';
import { durationArg, noArgs, once, unknownProperty } from '../../corefile/args.js';
import { ErrorsHandler, type ConsolidateRule } from './handler.js';

export const setup: PluginSetup = (ds, ctx) => {
  const d = once(ds, 'errors');
  noArgs(d);
  const rules: ConsolidateRule[] = [];
  let stacktrace = false;
  for (const p of d.block ?? []) {
    if (p.name === 'stacktrace') stacktrace = true;
    else if (p.name === 'consolidate') {
      if (p.args.length < 2 || p.args.length > 4)
        throw directiveError(p, 'consolidate DURATION REGEXP [LEVEL] [show_first]');
      const ms = durationArg(p.args[0], p, 'consolidate');
      let re: RegExp;
      try {
        re = new RegExp(p.args[1]!.text);
      } catch (e) {
        throw directiveError(p.args[1]!, `invalid regexp: ${(e as Error).message}`);
      }
      let level: ConsolidateRule['level'] = 'error';
      let showFirst = false;
      for (const a of p.args.slice(2)) {
        if (a.text === 'show_first') showFirst = true;
        else if (['warning', 'error', 'info', 'debug'].includes(a.text)) level = a.text as ConsolidateRule['level'];
        else throw directiveError(a, `unknown log level "${a.text}"`);
      }
      rules.push({ periodMs: ms, pattern: re, level, showFirst, count: 0, timer: null });
    } else unknownProperty(p, 'errors');
  }
  const h = new ErrorsHandler(rules, stacktrace, ctx.logger);
  return { name: 'errors', handler: h, shutdown: () => h.stop() };
};
