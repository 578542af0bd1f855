// Unknown-field check for manifests (what `kubectl apply --validate=strict` rejects). The
// kubernetes-models validators are generated from the Kubernetes OpenAPI schemas but, like the
// schemas, allow unknown fields; the field names of every type are in the package's .d.ts
// declarations (generated from the same schemas), so they are read from there.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

type FieldType = { kind: 'ref'; name: string } | { kind: 'array'; of: FieldType } | { kind: 'map'; of: FieldType } | { kind: 'leaf' };

interface TypeInfo {
  fields: Map<string, FieldType>;
}

const require = createRequire(import.meta.url);

function packageDir(name: string): string {
  return dirname(require.resolve(`${name}/package.json`));
}

function dtsFiles(dir: string, out: string[] = []): string[] {
  for (const e of readdirSync(dir)) {
    if (e === 'node_modules' || e === '_schemas') continue;
    const p = join(dir, e);
    if (statSync(p).isDirectory()) dtsFiles(p, out);
    else if (e.endsWith('.d.ts')) out.push(p);
  }
  return out;
}

function parseType(text: string, local: ReadonlyMap<string, string>): FieldType {
  const t = text.trim().replace(/;$/, '').trim();
  const arr = /^Array<(.*)>$/.exec(t);
  if (arr) return { kind: 'array', of: parseType(arr[1] ?? '', local) };
  if (/^I[A-Za-z0-9]+$/.test(t)) return { kind: 'ref', name: local.get(t) ?? t };
  return { kind: 'leaf' };
}

/** Interfaces of one .d.ts file, under their global (exported alias) names. */
function parseDts(text: string): Map<string, TypeInfo> {
  const local = new Map<string, string>();
  for (const m of text.matchAll(/export \{([^}]*)\}/g)) {
    for (const part of (m[1] ?? '').split(',')) {
      const a = /^\s*(\w+) as (\w+)\s*$/.exec(part);
      if (a && a[1] && a[2]) local.set(a[1], a[2]);
    }
  }
  const out = new Map<string, TypeInfo>();
  for (const m of text.matchAll(/^export interface (\w+)(?: extends [^{]+)? \{\n([\s\S]*?)^\}/gm)) {
    const name = m[1] ?? '';
    const lines = (m[2] ?? '').split('\n');
    const fields = new Map<string, FieldType>();
    for (let i = 0; i < lines.length; i++) {
      const f = /^ {4}"([^"]+)"\??: (.*)$/.exec(lines[i] ?? '');
      if (!f || !f[1]) continue;
      const rest = f[2] ?? '';
      if (rest.trim() === '{') {
        // { [key: string]: T; } spread over lines
        let inner = '';
        for (i++; i < lines.length && !/^ {4}\};?$/.test(lines[i] ?? ''); i++) inner += lines[i];
        const v = /\[key: string\]:\s*(.*?);?\s*$/.exec(inner);
        fields.set(f[1], { kind: 'map', of: v ? parseType(v[1] ?? '', local) : { kind: 'leaf' } });
      } else {
        fields.set(f[1], parseType(rest, local));
      }
    }
    out.set(local.get(name) ?? name, { fields });
  }
  return out;
}

let index: Map<string, TypeInfo> | undefined;

function typeIndex(): Map<string, TypeInfo> {
  if (index) return index;
  index = new Map();
  for (const pkg of ['kubernetes-models', '@kubernetes-models/apimachinery']) {
    for (const file of dtsFiles(packageDir(pkg))) {
      for (const [k, v] of parseDts(readFileSync(file, 'utf8'))) index.set(k, v);
    }
  }
  return index;
}

/** The global type name of a top-level object, from kubernetes-models/<apiVersion>/<Kind>.d.ts. */
function topLevelType(apiVersion: string, kind: string): string | undefined {
  const file = join(packageDir('kubernetes-models'), apiVersion, `${kind}.d.ts`);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
  const alias = new RegExp(`I${kind} as (\\w+)`).exec(text);
  return alias?.[1];
}

/** JSON paths of fields that the object's Kubernetes type does not have. */
export function unknownFields(obj: Record<string, unknown>): string[] {
  const apiVersion = String(obj.apiVersion);
  const kind = String(obj.kind);
  const top = topLevelType(apiVersion, kind);
  if (!top) return [`${apiVersion} ${kind}: no such type in kubernetes-models`];
  const types = typeIndex();
  const problems: string[] = [];
  const walk = (value: unknown, type: FieldType, path: string): void => {
    if (value === null || value === undefined) return;
    if (type.kind === 'array') {
      if (Array.isArray(value)) value.forEach((v, i) => walk(v, type.of, `${path}[${i}]`));
      return;
    }
    if (type.kind === 'map') {
      if (typeof value === 'object' && !Array.isArray(value)) for (const [k, v] of Object.entries(value)) walk(v, type.of, `${path}.${k}`);
      return;
    }
    if (type.kind !== 'ref') return;
    const info = types.get(type.name);
    if (!info || typeof value !== 'object' || Array.isArray(value)) return; // IntOrString, Quantity, Time…
    for (const [k, v] of Object.entries(value)) {
      const ft = info.fields.get(k);
      if (!ft) problems.push(`${path}.${k}: unknown field (${type.name.replace(/^IIoK8s(Api|Apimachinery)/, '')} has ${[...info.fields.keys()].join(', ')})`);
      else walk(v, ft, `${path}.${k}`);
    }
  };
  walk(obj, { kind: 'ref', name: top }, kind);
  return problems;
}
