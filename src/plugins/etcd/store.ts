// The SkyDNS records under the plugin's path, held in memory and kept current by etcd's watch:
// a query reads a sorted key list (a binary search for the name's subtree), never etcd itself.

export interface SkyService {
  /** The etcd key. */
  key: string;
  host: string;
  port: number;
  priority: number;
  weight: number;
  text: string;
  mail: boolean;
  ttl: number;
  group: string;
}

/** `www.example.org.` → `/skydns/org/example/www`. */
export function nameToPath(base: string, name: string): string {
  const labels = name === '.' ? [] : name.slice(0, -1).split('.').reverse();
  return labels.length ? `${base}/${labels.join('/')}` : base;
}

/** `/skydns/org/example/www/x1` → `x1.www.example.org.` */
export function pathToName(base: string, key: string): string {
  const rest = key
    .slice(base.length + 1)
    .split('/')
    .filter(Boolean);
  return rest.length ? `${rest.reverse().join('.')}.` : '.';
}

function num(v: unknown): number {
  return typeof v === 'number' && Number.isFinite(v) ? v : 0;
}

/** A key's JSON value as a service; null (and a warning by the caller) when it is not one. */
export function parseService(key: string, value: string): SkyService | null {
  let j: unknown;
  try {
    j = JSON.parse(value);
  } catch {
    return null;
  }
  if (typeof j !== 'object' || j === null || Array.isArray(j)) return null;
  const o = j as Record<string, unknown>;
  return {
    key,
    host: typeof o.host === 'string' ? o.host : '',
    port: num(o.port),
    priority: num(o.priority),
    weight: num(o.weight),
    text: typeof o.text === 'string' ? o.text : '',
    mail: o.mail === true,
    ttl: num(o.ttl),
    group: typeof o.group === 'string' ? o.group : '',
  };
}

export class SkyStore {
  private keys: string[] = [];
  private readonly values = new Map<string, SkyService>();

  replace(all: SkyService[]): void {
    this.values.clear();
    for (const s of all) this.values.set(s.key, s);
    this.keys = [...this.values.keys()].sort();
  }

  put(s: SkyService): void {
    if (!this.values.has(s.key)) this.keys.splice(this.lowerBound(s.key), 0, s.key);
    this.values.set(s.key, s);
  }

  delete(key: string): void {
    if (!this.values.delete(key)) return;
    const i = this.lowerBound(key);
    if (this.keys[i] === key) this.keys.splice(i, 1);
  }

  get size(): number {
    return this.keys.length;
  }

  private lowerBound(k: string): number {
    let lo = 0;
    let hi = this.keys.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.keys[mid]! < k) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** The services at `path` and below it. */
  subtree(path: string): SkyService[] {
    const out: SkyService[] = [];
    const exact = this.values.get(path);
    if (exact !== undefined) out.push(exact);
    const prefix = path + '/';
    for (let i = this.lowerBound(prefix); i < this.keys.length && this.keys[i]!.startsWith(prefix); i++)
      out.push(this.values.get(this.keys[i]!)!);
    return out;
  }

  /** With `*` (or `any`) labels in the query: the subtree before the first one, filtered segment by segment. */
  match(path: string): SkyService[] {
    const segs = path.split('/');
    const first = segs.findIndex((s) => s === '*' || s === 'any');
    if (first < 0) return this.subtree(path);
    const base = segs.slice(0, first).join('/');
    return this.subtree(base).filter((s) => {
      const ks = s.key.split('/');
      if (ks.length < segs.length) return false;
      for (let i = first; i < segs.length; i++)
        if (segs[i] !== '*' && segs[i] !== 'any' && segs[i] !== ks[i]) return false;
      return true;
    });
  }
}

/**
 * SkyDNS groups: the shortest keys with a group set it for the whole answer; services of another
 * group are left out, those with none stay. Disagreement on the shortest level means no group.
 */
export function groupServices(sx: SkyService[]): SkyService[] {
  if (sx.length === 0) return sx;
  let group = sx[0]!.group;
  let slashes = sx[0]!.key.split('/').length;
  const depth = sx.map((s) => s.key.split('/').length);
  for (let i = 0; i < sx.length; i++) {
    if (depth[i]! < slashes) {
      if (sx[i]!.group === '') break;
      slashes = depth[i]!;
      group = sx[i]!.group;
    }
  }
  if (group === '') return sx;
  const out: SkyService[] = [];
  for (let i = 0; i < sx.length; i++) {
    const s = sx[i]!;
    if (s.group === '') {
      out.push(s);
      continue;
    }
    if (depth[i] === slashes && s.group !== group) return sx;
    if (s.group === group) out.push(s);
  }
  return out;
}
