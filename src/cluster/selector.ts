// Kubernetes label selectors (`a=b,c!=d,e,!f,g in (x,y),h notin (z)`): validated at setup
// so a typo is a Corefile error rather than an API 400 at runtime, and matched locally in
// manifests mode, where there is no API server to do it.

export type LabelMatcher = (labels: Readonly<Record<string, string>> | undefined) => boolean;

type Requirement =
  | { op: 'eq' | 'neq'; key: string; value: string }
  | { op: 'in' | 'notin'; key: string; values: string[] }
  | { op: 'exists' | 'absent'; key: string };

const KEY =
  /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
const VALUE = /^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$/;

export class SelectorError extends Error {
  readonly code = 'KUBERNETES_ERR_SELECTOR';
  constructor(message: string) {
    super(message);
    this.name = 'SelectorError';
  }
}

/** Split on commas outside `( … )`. */
function splitTopLevel(s: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s[i];
    if (c === '(') depth++;
    else if (c === ')') depth--;
    else if (c === ',' && depth === 0) {
      out.push(s.slice(start, i));
      start = i + 1;
    }
  }
  out.push(s.slice(start));
  return out;
}

function checkKey(key: string, whole: string): string {
  if (!KEY.test(key)) throw new SelectorError(`invalid label key "${key}" in selector "${whole}"`);
  return key;
}

function checkValue(value: string, whole: string): string {
  if (!VALUE.test(value)) throw new SelectorError(`invalid label value "${value}" in selector "${whole}"`);
  return value;
}

/** Parses a selector; throws SelectorError naming the bad part. The empty selector matches everything. */
export function parseLabelSelector(selector: string): LabelMatcher {
  const reqs: Requirement[] = [];
  for (const raw of splitTopLevel(selector)) {
    const s = raw.trim();
    if (s === '') {
      if (selector.trim() !== '') throw new SelectorError(`empty requirement in selector "${selector}"`);
      continue;
    }
    let m: RegExpMatchArray | null;
    if ((m = s.match(/^(\S+)\s+(in|notin)\s*\(([^)]*)\)$/))) {
      const values = m[3]!.split(',').map((v) => checkValue(v.trim(), selector));
      reqs.push({ op: m[2] === 'in' ? 'in' : 'notin', key: checkKey(m[1]!, selector), values });
    } else if ((m = s.match(/^([^=!\s]+)\s*(==|=|!=)\s*(\S*)$/))) {
      reqs.push({
        op: m[2] === '!=' ? 'neq' : 'eq',
        key: checkKey(m[1]!, selector),
        value: checkValue(m[3]!, selector),
      });
    } else if ((m = s.match(/^!\s*(\S+)$/))) {
      reqs.push({ op: 'absent', key: checkKey(m[1]!, selector) });
    } else if (/^\S+$/.test(s)) {
      reqs.push({ op: 'exists', key: checkKey(s, selector) });
    } else {
      throw new SelectorError(`cannot parse "${s}" in selector "${selector}"`);
    }
  }
  return (labels) =>
    reqs.every((r) => {
      const has = labels !== undefined && Object.hasOwn(labels, r.key);
      const v = has ? labels[r.key]! : '';
      switch (r.op) {
        case 'eq':
          return has && v === r.value;
        case 'neq':
          return !has || v !== r.value;
        case 'in':
          return has && r.values.includes(v);
        case 'notin':
          return !has || !r.values.includes(v);
        case 'exists':
          return has;
        case 'absent':
          return !has;
      }
    });
}
