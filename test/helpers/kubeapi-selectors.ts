// Label and field selectors as the API server parses them, for the test API server.
import { isRecord, stringMap } from '../../src/kube/types.js';

export type Matcher = (obj: Record<string, unknown>) => boolean;

export class SelectorError extends Error {}

type LabelRequirement =
  | { op: 'exists' | 'notexists'; key: string }
  | { op: 'eq' | 'neq'; key: string; value: string }
  | { op: 'in' | 'notin'; key: string; values: string[] };

/** `a=b,c!=d,e,!f,g in (x, y),h notin (z)` → matcher over metadata.labels. */
export function parseLabelSelector(selector: string): Matcher {
  const reqs: LabelRequirement[] = [];
  for (const part of splitTopLevel(selector)) {
    const s = part.trim();
    if (!s) continue;
    let m: RegExpMatchArray | null;
    if ((m = s.match(/^([\w./-]+)\s+(in|notin)\s+\(([^)]*)\)$/))) {
      const values = m[3]!
        .split(',')
        .map((v) => v.trim())
        .filter(Boolean);
      reqs.push({ op: m[2] === 'in' ? 'in' : 'notin', key: m[1]!, values });
    } else if ((m = s.match(/^([\w./-]+)\s*(==|=|!=)\s*([\w./-]*)$/))) {
      reqs.push({ op: m[2] === '!=' ? 'neq' : 'eq', key: m[1]!, value: m[3]! });
    } else if ((m = s.match(/^!\s*([\w./-]+)$/))) {
      reqs.push({ op: 'notexists', key: m[1]! });
    } else if ((m = s.match(/^([\w./-]+)$/))) {
      reqs.push({ op: 'exists', key: m[1]! });
    } else {
      throw new SelectorError(`unable to parse requirement: "${s}"`);
    }
  }
  return (obj) => {
    const labels = labelsOf(obj);
    return reqs.every((r) => {
      const has = Object.hasOwn(labels, r.key);
      const v = labels[r.key];
      switch (r.op) {
        case 'exists':
          return has;
        case 'notexists':
          return !has;
        case 'eq':
          return has && v === r.value;
        case 'neq':
          return !has || v !== r.value;
        case 'in':
          return has && r.values.includes(v!);
        case 'notin':
          return !has || !r.values.includes(v!);
      }
    });
  };
}

const COMMON_FIELDS = ['metadata.name', 'metadata.namespace'];
/** Field labels the real API server accepts per resource (others are a 400). */
const FIELDS: Record<string, string[]> = {
  pods: [
    'spec.nodeName',
    'spec.restartPolicy',
    'spec.schedulerName',
    'spec.serviceAccountName',
    'spec.hostNetwork',
    'status.phase',
    'status.podIP',
    'status.nominatedNodeName',
  ],
  services: ['spec.clusterIP', 'spec.type'],
  nodes: ['spec.unschedulable'],
  namespaces: ['status.phase'],
  endpointslices: ['addressType'],
};

/** `metadata.name=x,status.phase!=Failed` → matcher; unsupported field labels throw like the API server. */
export function parseFieldSelector(selector: string, resource: string): Matcher {
  const allowed = new Set([...COMMON_FIELDS, ...(FIELDS[resource] ?? [])]);
  const reqs: Array<{ path: string[]; value: string; negate: boolean }> = [];
  for (const part of selector.split(',')) {
    const s = part.trim();
    if (!s) continue;
    const m = s.match(/^([\w.]+)\s*(==|=|!=)\s*(.*)$/);
    if (!m) throw new SelectorError(`invalid field selector: "${s}"`);
    if (!allowed.has(m[1]!)) throw new SelectorError(`field label not supported: ${m[1]}`);
    reqs.push({ path: m[1]!.split('.'), value: m[3]!, negate: m[2] === '!=' });
  }
  return (obj) => reqs.every((r) => (fieldValue(obj, r.path) === r.value) !== r.negate);
}

function fieldValue(obj: Record<string, unknown>, path: string[]): string {
  let cur: unknown = obj;
  for (const p of path) {
    if (!isRecord(cur)) return '';
    cur = cur[p];
  }
  // Field selectors compare scalar fields; an object or a missing field matches only ''.
  return typeof cur === 'string' || typeof cur === 'number' || typeof cur === 'boolean' ? String(cur) : '';
}

function labelsOf(obj: Record<string, unknown>): Record<string, string> {
  return (isRecord(obj.metadata) && stringMap(obj.metadata.labels)) || {};
}

/** Split on commas that are not inside `( … )`. */
function splitTopLevel(s: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < s.length; i++) {
    if (s[i] === '(') depth++;
    else if (s[i] === ')') depth--;
    else if (s[i] === ',' && depth === 0) {
      out.push(s.slice(start, i));
      start = i + 1;
    }
  }
  out.push(s.slice(start));
  return out;
}
