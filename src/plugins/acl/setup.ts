import { directiveError } from '../../corefile/errors.js';
import { typeFromString } from '../../dns/constants.js';
import type { PluginSetup } from '../plugin.js';
import { zoneArgs } from '../../corefile/args.js';
import { ACL_COUNTERS, AclHandler, type Action, type Rule } from './handler.js';
import { parseCidr, type Cidr } from '../../dns/cidr.js';

const ACTIONS: ReadonlySet<string> = new Set(['allow', 'block', 'filter', 'drop']);

export const setup: PluginSetup = (ds, ctx) =>
  ds.map((d) => {
    const zones = zoneArgs(d.args, ctx.block.zones);
    const rules: Rule[] = [];
    for (const p of d.block ?? []) {
      if (!ACTIONS.has(p.name))
        throw directiveError(p, `acl: unexpected token '${p.name}'; expect 'allow', 'block', 'filter' or 'drop'`);
      let types: Set<number> | null = null;
      let nets: Cidr[] | null = null;
      let section: 'type' | 'net' | null = null;
      for (const t of p.args) {
        if (t.text === 'type' || t.text === 'net') {
          section = t.text;
          if (section === 'type') types ??= new Set();
          else nets ??= [];
          continue;
        }
        if (section === null) throw directiveError(t, `acl: unexpected token '${t.text}'; expect 'type | net'`);
        if (section === 'type') {
          if (t.text === '*') {
            types = null;
            section = 'type';
            continue;
          }
          const ty = typeFromString(t.text);
          if (ty === undefined) throw directiveError(t, `acl: unexpected token '${t.text}'; expect legal QTYPE`);
          types?.add(ty);
        } else {
          if (t.text === '*') {
            nets = null;
            continue;
          }
          const c = parseCidr(t.text);
          if (c === null) throw directiveError(t, `acl: illegal CIDR notation '${t.text}'`);
          nets?.push(c);
        }
      }
      // `type` or `net` written with nothing after it matches everything, as when omitted.
      if (types !== null && types.size === 0) types = null;
      if (nets !== null && nets.length === 0) nets = null;
      rules.push({ action: p.name as Action, types, nets });
    }
    return { name: 'acl', handler: new AclHandler(zones, rules, ctx.services.get(ACL_COUNTERS)) };
  });
