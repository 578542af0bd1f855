// Hand-written shapes of the Kubernetes API objects clusterdns reads: only the fields DNS,
// the autoscaler and diagnostics need. Everything arriving from the wire is `unknown` until
// one of the guards below (or a caller's projection) has narrowed it.

export interface ObjectMeta {
  name?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

export interface ListMeta {
  resourceVersion?: string;
  continue?: string;
  remainingItemCount?: number;
}

export interface TypeMeta {
  kind?: string;
  apiVersion?: string;
}

/** The error (and sometimes success) body of every API failure and of in-stream watch ERROR events. */
export interface Status extends TypeMeta {
  kind: 'Status';
  status?: 'Success' | 'Failure';
  message?: string;
  reason?: string;
  code?: number;
  details?: { name?: string; group?: string; kind?: string; retryAfterSeconds?: number; causes?: StatusCause[] };
}

export interface StatusCause {
  reason?: string;
  message?: string;
  field?: string;
}

export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';

export interface WatchEvent<T = unknown> {
  type: WatchEventType;
  object: T;
}

export interface List<T = unknown> extends TypeMeta {
  metadata: ListMeta;
  items: T[];
}

/** autoscaling/v1 Scale, the `/scale` subresource of Deployments and friends. */
export interface Scale extends TypeMeta {
  metadata: ObjectMeta;
  spec?: { replicas?: number };
  status?: { replicas: number; selector?: string };
}

// ---- guards: the only way `unknown` from the wire becomes one of the types above ----

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The object's metadata if it has a usable one (fields of the wrong type are dropped). */
export function objectMeta(obj: unknown): ObjectMeta | undefined {
  if (!isRecord(obj) || !isRecord(obj.metadata)) return undefined;
  const m = obj.metadata;
  const meta: ObjectMeta = {};
  if (typeof m.name === 'string') meta.name = m.name;
  if (typeof m.namespace === 'string') meta.namespace = m.namespace;
  if (typeof m.uid === 'string') meta.uid = m.uid;
  if (typeof m.resourceVersion === 'string') meta.resourceVersion = m.resourceVersion;
  if (typeof m.deletionTimestamp === 'string') meta.deletionTimestamp = m.deletionTimestamp;
  const labels = stringMap(m.labels);
  if (labels) meta.labels = labels;
  const annotations = stringMap(m.annotations);
  if (annotations) meta.annotations = annotations;
  return meta;
}

/** A map of strings, or undefined if `value` is not one. */
export function stringMap(value: unknown): Record<string, string> | undefined {
  if (!isRecord(value)) return undefined;
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(value)) {
    if (typeof v !== 'string') return undefined;
    out[k] = v;
  }
  return out;
}

/** The usual store key: `namespace/name`, or `name` for cluster-scoped objects; null without a name. */
export function objectKey(obj: unknown): string | null {
  const meta = objectMeta(obj);
  if (!meta?.name) return null;
  // join() makes one flat string; a template literal makes a chain of pieces that costs
  // ~20 bytes more for as long as the key is kept (one per object of a watched cluster).
  return meta.namespace ? [meta.namespace, meta.name].join('/') : meta.name;
}

/** How to name an object in a log line, even a badly broken one: `Service default/web (rv 42)`. */
export function describeObject(obj: unknown): string {
  const kind = isRecord(obj) && typeof obj.kind === 'string' ? `${obj.kind} ` : '';
  const meta = objectMeta(obj);
  const name = meta?.name ? (meta.namespace ? `${meta.namespace}/${meta.name}` : meta.name) : '<unnamed>';
  const rv = meta?.resourceVersion ? ` (rv ${meta.resourceVersion})` : '';
  return `${kind}${name}${rv}`;
}

export function isStatus(value: unknown): value is Status {
  return isRecord(value) && value.kind === 'Status';
}

const WATCH_EVENT_TYPES: ReadonlySet<string> = new Set(['ADDED', 'MODIFIED', 'DELETED', 'BOOKMARK', 'ERROR']);

export function isWatchEvent(value: unknown): value is WatchEvent<unknown> {
  return (
    isRecord(value) && typeof value.type === 'string' && WATCH_EVENT_TYPES.has(value.type) && isRecord(value.object)
  );
}

/** A LIST response: `items` must be an array; its elements stay `unknown` for the caller to project. */
export function isList(value: unknown): value is List<unknown> {
  return isRecord(value) && Array.isArray(value.items) && (value.metadata === undefined || isRecord(value.metadata));
}

export function listMeta(list: List<unknown>): ListMeta {
  const m: unknown = list.metadata;
  const out: ListMeta = {};
  if (!isRecord(m)) return out;
  if (typeof m.resourceVersion === 'string') out.resourceVersion = m.resourceVersion;
  if (typeof m.continue === 'string') out.continue = m.continue;
  if (typeof m.remainingItemCount === 'number') out.remainingItemCount = m.remainingItemCount;
  return out;
}
