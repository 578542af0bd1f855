// The route stream's vocabulary: a Service's name, namespace and ClusterIPs, and the events
// (SNAPSHOT, ADDED, MODIFIED, DELETED, BOOKMARK) that keep a copy of them up to date.
import { isIP } from 'node:net';

export interface Route {
  name: string;
  namespace: string;
  clusterIP: string;
  clusterIPs: string[];
}

export type RouteEvent =
  | { type: 'SNAPSHOT'; resourceVersion: string; routes: Route[]; skipped: string[] }
  | { type: 'ADDED' | 'MODIFIED'; resourceVersion: string; route: Route }
  | { type: 'DELETED'; resourceVersion: string; route: Pick<Route, 'name' | 'namespace'> }
  | { type: 'BOOKMARK'; resourceVersion: string };

/** A line of the stream that is not a valid event; the stream logs it and reads on. */
export class RouteEventError extends Error {
  readonly code = 'CONNECT_ERR_ROUTE_EVENT';
  constructor(message: string) {
    super(message);
    this.name = 'RouteEventError';
  }
}

const LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

/** A DNS-1123 label: what Kubernetes allows as a Service or namespace name, and all we put in /etc/hosts. */
export function isDnsLabel(s: string): boolean {
  return LABEL.test(s);
}

export function routeKey(r: Pick<Route, 'name' | 'namespace'>): string {
  return `${r.namespace}/${r.name}`;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function describe(v: Record<string, unknown>): string {
  const ns = typeof v['namespace'] === 'string' ? v['namespace'] : '?';
  const name = typeof v['name'] === 'string' ? v['name'] : '?';
  return `${ns}/${name}`.slice(0, 200);
}

/** The usable ClusterIPs of a route: valid IPv4/IPv6 literals only (headless "None" has none). */
function clusterIPsOf(v: Record<string, unknown>): string[] {
  const list: unknown[] = Array.isArray(v['clusterIPs']) ? (v['clusterIPs'] as unknown[]) : [v['clusterIP']];
  const out: string[] = [];
  for (const ip of list) {
    if (typeof ip === 'string' && isIP(ip) !== 0 && !out.includes(ip)) out.push(ip);
  }
  return out;
}

/** Validates one route object; throws RouteEventError naming the object when it is unusable. */
export function parseRoute(v: unknown): Route {
  if (!isRecord(v)) throw new RouteEventError('route is not an object');
  const name = v['name'];
  const namespace = v['namespace'];
  if (typeof name !== 'string' || !isDnsLabel(name))
    throw new RouteEventError(`route ${describe(v)}: name is not a DNS label`);
  if (typeof namespace !== 'string' || !isDnsLabel(namespace))
    throw new RouteEventError(`route ${describe(v)}: namespace is not a DNS label`);
  const clusterIPs = clusterIPsOf(v);
  return { name, namespace, clusterIP: clusterIPs[0] ?? '', clusterIPs };
}

/** Parses one NDJSON line of the route stream. */
export function parseRouteEvent(line: string): RouteEvent {
  let v: unknown;
  try {
    v = JSON.parse(line);
  } catch {
    throw new RouteEventError(`not JSON: ${line.slice(0, 120)}`);
  }
  if (!isRecord(v)) throw new RouteEventError('event is not an object');
  const type = v['type'];
  const rv = v['resourceVersion'];
  if (typeof rv !== 'string' || rv === '' || rv.length > 64)
    throw new RouteEventError(`event ${String(type)}: missing resourceVersion`);
  switch (type) {
    case 'SNAPSHOT': {
      const list = v['routes'];
      if (!Array.isArray(list)) throw new RouteEventError('SNAPSHOT without a routes array');
      const routes: Route[] = [];
      const skipped: string[] = [];
      for (const r of list as unknown[]) {
        try {
          routes.push(parseRoute(r));
        } catch (err) {
          skipped.push((err as Error).message);
        }
      }
      return { type, resourceVersion: rv, routes, skipped };
    }
    case 'ADDED':
    case 'MODIFIED':
      return { type, resourceVersion: rv, route: parseRoute(v['route']) };
    case 'DELETED': {
      const r = v['route'];
      if (!isRecord(r) || typeof r['name'] !== 'string' || typeof r['namespace'] !== 'string') {
        throw new RouteEventError('DELETED without route name and namespace');
      }
      return { type, resourceVersion: rv, route: { name: r['name'], namespace: r['namespace'] } };
    }
    case 'BOOKMARK':
      return { type, resourceVersion: rv };
    default:
      throw new RouteEventError(`unknown event type ${JSON.stringify(type)?.slice(0, 40)}`);
  }
}
