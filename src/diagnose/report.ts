// The report `diagnose --json` prints: a stable, documented shape (README.md, "JSON").
// Fields are only ever added; `version` changes if one is renamed or removed.

import { QType, rcodeToString, typeToString } from '../dns/constants.js';
import type {
  AddressData,
  MxData,
  ResourceRecord,
  SoaData,
  SrvData,
  TargetData,
  TxtData,
  OpaqueData,
} from '../dns/message.js';
import { quotedCharacterString } from '../dns/name.js';
import type { CandidatePhase } from '../dns/search.js';
import type { CheckStatus, CheckStep } from './cluster.js';
import type { CandidateOutcome, TypeResult } from './lookup.js';
import type { ResolvConf } from '../sys/resolvconf.js';
import type { Suggestion } from './suggest.js';
import type { Transport } from './transport.js';
import type { WalkResult } from './walk.js';

export const REPORT_VERSION = 1;

export type VerdictStatus =
  'resolved' | 'nxdomain' | 'nodata' | 'servfail' | 'rejected' | 'timeout' | 'unreachable' | 'error';

export interface RecordJson {
  name: string;
  type: string;
  ttl: number;
  /** Presentation form of the RDATA: `10.96.120.15`, `0 100 8080 backend.default.svc.cluster.local.`. */
  data: string;
}

export interface TryJson {
  server: string;
  transport: Transport;
  result: 'reply' | 'truncated' | 'timeout' | 'refused' | 'error';
  rcode: string | null;
  latencyMs: number;
  error?: string;
}

export interface QueryJson {
  type: string;
  /** `reply` when a reply arrived (whatever its rcode). */
  status: 'reply' | 'timeout' | 'refused' | 'error';
  rcode: string | null;
  server: string | null;
  transport: Transport | null;
  latencyMs: number | null;
  answers: RecordJson[];
  tries: TryJson[];
  error?: string;
}

export interface CandidateJson {
  name: string;
  phase: CandidatePhase;
  reason: string;
  sent: boolean;
  /** null when not sent. */
  outcome: CandidateOutcome | null;
  skipped: string | null;
  then: string | null;
  elapsedMs: number;
  queries: QueryJson[];
}

export type ResolvConfJson = Pick<
  ResolvConf,
  'file' | 'nameservers' | 'search' | 'searchSource' | 'ndots' | 'timeout' | 'attempts' | 'problems'
> & {
  /** optionsText() split: every option the resolver acts on, defaults included. */
  options: string[];
};

export interface ClusterCheckJson {
  step: CheckStep;
  status: CheckStatus;
  summary: string;
  details: string[];
}

export interface ClusterJson {
  /** `kubeconfig FILE (context X)`, `in-cluster`. */
  source: string;
  /** Set when the API could not be used at all (bad kubeconfig, unreachable). */
  error: string | null;
  checks: ClusterCheckJson[];
  /** The first failing step, or null. */
  broken: CheckStep | null;
}

export interface ApplicationErrorJson {
  /** glibc's h_errno: HOST_NOT_FOUND, NO_DATA, TRY_AGAIN, NO_RECOVERY. */
  herrno: string;
  /** What getaddrinfo returns: EAI_NONAME, EAI_NODATA, EAI_AGAIN, EAI_FAIL. */
  gai: string;
  /** gai_strerror's text, what applications usually log. */
  message: string;
}

export interface VerdictJson {
  status: VerdictStatus;
  summary: string;
  /** Addresses (or records for --type) of the answer, when resolved. */
  answers: string[];
  /** The candidate that answered. */
  resolvedAs: string | null;
  applicationError: ApplicationErrorJson | null;
  /** What to check next, most likely first. */
  next: string[];
  /** Close Service names (NXDOMAIN with cluster access). */
  suggestions: Suggestion[];
  notes: string[];
}

export interface DiagnoseReport {
  version: typeof REPORT_VERSION;
  name: string;
  types: string[];
  resolvConf: ResolvConfJson;
  servers: string[];
  serversFrom: 'resolv.conf' | '--server';
  /** The first try's timeout in ms, as used. */
  timeoutMs: number;
  rule: string;
  candidates: CandidateJson[];
  verdict: VerdictJson;
  cluster: ClusterJson | null;
  durationMs: number;
}

const round = (ms: number) => Math.round(ms * 100) / 100;

/** RDATA in presentation form. */
export function rdataText(rr: ResourceRecord): string {
  switch (rr.type) {
    case QType.A:
    case QType.AAAA:
      return (rr.data as AddressData).address;
    case QType.CNAME:
    case QType.NS:
    case QType.PTR:
      return (rr.data as TargetData).target;
    case QType.MX: {
      const d = rr.data as MxData;
      return `${d.preference} ${d.exchange}`;
    }
    case QType.SRV: {
      const d = rr.data as SrvData;
      return `${d.priority} ${d.weight} ${d.port} ${d.target}`;
    }
    case QType.TXT:
      return (rr.data as TxtData).texts.map(quotedCharacterString).join(' ');
    case QType.SOA: {
      const d = rr.data as SoaData;
      return `${d.mname} ${d.rname} ${d.serial} ${d.refresh} ${d.retry} ${d.expire} ${d.minimum}`;
    }
    default: {
      const raw = (rr.data as OpaqueData).raw;
      return `\\# ${raw.length} ${raw.toString('hex')}`;
    }
  }
}

export function recordJson(rr: ResourceRecord): RecordJson {
  return { name: rr.name, type: typeToString(rr.type), ttl: rr.ttl, data: rdataText(rr) };
}

function queryJson(t: TypeResult): QueryJson {
  const q: QueryJson = {
    type: typeToString(t.qtype),
    status: t.reply ? 'reply' : (t.failure ?? 'error'),
    rcode: t.reply ? rcodeToString(t.reply.rcode) : null,
    server: t.server ?? null,
    transport: t.transport ?? null,
    latencyMs: t.reply && t.latencyMs !== undefined ? round(t.latencyMs) : null,
    answers: t.reply ? t.reply.answers.map(recordJson) : [],
    tries: t.tries.map((x) => {
      const j: TryJson = {
        server: x.server,
        transport: x.transport,
        result: x.result,
        rcode: x.rcode === undefined ? null : rcodeToString(x.rcode),
        latencyMs: round(x.latencyMs),
      };
      if (x.error) j.error = x.error;
      return j;
    }),
  };
  if (!t.reply && t.error) q.error = t.error;
  return q;
}

export function candidatesJson(walk: WalkResult): CandidateJson[] {
  return walk.steps.map((s) => ({
    name: s.candidate.name,
    phase: s.candidate.phase,
    reason: s.candidate.invalid
      ? `${s.candidate.reason}; cannot be asked for: ${s.candidate.invalid}`
      : s.candidate.reason,
    sent: s.result !== null && s.result.outcome !== 'invalid',
    outcome: s.result?.outcome ?? null,
    skipped: s.skipped ?? null,
    then: s.then ?? null,
    elapsedMs: round(s.elapsedMs),
    queries: s.result ? s.result.types.map(queryJson) : [],
  }));
}

export { round as roundMs };
