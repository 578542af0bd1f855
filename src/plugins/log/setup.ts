import { logger } from '../../log.js';
import { directiveError } from '../../corefile/errors.js';
import { canonicalZone } from '../../dns/name.js';
import type { PluginSetup } from '../plugin.js';
import { unknownProperty } from '../../corefile/args.js';
import { COMBINED_FORMAT, COMMON_FORMAT, LogHandler, type LogRule } from './handler.js';
import type { ResponseClass } from '../responseclass.js';

export const setup: PluginSetup = (ds, ctx) => {
  const rules: LogRule[] = [];
  for (const d of ds) {
    const names: string[] = [];
    let format = COMMON_FORMAT;
    for (const a of d.args) {
      if (a.text === '{common}') format = COMMON_FORMAT;
      else if (a.text === '{combined}') format = COMBINED_FORMAT;
      else if (a.text.includes('{')) format = a.text;
      else names.push(canonicalZone(a.text));
    }
    const classes = new Set<ResponseClass>();
    for (const p of d.block ?? []) {
      if (p.name !== 'class') unknownProperty(p, 'log');
      if (p.args.length === 0) throw directiveError(p, 'class needs at least one of success, denial, error, all');
      for (const c of p.args) {
        if (c.text === 'all') ['success', 'denial', 'error'].forEach((x) => classes.add(x as ResponseClass));
        else if (c.text === 'success' || c.text === 'denial' || c.text === 'error') classes.add(c.text);
        else throw directiveError(c, `unknown class "${c.text}" (success, denial, error or all)`);
      }
    }
    if (classes.size === 0) ['success', 'denial', 'error'].forEach((x) => classes.add(x as ResponseClass));
    rules.push({ names: names.length ? names : ['.'], format, classes });
  }
  // CoreDNS prints query lines as "[INFO] <line>", without a plugin prefix.
  void ctx;
  return { name: 'log', handler: new LogHandler(rules, logger('')) };
};
