// Sets or clears header flags on queries (before the chain) and on responses (after it).

import { directiveError } from '../../corefile/errors.js';
import type { Directive } from '../../corefile/types.js';
import type { Message } from '../../dns/message.js';
import type { Handler, HandlerResult, Next, Request, Response } from '../../server/request.js';
import type { PluginSetup } from '../plugin.js';
import { once } from '../../corefile/args.js';

type Flag = 'aa' | 'ra' | 'rd' | 'cd' | 'ad';
interface Rule {
  set: boolean;
  flag: Flag;
}

const RESPONSE_FLAGS: ReadonlySet<string> = new Set(['aa', 'ra', 'rd', 'cd', 'ad']);
const QUERY_FLAGS: ReadonlySet<string> = new Set(['rd', 'cd', 'ad']);
/** Bit of each flag in the header's second 16-bit word. */
const FLAG_BITS: Record<Flag, number> = { aa: 0x0400, rd: 0x0100, ra: 0x0080, ad: 0x0020, cd: 0x0010 };

function applyToMessage(m: Message, rules: readonly Rule[]): void {
  for (const r of rules) m[r.flag] = r.set;
}

export class HeaderHandler implements Handler {
  readonly name = 'header';

  constructor(
    private readonly queryRules: readonly Rule[],
    private readonly responseRules: readonly Rule[],
  ) {}

  serveDNS(req: Request, next: Next): HandlerResult {
    if (this.queryRules.length) {
      let flags = req.flags;
      for (const r of this.queryRules) flags = r.set ? flags | FLAG_BITS[r.flag] : flags & ~FLAG_BITS[r.flag];
      (req as { flags: number }).flags = flags;
      req.raw.writeUInt16BE(flags, 2);
    }
    if (this.responseRules.length === 0) return next(req);
    const r = next(req);
    if (r instanceof Promise) return r.then((res) => this.rewrite(req, res));
    return this.rewrite(req, r);
  }

  private rewrite(req: Request, res: Response): Response {
    if (res.dropped) return res;
    const m = res.toMessage(req);
    applyToMessage(m, this.responseRules);
    res.setMessage(m);
    return res;
  }
}

function parseRules(
  p: Directive,
  words: readonly { text: string }[],
  allowed: ReadonlySet<string>,
  what: string,
): Rule[] {
  const action = words[0]?.text;
  if (action !== 'set' && action !== 'clear')
    throw directiveError(p, `header: unknown action "${action ?? ''}" (set or clear)`);
  if (words.length < 2) throw directiveError(p, `header: ${action} needs at least one flag`);
  return words.slice(1).map((w) => {
    const f = w.text.toLowerCase();
    if (!allowed.has(f)) throw directiveError(p, `header: flag "${w.text}" cannot be changed on ${what}`);
    return { set: action === 'set', flag: f as Flag };
  });
}

export const setup: PluginSetup = (ds) => {
  const d = once(ds, 'header');
  if (d.args.length) throw directiveError(d.args[0]!, `header: unexpected argument "${d.args[0]!.text}"`);
  if (!d.block || d.block.length === 0) throw directiveError(d, 'header: needs a block with at least one rule');
  const queryRules: Rule[] = [];
  const responseRules: Rule[] = [];
  for (const p of d.block) {
    const words = [{ text: p.name }, ...p.args];
    if (p.name === 'query') queryRules.push(...parseRules(p, words.slice(1), QUERY_FLAGS, 'queries'));
    else if (p.name === 'response') responseRules.push(...parseRules(p, words.slice(1), RESPONSE_FLAGS, 'responses'));
    // The older form without a selector is about responses.
    else responseRules.push(...parseRules(p, words, RESPONSE_FLAGS, 'responses'));
  }
  return { name: 'header', handler: new HeaderHandler(queryRules, responseRules) };
};
