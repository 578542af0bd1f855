// The hot-path parser: header, the one question and the OPT record of a query, nothing more.
// Names are built with one pass over the bytes into a scratch buffer and one latin1 slice.

import { QType } from './constants.js';
import { decodeName, skipName, NameError, NAME_OCTET, NameOctet } from './name.js';

export interface EdnsInfo {
  udpSize: number;
  version: number;
  do: boolean;
  /** Offset of the OPT RR in the query, and its length, to copy options when needed. */
  optOffset: number;
  optLength: number;
}

/** What the server needs to route and answer a query. */
export interface ParsedQuery {
  id: number;
  flags: number;
  opcode: number;
  qname: string;
  qnameLower: string;
  qtype: number;
  qclass: number;
  /** Offset just after the question (header + question can be copied verbatim into a reply). */
  questionEnd: number;
  edns: EdnsInfo | null;
}

/** Why a message could not be taken as a query. */
export const enum QueryProblem {
  /** Not even a header, or QR set: drop silently. */
  Drop = -1,
  FormErr = 1,
  NotImp = 4,
}

const scratch = Buffer.allocUnsafe(256);
const scratchLower = Buffer.allocUnsafe(256);

/** parseQname's other results (module state, not an object per query): the lowercase name and where it ends. */
let parsedLower = '';
let parsedEnd = 0;

/** The name at offset 12 as asked (parsedLower and parsedEnd set), or null when it needs the slow path. */
function parseQname(buf: Buffer): string | null {
  let pos = 12;
  let out = 0;
  let upper = false;
  const n = buf.length;
  for (;;) {
    if (pos >= n) return null;
    const len = buf[pos]!;
    if (len === 0) {
      pos++;
      break;
    }
    if (len > 63) return null; // pointers and extended labels never appear in a sane query name
    if (pos + 1 + len > n || out + len + 1 > 254) return null;
    for (let i = pos + 1, e = pos + 1 + len; i < e; i++) {
      const b = buf[i]!;
      if (NAME_OCTET[b] !== NameOctet.Plain) return null; // needs escaping: slow path
      scratch[out] = b;
      if (b >= 0x41 && b <= 0x5a) {
        upper = true;
        scratchLower[out] = b | 0x20;
      } else scratchLower[out] = b;
      out++;
    }
    scratch[out] = 0x2e;
    scratchLower[out] = 0x2e;
    out++;
    pos += 1 + len;
  }
  parsedEnd = pos;
  if (out === 0) {
    parsedLower = '.';
    return '.';
  }
  const qname = scratch.latin1Slice(0, out);
  // Most names arrive in lowercase: then one string serves both.
  parsedLower = upper ? scratchLower.latin1Slice(0, out) : qname;
  return qname;
}

/**
 * Parses a query. Returns the parsed header and question, or a QueryProblem
 * (Drop, or the rcode to answer with) for anything that is not a well-formed query.
 * With `into`, the fields are written there and `into` is returned (no object per query).
 */
export function parseQuery(buf: Buffer, into?: ParsedQuery): ParsedQuery | QueryProblem {
  if (buf.length < 12) return QueryProblem.Drop;
  // Plain byte reads: readUInt16BE's argument checks show up at this rate.
  const flags = (buf[2]! << 8) | buf[3]!;
  if (flags & 0x8000) return QueryProblem.Drop;
  const opcode = (flags >> 11) & 0xf;
  const qd = (buf[4]! << 8) | buf[5]!;
  const an = (buf[6]! << 8) | buf[7]!;
  const ns = (buf[8]! << 8) | buf[9]!;
  const ar = (buf[10]! << 8) | buf[11]!;
  if (opcode !== 0 && opcode !== 4) return QueryProblem.NotImp;
  if (qd !== 1 || an > 1 || ns > 1 || ar > 2) return QueryProblem.FormErr;
  let qname = parseQname(buf);
  let lower = parsedLower;
  let end = parsedEnd;
  if (qname === null) {
    try {
      const d = decodeName(buf, 12);
      qname = d.name;
      lower = d.name.toLowerCase();
      end = d.end;
    } catch (e) {
      if (e instanceof NameError) return QueryProblem.FormErr;
      throw e;
    }
  }
  if (end + 4 > buf.length) return QueryProblem.FormErr;
  const qtype = (buf[end]! << 8) | buf[end + 1]!;
  const qclass = (buf[end + 2]! << 8) | buf[end + 3]!;
  const questionEnd = end + 4;
  let edns: EdnsInfo | null = null;
  if (an !== 0 || ns !== 0 || ar !== 0) {
    // Walk the remaining records only to find the OPT; anything malformed is FORMERR.
    let pos = questionEnd;
    const total = an + ns + ar;
    try {
      for (let i = 0; i < total; i++) {
        const start = pos;
        const nameEnd = skipName(buf, pos);
        if (nameEnd + 10 > buf.length) return QueryProblem.FormErr;
        const type = buf.readUInt16BE(nameEnd);
        const rdlen = buf.readUInt16BE(nameEnd + 8);
        const end = nameEnd + 10 + rdlen;
        if (end > buf.length) return QueryProblem.FormErr;
        if (type === QType.OPT) {
          if (i < an + ns || edns !== null || buf[start] !== 0) return QueryProblem.FormErr;
          const ttl = buf.readUInt32BE(nameEnd + 4);
          edns = {
            udpSize: buf.readUInt16BE(nameEnd + 2),
            version: (ttl >>> 16) & 0xff,
            do: (ttl & 0x8000) !== 0,
            optOffset: start,
            optLength: end - start,
          };
        }
        pos = end;
      }
    } catch (e) {
      if (e instanceof NameError) return QueryProblem.FormErr;
      throw e;
    }
  }
  const id = (buf[0]! << 8) | buf[1]!;
  if (into === undefined) return { id, flags, opcode, qname, qnameLower: lower, qtype, qclass, questionEnd, edns };
  into.id = id;
  into.flags = flags;
  into.opcode = opcode;
  into.qname = qname;
  into.qnameLower = lower;
  into.qtype = qtype;
  into.qclass = qclass;
  into.questionEnd = questionEnd;
  into.edns = edns;
  return into;
}

/** A ParsedQuery to parse into and copy out of at once (the dispatcher's: one per process). */
export function scratchQuery(): ParsedQuery {
  return { id: 0, flags: 0, opcode: 0, qname: '', qnameLower: '', qtype: 0, qclass: 0, questionEnd: 0, edns: null };
}
