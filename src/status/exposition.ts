// Reads the Prometheus text exposition format back into samples: the status page gets the
// whole process's numbers as the text /metrics serves (summed over workers by the primary),
// and takes from it the families it shows.

export interface ExpositionSample {
  labels: Record<string, string>;
  value: number;
}

/** Samples by metric name (a histogram's lines keep their _bucket/_sum/_count names). */
export type Exposition = Map<string, ExpositionSample[]>;

function parseValue(text: string): number {
  switch (text) {
    case '+Inf':
      return Infinity;
    case '-Inf':
      return -Infinity;
    case 'NaN':
    case 'Nan':
      return NaN;
    default:
      return text === '' ? NaN : Number(text);
  }
}

/** Parses one sample line; null for comments, blank and malformed lines. */
export function parseSampleLine(line: string): { name: string; sample: ExpositionSample } | null {
  if (line === '' || line.startsWith('#')) return null;
  let i = 0;
  while (i < line.length && line[i] !== '{' && line[i] !== ' ') i++;
  const name = line.slice(0, i);
  if (name === '') return null;
  const labels: Record<string, string> = {};
  if (line[i] === '{') {
    i++;
    for (;;) {
      while (line[i] === ' ' || line[i] === ',') i++;
      if (line[i] === '}') {
        i++;
        break;
      }
      const eq = line.indexOf('=', i);
      if (eq < 0 || line[eq + 1] !== '"') return null;
      const key = line.slice(i, eq).trim();
      let value = '';
      let j = eq + 2;
      for (;;) {
        const ch = line[j];
        if (ch === undefined) return null;
        if (ch === '"') break;
        if (ch === '\\') {
          const next = line[j + 1];
          value += next === 'n' ? '\n' : (next ?? '');
          j += 2;
        } else {
          value += ch;
          j++;
        }
      }
      labels[key] = value;
      i = j + 1;
    }
  }
  const rest = line.slice(i).trim().split(/\s+/);
  const value = parseValue(rest[0] ?? '');
  if (Number.isNaN(value) && rest[0] !== 'NaN' && rest[0] !== 'Nan') return null;
  return { name, sample: { labels, value } };
}

/** The samples of the families `wanted` keeps (every family without it). */
export function parseExposition(text: string, wanted?: (name: string) => boolean): Exposition {
  const out: Exposition = new Map();
  for (const line of text.split('\n')) {
    if (line === '' || line[0] === '#') continue;
    if (wanted !== undefined) {
      const end = line.search(/[{ ]/);
      if (!wanted(end < 0 ? line : line.slice(0, end))) continue;
    }
    const parsed = parseSampleLine(line);
    if (parsed === null) continue;
    let list = out.get(parsed.name);
    if (list === undefined) out.set(parsed.name, (list = []));
    list.push(parsed.sample);
  }
  return out;
}
