// rewrite's `edns0` rules: set, replace, append or unset an option of the query's OPT record
// (EDNS0_LOCAL, NSID, client subnet), after CoreDNS's edns0.go.

import { parseIP, unmappedIP } from '../../dns/ip.js';
import type { Request } from '../../server/request.js';
import type { Rule, RewriteState } from './rules.js';

export type Edns0Action = 'set' | 'replace' | 'append' | 'unset';

export const NSID = 3;
export const SUBNET = 8;

/** Puts `data` under `code` as the action says; true when the options changed. */
function applyOption(st: RewriteState, action: Edns0Action, code: number, data: () => Buffer | null): boolean {
  const opts = st.ednsOptions();
  const i = opts.findIndex((o) => o.code === code);
  if (action === 'unset') {
    if (i < 0) return false;
    for (let j = opts.length - 1; j >= 0; j--) if (opts[j]!.code === code) opts.splice(j, 1);
    return true;
  }
  if (i >= 0 ? action === 'append' : action === 'replace') return false;
  const d = data();
  if (d === null) return false;
  if (i >= 0) opts[i] = { code, data: d };
  else opts.push({ code, data: d });
  return true;
}

function u16(n: number): Buffer {
  const b = Buffer.alloc(2);
  b.writeUInt16BE(n & 0xffff);
  return b;
}

function clientIp(req: Request): string {
  return unmappedIP(req.client.remoteAddress);
}

/** The variables CoreDNS's EDNS0_LOCAL data may name. */
export const EDNS0_VARIABLES: ReadonlySet<string> = new Set([
  '{qname}',
  '{qtype}',
  '{client_ip}',
  '{client_port}',
  '{protocol}',
  '{server_ip}',
  '{server_port}',
]);

function variableData(req: Request, variable: string): Buffer | null {
  switch (variable) {
    case '{qname}':
      return Buffer.from(req.qname, 'latin1');
    case '{qtype}':
      return u16(req.qtype);
    case '{client_ip}':
      return parseIP(clientIp(req));
    case '{server_ip}':
      return parseIP(unmappedIP(req.client.localAddress));
    case '{client_port}':
      return u16(req.client.remotePort);
    case '{server_port}':
      return u16(req.client.localPort);
    case '{protocol}':
      return Buffer.from(req.client.proto);
  }
  // A metadata label: its value, or nothing (the rule is then skipped, as in CoreDNS).
  const v = req.metadata?.value(variable.slice(1, -1));
  return v ? Buffer.from(v, 'latin1') : null;
}

/** `edns0 local ACTION CODE DATA [revert]`: DATA is text, 0x-hex, or a {variable}. */
export class Edns0LocalRule implements Rule {
  constructor(
    readonly stop: boolean,
    private readonly action: Edns0Action,
    private readonly code: number,
    private readonly data: Buffer | null,
    private readonly variable: string | null,
    private readonly revert: boolean,
  ) {}

  rewrite(st: RewriteState): boolean {
    const done = applyOption(st, this.action, this.code, () => this.data ?? variableData(st.req, this.variable!));
    if (done && this.revert) st.revertCodes.push(this.code);
    return done;
  }
}

/** `edns0 nsid ACTION [revert]`: an empty NSID option, asking the next server for its NSID. */
export class Edns0NsidRule implements Rule {
  constructor(
    readonly stop: boolean,
    private readonly action: Edns0Action,
    private readonly revert: boolean,
  ) {}

  rewrite(st: RewriteState): boolean {
    const done = applyOption(st, this.action, NSID, () => Buffer.alloc(0));
    if (done && this.revert) st.revertCodes.push(NSID);
    return done;
  }
}

/** `edns0 subnet ACTION V4BITS V6BITS [revert]`: the client's address, cut to a prefix (RFC 7871). */
export class Edns0SubnetRule implements Rule {
  constructor(
    readonly stop: boolean,
    private readonly action: Edns0Action,
    private readonly v4Bits: number,
    private readonly v6Bits: number,
    private readonly revert: boolean,
  ) {}

  rewrite(st: RewriteState): boolean {
    const done = applyOption(st, this.action, SUBNET, () => ecsData(clientIp(st.req), this.v4Bits, this.v6Bits));
    if (done && this.revert) st.revertCodes.push(SUBNET);
    return done;
  }
}

/** ECS option data: family, source prefix, scope 0, the address cut to whole octets of the prefix. */
export function ecsData(ip: string, v4Bits: number, v6Bits: number): Buffer | null {
  const a = parseIP(ip);
  if (a === null) return null;
  const v4 = a.length === 4;
  const bits = v4 ? v4Bits : v6Bits;
  const octets = Math.ceil(bits / 8);
  const out = Buffer.alloc(4 + octets);
  out.writeUInt16BE(v4 ? 1 : 2, 0);
  out[2] = bits;
  out[3] = 0;
  for (let i = 0; i < octets; i++) {
    const keep = Math.min(8, bits - i * 8);
    out[4 + i] = a[i]! & ((0xff << (8 - keep)) & 0xff);
  }
  return out;
}
