// RBAC for the manifest tests: which API calls a piece of code makes (from the API paths in
// its source, or from a test API server's request log) and whether the Roles and ClusterRoles
// bound to a ServiceAccount allow them, evaluated the way the API server's authorizer does.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

/** One authorization question: may VERB be done on GROUP RESOURCE[/SUBRESOURCE] (NAME) in NAMESPACE? */
export interface ApiCall {
  group: string;
  resource: string;
  subresource?: string;
  verb: string;
  /** undefined = cluster-scoped or across all namespaces; '*' = decided at run time. */
  namespace?: string;
  /** undefined = a collection; '*' = decided at run time. */
  name?: string;
  /** Where it comes from (file:line, or the request), for messages. */
  origin: string;
}

export type Manifest = Record<string, unknown> & { kind: string; metadata: { name: string; namespace?: string } };

interface PolicyRule {
  apiGroups?: string[];
  resources?: string[];
  resourceNames?: string[];
  verbs: string[];
}

/** Path → group/resource/namespace/name/subresource; `*` stands for a segment built at run time. */
export function parseApiPath(path: string): Omit<ApiCall, 'verb' | 'origin'> | undefined {
  const parts = path.split('?')[0]!.split('/').filter(Boolean);
  let group: string;
  let rest: string[];
  if (parts[0] === 'api' && parts[1] === 'v1') [group, rest] = ['', parts.slice(2)];
  else if (parts[0] === 'apis' && parts.length >= 3) [group, rest] = [parts[1]!, parts.slice(3)];
  else return undefined;
  let namespace: string | undefined;
  if (rest[0] === 'namespaces' && rest.length >= 3) {
    namespace = rest[1];
    rest = rest.slice(2);
  }
  const [resource, name, subresource] = rest;
  if (!resource) return undefined;
  return { group, resource, name, subresource, namespace };
}

const WRITE_VERB: Record<string, string> = { PUT: 'update', POST: 'create', PATCH: 'patch', DELETE: 'delete' };

/** A test API server request (method, path, watch flag) as the authorizer sees it. */
export function callFromRequest(method: string, path: string, watch: boolean): ApiCall | undefined {
  const p = parseApiPath(path);
  if (!p) return undefined;
  const verb = method === 'GET' ? (watch ? 'watch' : p.name === undefined ? 'list' : 'get') : (WRITE_VERB[method] ?? method.toLowerCase());
  return { ...p, verb, origin: `${method} ${path}${watch ? ' (watch)' : ''}` };
}

// ---- static: API paths in source ----

function tsFiles(dir: string, out: string[] = []): string[] {
  for (const e of readdirSync(dir)) {
    const p = join(dir, e);
    if (statSync(p).isDirectory()) tsFiles(p, out);
    else if (e.endsWith('.ts')) out.push(p);
  }
  return out;
}

/** Comments out, keeping line numbers (so messages can point at the line). */
function stripComments(text: string): string {
  return text.replace(/\/\*[\s\S]*?\*\//g, (m) => m.replace(/[^\n]/g, ' ')).replace(/(^|[^:'"`\\])\/\/.*$/gm, '$1');
}

/** Name of the function whose argument list contains position `at` (generic arguments skipped). */
function enclosingCall(text: string, at: number): string | undefined {
  let depth = 0;
  for (let i = at - 1; i >= Math.max(0, at - 600); i--) {
    const ch = text[i];
    if (ch === ')') depth++;
    else if (ch === '(') {
      if (depth === 0) return /([A-Za-z_$][\w$]*)\s*(?:<[^<>()]*>)?\s*$/.exec(text.slice(Math.max(0, i - 120), i))?.[1];
      depth--;
    }
  }
  return undefined;
}

/**
 * Every API path literal in the .ts files under `dir`, with the verbs of the call it is used
 * in: `getJSON(` → get (list for a collection), `request('PUT'|'POST'|…` → update/create/…,
 * an argument of a Reflector or of a function named like `watch` (or a `path:` option) →
 * list + watch. A path a helper `return`s gets the verbs
 * of the calls in that file that take a computed path.
 */
export function apiCallsInSource(dir: string, root: string): ApiCall[] {
  const calls: ApiCall[] = [];
  for (const file of tsFiles(dir)) {
    const text = stripComments(readFileSync(file, 'utf8'));
    const indirect: string[] = [];
    if (/\bgetJSON\(\s*[A-Za-z_$]/.test(text)) indirect.push('GET');
    for (const m of text.matchAll(/\brequest\(\s*'(PUT|POST|PATCH|DELETE)'\s*,\s*[A-Za-z_$]/g)) indirect.push(m[1]!);
    for (const m of text.matchAll(/(['"`])(\/apis?\/[^'"`\s]*)\1/g)) {
      const literal = (m[2] ?? '').replace(/\$\{[^}]*\}/g, '*');
      const p = parseApiPath(literal);
      if (!p) continue;
      const at = m.index ?? 0;
      const line = text.slice(0, at).split('\n').length;
      const origin = `${relative(root, file)}:${line} ${literal}`;
      const before = text.slice(Math.max(0, at - 300), at);
      const statement = before.slice(Math.max(before.lastIndexOf(';'), before.lastIndexOf('{'), before.lastIndexOf('}')) + 1);
      const methods: string[] = [];
      let reflector = false;
      const call = enclosingCall(text, at);
      const req = /\brequest\(\s*'(GET|PUT|POST|PATCH|DELETE)'\s*,\s*$/.exec(statement);
      if (req) methods.push(req[1]!);
      else if (call === 'getJSON' || call === 'get') methods.push('GET');
      else if (call !== undefined && /watch|reflector|informer/i.test(call)) reflector = true;
      else if (/\bpath:\s*$/.test(statement)) reflector = true;
      else if (/\breturn\s*$/.test(statement)) methods.push(...indirect);
      if (reflector) {
        calls.push({ ...p, verb: 'list', origin }, { ...p, verb: 'watch', origin });
        continue;
      }
      if (methods.length === 0) {
        calls.push({ ...p, verb: '?', origin });
        continue;
      }
      for (const method of new Set(methods)) {
        const verb = method === 'GET' ? (p.name === undefined ? 'list' : 'get') : WRITE_VERB[method]!;
        calls.push({ ...p, verb, origin });
      }
    }
  }
  return calls;
}

// ---- authorization ----

function rulesOf(role: Manifest | undefined): PolicyRule[] {
  const rules = role?.rules;
  return Array.isArray(rules) ? (rules as PolicyRule[]) : [];
}

function ruleAllows(rule: PolicyRule, call: ApiCall): boolean {
  const resource = call.subresource ? `${call.resource}/${call.subresource}` : call.resource;
  const has = (list: string[] | undefined, v: string) => (list ?? []).includes('*') || (list ?? []).includes(v);
  if (!has(rule.apiGroups, call.group) || !has(rule.resources, resource) || !has(rule.verbs, call.verb)) return false;
  const names = rule.resourceNames ?? [];
  if (names.length === 0) return true;
  // A named rule never covers create, list or watch of a collection.
  if (call.name === undefined) return false;
  return call.name === '*' || names.includes(call.name);
}

export interface ServiceAccountRef {
  namespace: string;
  name: string;
}

/** The rules that apply to `sa` for `call`: ClusterRoleBindings, plus RoleBindings in the call's namespace. */
export function rulesFor(sa: ServiceAccountRef, call: Pick<ApiCall, 'namespace'>, docs: readonly Manifest[], defaultNamespace: string): PolicyRule[] {
  const bound = (b: Manifest) =>
    Array.isArray(b.subjects) &&
    (b.subjects as Array<Record<string, unknown>>).some((s) => s.kind === 'ServiceAccount' && s.name === sa.name && s.namespace === sa.namespace);
  const find = (kind: string, name: string, namespace?: string) =>
    docs.find((d) => d.kind === kind && d.metadata.name === name && (namespace === undefined || d.metadata.namespace === namespace));
  const rules: PolicyRule[] = [];
  for (const b of docs) {
    if (!bound(b)) continue;
    const ref = b.roleRef as { kind: string; name: string };
    if (b.kind === 'ClusterRoleBinding') rules.push(...rulesOf(find('ClusterRole', ref.name)));
    if (b.kind === 'RoleBinding') {
      // A run-time namespace ('*') is the one the workload is deployed in.
      const ns = call.namespace === '*' ? defaultNamespace : call.namespace;
      if (ns === undefined || b.metadata.namespace !== ns) continue;
      rules.push(...rulesOf(ref.kind === 'Role' ? find('Role', ref.name, ns) : find('ClusterRole', ref.name)));
    }
  }
  return rules;
}

export function allowed(sa: ServiceAccountRef, call: ApiCall, docs: readonly Manifest[], defaultNamespace: string): boolean {
  return rulesFor(sa, call, docs, defaultNamespace).some((r) => ruleAllows(r, call));
}

/** Every (group, resource, verb) a set of roles grants, as `group resource verb` strings. */
export function grants(roles: readonly Manifest[]): string[] {
  const out: string[] = [];
  for (const role of roles) {
    for (const r of rulesOf(role)) {
      for (const g of r.apiGroups ?? []) for (const res of r.resources ?? []) for (const v of r.verbs) out.push(`${g || 'core'} ${res} ${v}`);
    }
  }
  return [...new Set(out)].sort();
}

export function callKey(c: ApiCall): string {
  return `${c.group || 'core'} ${c.subresource ? `${c.resource}/${c.subresource}` : c.resource} ${c.verb}`;
}
