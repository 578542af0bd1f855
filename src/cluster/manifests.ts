// Cluster state from kubectl-style files instead of an API server (`manifests PATH`): one
// file or every .yaml/.yml/.json file of a directory, multi-document YAML, `List` kinds
// (the output of `kubectl get svc,endpointslices,ns,pods -A -o yaml`). The files are
// checked every few seconds and, when one changed, re-read and diffed against what was
// loaded, so the index sees the same upsert/delete events an API watch would give.

import { readdir, readFile, stat } from 'node:fs/promises';
import { extname, join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import type { parseAllDocuments as ParseAllDocuments } from 'yaml';
import { contentFreeMessage } from '../corefile/errors.js';
import { isRecord, stringMap } from '../kube/types.js';
import type { Logger } from '../log.js';
import type { ClusterEvent, ClusterKind, ClusterSink, KubeSource } from './events.js';
import {
  projectEndpointSlice,
  projectNamespace,
  projectPod,
  projectService,
  recordKey,
  type ProjectionOptions,
} from './objects.js';
import type { LabelMatcher } from './selector.js';
import { settleHeapSoon } from '../server/heap.js';

let yamlParser: typeof ParseAllDocuments | null = null;

export interface ManifestSourceOptions {
  path: string;
  pollMs: number;
  labels: LabelMatcher;
  namespaceLabels: LabelMatcher;
  includeSlices: boolean;
  includePods: boolean;
  projection: ProjectionOptions;
  log: Logger;
}

type Upsert = Extract<ClusterEvent, { op: 'upsert' }>;

const EXTENSIONS = new Set(['.yaml', '.yml', '.json']);

export class ManifestError extends Error {
  readonly code = 'KUBERNETES_ERR_MANIFESTS';
  constructor(message: string) {
    super(message);
    this.name = 'ManifestError';
  }
}

export class ManifestSource implements KubeSource {
  readonly description: string;
  private sink: ClusterSink = () => {};
  /** Everything loaded, by `kind␀key`. */
  private current = new Map<string, Upsert>();
  /** The last good parse of each file, kept when a later edit does not parse. */
  private readonly perFile = new Map<string, Upsert[]>();
  private stamp = '';
  private timer: NodeJS.Timeout | null = null;
  private reading = false;
  private missing = false;

  constructor(private readonly o: ManifestSourceOptions) {
    this.description = `manifests ${o.path}`;
  }

  async start(sink: ClusterSink): Promise<void> {
    this.sink = sink;
    try {
      await stat(this.o.path);
    } catch (err) {
      throw new ManifestError(
        `manifests ${this.o.path}: ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file or directory' : (err as Error).message}`,
      );
    }
    await this.check();
    sink({ op: 'synced' });
    if (this.o.pollMs > 0) {
      this.timer = setInterval(() => void this.check(), this.o.pollMs);
      this.timer.unref();
    }
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /** A directory's manifest files, in name order. */
  private async files(): Promise<string[]> {
    const names = await readdir(this.o.path);
    return names
      .filter((n) => EXTENSIONS.has(extname(n).toLowerCase()) && !n.startsWith('.'))
      .sort()
      .map((n) => join(this.o.path, n));
  }

  /** Re-reads the files if any changed (name, size, mtime or inode). Never throws. */
  async check(): Promise<void> {
    if (this.reading) return;
    this.reading = true;
    try {
      let files: string[];
      const stamps: string[] = [];
      try {
        // One file (the usual case): its one stat is the whole poll.
        const top = await stat(this.o.path);
        if (top.isDirectory()) {
          files = await this.files();
          for (const f of files) {
            const s = await stat(f);
            stamps.push(`${f}:${s.mtimeMs}:${s.size}:${s.ino}`);
          }
        } else {
          files = [this.o.path];
          stamps.push(`${this.o.path}:${top.mtimeMs}:${top.size}:${top.ino}`);
        }
      } catch (err) {
        if (!this.missing) {
          this.missing = true;
          this.sink({ op: 'connection', up: false, detail: `${this.description}: ${(err as Error).message}` });
        }
        return;
      }
      if (this.missing) {
        this.missing = false;
        this.sink({ op: 'connection', up: true, detail: this.description });
      }
      const stamp = stamps.join('\n');
      if (stamp === this.stamp) return;
      this.stamp = stamp;
      for (const f of [...this.perFile.keys()]) if (!files.includes(f)) this.perFile.delete(f);
      for (const f of files) {
        try {
          // The YAML library (a large module) is loaded only for YAML files; JSON needs none.
          if (!f.endsWith('.json') && !yamlParser) yamlParser = (await import('yaml')).parseAllDocuments;
          this.perFile.set(f, this.parse(f, await readFile(f, 'utf8')));
        } catch (err) {
          const kept = this.perFile.has(f) ? 'keeping its previous objects' : 'nothing loaded from it';
          this.o.log.warn(`${f}: ${(err as Error).message.split('\n')[0]}; ${kept}`);
        }
      }
      this.apply();
      // The files' parse and the records they replaced are garbage now, in bulk.
      settleHeapSoon();
    } finally {
      this.reading = false;
    }
  }

  /** Emits the difference between what is loaded and what the files now say. */
  private apply(): void {
    const next = new Map<string, Upsert>();
    for (const list of this.perFile.values()) for (const u of list) next.set(`${u.kind}\u0000${u.key}`, u);
    for (const [id, old] of this.current) if (!next.has(id)) this.sink({ op: 'delete', kind: old.kind, key: old.key });
    for (const [id, u] of next) {
      const old = this.current.get(id);
      if (old === undefined || !isDeepStrictEqual(old.value, u.value)) this.sink(u);
    }
    this.current = next;
  }

  private parse(file: string, text: string): Upsert[] {
    const out: Upsert[] = [];
    // JSON (kubectl -o json) is read with JSON.parse: the YAML parser's document tree for a
    // large List costs many times the data in memory and time.
    if (file.endsWith('.json')) {
      let obj: unknown;
      try {
        obj = JSON.parse(text);
      } catch (e) {
        throw new ManifestError(contentFreeMessage(e));
      }
      this.collect(obj, '', out, file);
      return out;
    }
    if (!yamlParser) throw new ManifestError('the YAML parser is not loaded');
    for (const doc of yamlParser(text)) {
      if (doc.errors.length > 0) throw new ManifestError(contentFreeMessage(doc.errors[0]));
      this.collect(doc.toJS({ maxAliasCount: 1000 }), '', out, file);
    }
    return out;
  }

  private collect(obj: unknown, listKind: string, out: Upsert[], file: string): void {
    if (obj === null || obj === undefined) return;
    if (!isRecord(obj)) {
      this.o.log.warn(`${file}: a document is not an object; skipped`);
      return;
    }
    const kind = typeof obj.kind === 'string' ? obj.kind : listKind;
    if (Array.isArray(obj.items) && (kind === 'List' || kind.endsWith('List'))) {
      const itemKind = kind === 'List' ? '' : kind.slice(0, -4);
      for (const item of obj.items) this.collect(item, itemKind, out, file);
      return;
    }
    const meta = isRecord(obj.metadata) ? obj.metadata : undefined;
    const labels = meta !== undefined ? stringMap(meta.labels) : undefined;
    // As `kubectl apply` does, a namespaced object without a namespace goes to "default".
    if (meta !== undefined && kind !== 'Namespace' && meta.namespace === undefined) meta.namespace = 'default';
    const p = this.o.projection;
    const key = (ns: string) => recordKey(ns, typeof meta?.name === 'string' ? meta.name : '');
    switch (kind) {
      case 'Service': {
        if (!this.o.labels(labels)) return;
        const value = projectService(obj, p);
        if (value) out.push({ op: 'upsert', kind, key: key(value.namespace), value });
        return;
      }
      case 'EndpointSlice': {
        if (!this.o.includeSlices || !this.o.labels(labels)) return;
        const value = projectEndpointSlice(obj, p);
        if (value) out.push({ op: 'upsert', kind, key: key(value.namespace), value });
        return;
      }
      case 'Namespace': {
        if (!this.o.namespaceLabels(labels)) return;
        const value = projectNamespace(obj, p);
        if (value) out.push({ op: 'upsert', kind, key: key(''), value });
        return;
      }
      case 'Pod': {
        if (!this.o.includePods || !this.o.labels(labels)) return;
        const value = projectPod(obj, p);
        if (value) out.push({ op: 'upsert', kind, key: key(value.namespace), value });
        return;
      }
      default:
        // Deployments, ConfigMaps, Endpoints…: nothing DNS serves from them.
        return;
    }
  }

  /** Counts of what is loaded, by kind (for tests and logs). */
  counts(): Record<ClusterKind, number> {
    const c: Record<ClusterKind, number> = { Service: 0, EndpointSlice: 0, Namespace: 0, Pod: 0 };
    for (const u of this.current.values()) c[u.kind]++;
    return c;
  }
}
