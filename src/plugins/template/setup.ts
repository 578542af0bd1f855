// Parses `template CLASS TYPE [ZONE...] { match, answer, additional, authority, rcode,
// ederror, fallthrough, upstream }` as CoreDNS's template/setup.go does; every template
// and regex is compiled here, so one that does not parse stops the start with FILE:LINE.

import { directiveError } from '../../corefile/errors.js';
import { goRegExp } from '../../corefile/regexp.js';
import type { Token } from '../../corefile/types.js';
import { QClass, rcodeFromString, typeFromString } from '../../dns/constants.js';
import { canonicalZone } from '../../dns/name.js';
import { Fallthrough } from '../fallthrough.js';
import type { PluginSetup } from '../plugin.js';
import { intArg, unknownProperty } from '../../corefile/args.js';
import { GoTemplate, TemplateError, type Value } from './gotemplate.js';
import { TemplateHandler, type Template } from './handler.js';
import { TEMPLATE_METRICS } from './metrics.js';

const CLASSES: ReadonlyMap<string, number> = new Map([
  ['IN', QClass.IN],
  ['CH', QClass.CH],
  ['HS', QClass.HS],
  ['NONE', QClass.NONE],
  ['ANY', QClass.ANY],
]);

/** CoreDNS registers strconv.ParseUint as parseInt: (s, base, bitSize) → unsigned, or an error. */
function parseUint(s: Value, base: Value, bits: Value): Value {
  if (typeof s !== 'string' || typeof base !== 'number' || typeof bits !== 'number')
    throw new TemplateError('error calling parseInt: wrong argument types (string, int, int)');
  let text = s.replace(/_/g, '');
  let b = base;
  if (b === 0) {
    b = /^0[xX]/.test(text) ? 16 : /^0[bB]/.test(text) ? 2 : /^0[oO]?/.test(text) && text.length > 1 ? 8 : 10;
    text = text.replace(/^0[xXbBoO]/, '');
  }
  const digits = '0123456789abcdefghijklmnopqrstuvwxyz'.slice(0, b);
  if (b < 2 || b > 36 || text === '' || [...text.toLowerCase()].some((c) => !digits.includes(c))) {
    throw new TemplateError(`error calling parseInt: strconv.ParseUint: parsing ${JSON.stringify(s)}: invalid syntax`);
  }
  let v = 0n;
  for (const c of text.toLowerCase()) v = v * BigInt(b) + BigInt(digits.indexOf(c));
  const size = bits === 0 ? 64 : bits;
  if (v >= 1n << BigInt(size))
    throw new TemplateError(
      `error calling parseInt: strconv.ParseUint: parsing ${JSON.stringify(s)}: value out of range`,
    );
  return Number(v);
}

const FUNCS: ReadonlyMap<string, (...a: Value[]) => Value> = new Map([['parseInt', parseUint]]);

function compile(tok: Token, section: string): GoTemplate {
  try {
    return GoTemplate.parse(section, tok.text, FUNCS);
  } catch (e) {
    if (e instanceof TemplateError)
      throw directiveError(tok, `template: could not compile template: ${tok.text}, ${e.message}`);
    throw e;
  }
}

export const setup: PluginSetup = (ds, ctx) => {
  const templates: Template[] = [];
  const allZones: string[] = [];
  for (const d of ds) {
    const t: Template = {
      qclass: QClass.ANY,
      qtype: 255,
      zones: ctx.block.zones,
      regexes: [],
      answer: [],
      additional: [],
      authority: [],
      rcode: 0,
      fall: new Fallthrough(null),
      upstream: false,
      ede: null,
    };
    const [clsTok, typeTok, ...zoneToks] = d.args;
    if (clsTok) {
      const c = CLASSES.get(clsTok.text.toUpperCase());
      if (c === undefined) throw directiveError(clsTok, `template: invalid query class ${clsTok.text}`);
      t.qclass = c;
    }
    if (typeTok) {
      const ty = typeFromString(typeTok.text);
      if (ty === undefined) throw directiveError(typeTok, `template: invalid RR class ${typeTok.text}`);
      t.qtype = ty;
    }
    if (zoneToks.length) t.zones = zoneToks.map((z) => canonicalZone(z.text));
    for (const p of d.block ?? []) {
      switch (p.name) {
        case 'match':
          if (p.args.length === 0) throw directiveError(p, 'template: match needs at least one regex');
          for (const a of p.args) {
            try {
              t.regexes.push(goRegExp(a.text));
            } catch (e) {
              throw directiveError(a, `template: could not parse regex: ${a.text}, ${(e as Error).message}`);
            }
          }
          break;
        case 'answer':
        case 'additional':
        case 'authority':
          if (p.args.length === 0) throw directiveError(p, `template: ${p.name} needs a template`);
          for (const a of p.args) t[p.name].push(compile(a, p.name));
          break;
        case 'rcode': {
          if (p.args.length !== 1) throw directiveError(p, 'template: rcode needs exactly one argument');
          const r = rcodeFromString(p.args[0]!.text);
          if (r === undefined) throw directiveError(p.args[0]!, `template: unknown rcode ${p.args[0]!.text}`);
          t.rcode = r;
          break;
        }
        case 'ederror': {
          const code = intArg(p.args[0], p, 'template: ederror', 0, 0xffff);
          t.ede = {
            code,
            text: p.args
              .slice(1)
              .map((a) => a.text)
              .join(' '),
          };
          break;
        }
        case 'fallthrough':
          t.fall = new Fallthrough(p.args.length ? p.args.map((a) => canonicalZone(a.text)) : ['.']);
          break;
        case 'upstream':
          // CoreDNS ignores an address here (deprecated): lookups go through this server block.
          t.upstream = true;
          break;
        default:
          unknownProperty(p, 'template');
      }
    }
    if (t.regexes.length === 0) t.regexes.push(/.*/);
    templates.push(t);
    for (const z of t.zones) if (!allZones.includes(z)) allZones.push(z);
  }
  return {
    name: 'template',
    handler: new TemplateHandler(
      allZones,
      templates,
      ctx.block.serverLabel,
      (req) => ctx.resolve(req),
      ctx.services.get(TEMPLATE_METRICS),
    ),
  };
};
