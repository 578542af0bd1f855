// DNS numbers (RFC 1035, 3596, 2782, 6891) and their presentation names.

export const QType = {
  A: 1,
  NS: 2,
  CNAME: 5,
  SOA: 6,
  PTR: 12,
  HINFO: 13,
  MX: 15,
  TXT: 16,
  AAAA: 28,
  SRV: 33,
  NAPTR: 35,
  DS: 43,
  OPT: 41,
  RRSIG: 46,
  NSEC: 47,
  DNSKEY: 48,
  HTTPS: 65,
  SVCB: 64,
  IXFR: 251,
  AXFR: 252,
  ANY: 255,
  CAA: 257,
} as const;

export const QClass = {
  IN: 1,
  CH: 3,
  HS: 4,
  NONE: 254,
  ANY: 255,
} as const;

export const Rcode = {
  NOERROR: 0,
  FORMERR: 1,
  SERVFAIL: 2,
  NXDOMAIN: 3,
  NOTIMP: 4,
  REFUSED: 5,
  YXDOMAIN: 6,
  YXRRSET: 7,
  NXRRSET: 8,
  NOTAUTH: 9,
  NOTZONE: 10,
  BADVERS: 16,
} as const;

export const Opcode = {
  QUERY: 0,
  IQUERY: 1,
  STATUS: 2,
  NOTIFY: 4,
  UPDATE: 5,
} as const;

const typeNames = new Map<number, string>();
for (const [k, v] of Object.entries(QType)) typeNames.set(v, k);
const typeByName = new Map<string, number>(Object.entries(QType));

const classNames = new Map<number, string>([
  [1, 'IN'],
  [3, 'CH'],
  [4, 'HS'],
  [254, 'NONE'],
  [255, 'ANY'],
]);

const rcodeNames = new Map<number, string>();
for (const [k, v] of Object.entries(Rcode)) rcodeNames.set(v, k);

/** "A", "AAAA", ..., or "TYPE65280" (RFC 3597) for unknown numbers. */
export function typeToString(t: number): string {
  return typeNames.get(t) ?? `TYPE${t}`;
}

/** Inverse of typeToString; accepts "TYPE123". Returns undefined for unknown names. */
export function typeFromString(s: string): number | undefined {
  const up = s.toUpperCase();
  const known = typeByName.get(up);
  if (known !== undefined) return known;
  const m = /^TYPE(\d{1,5})$/.exec(up);
  if (m) {
    const n = Number(m[1]);
    if (n <= 0xffff) return n;
  }
  return undefined;
}

export function classToString(c: number): string {
  return classNames.get(c) ?? `CLASS${c}`;
}

export function rcodeToString(r: number): string {
  return rcodeNames.get(r) ?? `RCODE${r}`;
}

export function rcodeFromString(s: string): number | undefined {
  const up = s.toUpperCase();
  for (const [k, v] of Object.entries(Rcode)) if (k === up) return v;
  return undefined;
}
