// `view NAME { expr EXPRESSION }`: the server block answers a query only when every expression is
// true for it; blocks on the same zone and port are tried in Corefile order, the one without a
// view last (the router does that with the filter this setup publishes).

import { directiveError } from '../../corefile/errors.js';
import { classToString, typeToString } from '../../dns/constants.js';
import { unmappedIP } from '../../dns/ip.js';
import type { Request } from '../../server/request.js';
import type { PluginSetup } from '../plugin.js';
import { once } from '../../corefile/args.js';
import { cidrContains, clientBytes, parseCidr, type Cidr } from '../../dns/cidr.js';
import { compileExpr, ExprError, type ExprEnv, type Value } from './expr.js';

const FUNCTIONS: ReadonlySet<string> = new Set([
  'bufsize',
  'class',
  'client_ip',
  'do',
  'id',
  'name',
  'opcode',
  'port',
  'proto',
  'server_ip',
  'server_port',
  'size',
  'type',
  'incidr',
  'metadata',
]);

const bracketed = (address: string) => {
  const ip = unmappedIP(address);
  return ip.includes(':') ? `[${ip}]` : ip;
};

/** CIDRs written in expressions, parsed once each. */
const cidrs = new Map<string, Cidr | null>();

class QueryEnv implements ExprEnv {
  req!: Request;

  call(name: string, args: Value[]): Value {
    const r = this.req;
    switch (name) {
      case 'bufsize':
        return r.edns ? r.edns.udpSize : 512;
      case 'class':
        return classToString(r.qclass);
      case 'client_ip':
        return bracketed(r.client.remoteAddress);
      case 'do':
        return r.do;
      case 'id':
        return r.id;
      case 'name':
        return r.qname;
      case 'opcode':
        return r.opcode;
      case 'port':
        return String(r.client.remotePort);
      case 'proto':
        return r.client.proto;
      case 'server_ip':
        return bracketed(r.client.localAddress);
      case 'server_port':
        return String(r.client.localPort);
      case 'size':
        return r.raw.length;
      case 'type':
        return typeToString(r.qtype);
      case 'incidr': {
        const [ip, cidr] = args;
        if (typeof ip !== 'string' || typeof cidr !== 'string') return false;
        let c = cidrs.get(cidr);
        if (c === undefined) {
          c = parseCidr(cidr);
          if (cidrs.size < 1024) cidrs.set(cidr, c);
        }
        const b = clientBytes(ip.startsWith('[') ? ip.slice(1, -1) : ip);
        return c !== null && b !== null && cidrContains(c, b);
      }
      case 'metadata':
        return '';
      default:
        return null;
    }
  }
}

export const setup: PluginSetup = (ds) => {
  const d = once(ds, 'view');
  if (d.args.length !== 1) throw directiveError(d, 'view needs exactly one name: view NAME { expr EXPRESSION }');
  const name = d.args[0]!.text;
  const tests: Array<(env: ExprEnv) => boolean> = [];
  for (const p of d.block ?? []) {
    if (p.name !== 'expr') throw directiveError(p, `view: unknown property '${p.name}'`);
    if (p.args.length === 0) throw directiveError(p, 'view: expr needs an expression');
    const src = p.args.map((t) => t.text).join(' ');
    try {
      tests.push(compileExpr(src, FUNCTIONS));
    } catch (e) {
      if (e instanceof ExprError) throw directiveError(p, `view: ${e.message}`);
      throw e;
    }
  }
  const env = new QueryEnv();
  return {
    name: 'view',
    viewName: name,
    routeFilter: (req: Request) => {
      env.req = req;
      for (const t of tests) if (!t(env)) return false;
      return true;
    },
  };
};
