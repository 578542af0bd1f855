// Query logging in CoreDNS's formats. Only costs anything when the plugin is configured.

import { classToString, rcodeToString, typeToString } from '../../dns/constants.js';
import { unmappedIP } from '../../dns/ip.js';
import { isSubdomain } from '../../dns/name.js';
import { finalizeReply } from '../../server/reply.js';
import { Response, type Handler, type HandlerResult, type Next, type Request } from '../../server/request.js';
import { countDroppedLine, logBacklogged, type Logger } from '../../log.js';
import { classify, type ResponseClass } from '../responseclass.js';

export const COMMON_FORMAT =
  '{remote}:{port} - {>id} "{type} {class} {name} {proto} {size} {>do} {>bufsize}" {rcode} {>rflags} {rsize} {duration}';
export const COMBINED_FORMAT = COMMON_FORMAT + ' "{>opcode}"';

export interface LogRule {
  names: string[];
  format: string;
  classes: Set<ResponseClass>;
}

function flagsText(b: Buffer): string {
  const f = b.length >= 4 ? b.readUInt16BE(2) : 0;
  const out: string[] = [];
  if (f & 0x8000) out.push('qr');
  if (f & 0x0400) out.push('aa');
  if (f & 0x0200) out.push('tc');
  if (f & 0x0100) out.push('rd');
  if (f & 0x0080) out.push('ra');
  if (f & 0x0020) out.push('ad');
  if (f & 0x0010) out.push('cd');
  return out.join(',');
}

function clientIP(req: Request): string {
  return unmappedIP(req.client.remoteAddress);
}

export class LogHandler implements Handler {
  readonly name = 'log';

  constructor(
    private readonly rules: LogRule[],
    private readonly log: Logger,
  ) {}

  serveDNS(req: Request, next: Next): HandlerResult {
    const start = process.hrtime.bigint();
    const r = next(req);
    if (r instanceof Promise) return r.then((res) => this.record(req, res, start));
    return this.record(req, r, start);
  }

  private record(req: Request, res: Response, start: bigint): Response {
    // Encode once here and hand the bytes on, so the server does not encode again.
    const wire = finalizeReply(req, res);
    const out = Response.wire(wire, res.plugin);
    out.error = res.error;
    const rcode = wire.length >= 4 ? wire[3]! & 0xf : res.rcode;
    const answers = wire.length >= 8 ? wire.readUInt16BE(6) : 0;
    const cls = classify(rcode, answers);
    const dur = Number(process.hrtime.bigint() - start) / 1e9;
    for (const rule of this.rules) {
      if (!rule.names.some((n) => isSubdomain(req.name, n))) continue;
      if (!rule.classes.has(cls)) continue;
      // A line stdout has no room for is counted, not formatted.
      if (logBacklogged()) countDroppedLine();
      else this.log.info(this.format(rule.format, req, wire, rcode, dur));
      break;
    }
    return out;
  }

  private format(fmt: string, req: Request, wire: Buffer, rcode: number, dur: number): string {
    return fmt.replace(/\{(>?[a-z]+|\/[^{}]+)\}/g, (all, key: string) => {
      // `{/LABEL}`: a metadata label (the `metadata` plugin); "-" when no plugin set it, as CoreDNS.
      if (key.charCodeAt(0) === 0x2f) return req.metadata?.value(key.slice(1)) ?? '-';
      switch (key) {
        case 'remote':
          return req.client.family === 2 ? `[${clientIP(req)}]` : clientIP(req);
        case 'port':
          return String(req.client.remotePort);
        case '>id':
          return String(req.id);
        case 'type':
          return typeToString(req.qtype);
        case 'class':
          return classToString(req.qclass);
        case 'name':
          return req.qname;
        case 'proto':
          return req.client.proto;
        case 'size':
          return String(req.raw.length);
        case '>do':
          return String(req.do);
        case '>bufsize':
          return String(req.edns ? req.edns.udpSize : 512);
        case 'rcode':
          return rcodeToString(rcode);
        case '>rflags':
          return flagsText(wire);
        case 'rsize':
          return String(wire.length);
        case 'duration':
          return `${dur.toFixed(9).replace(/0+$/, '').replace(/\.$/, '.0')}s`;
        case '>opcode':
          return String(req.opcode);
        case 'local':
          return req.client.localAddress;
        default:
          return all;
      }
    });
  }
}
