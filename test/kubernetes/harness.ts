// In-process rig for the kubernetes plugin: options parsed from Corefile text, an index fed
// with objects through the same projections the sources use, and the handler asked directly.

import { parseCorefile } from '../../src/corefile/parser.js';
import { decodeMessage, emptyMessage, encodeMessage, type Message } from '../../src/dns/message.js';
import { QClass, Rcode } from '../../src/dns/constants.js';
import { parseQuery } from '../../src/dns/query.js';
import { logger } from '../../src/log.js';
import { HttpServices } from '../../src/server/http.js';
import { ServerServices } from '../../src/server/services.js';
import { Invalidation } from '../../src/server/invalidation.js';
import { finalizeReply } from '../../src/server/reply.js';
import { Request, Response, type ClientInfo, type HandlerResult } from '../../src/server/request.js';
import type { SetupContext } from '../../src/plugins/plugin.js';
import { ClusterIndex } from '../../src/cluster/clusterindex.js';
import type { ClusterEvent } from '../../src/cluster/events.js';
import { KubernetesHandler } from '../../src/plugins/kubernetes/handler.js';
import {
  projectEndpointSlice,
  projectNamespace,
  projectPod,
  projectService,
  recordKey,
  type ProjectionOptions,
} from '../../src/cluster/objects.js';
import type { KubernetesOptions } from '../../src/plugins/kubernetes/options.js';
import { parseOptions } from '../../src/plugins/kubernetes/setup.js';
import type { Obj } from './fixtures.js';

export function fakeContext(zones: string[] = ['.'], corefile = '/tmp/Corefile'): SetupContext {
  return {
    block: { keys: [], zones, port: 53, serverLabel: 'dns://:53', bindAddresses: [], file: corefile },
    corefile,
    configFiles: [corefile],
    http: new HttpServices(),
    services: new ServerServices(),
    logger: logger('kubernetes'),
    resolve: () => Response.rcode(Rcode.SERVFAIL, ''),
    requestReload: () => {},
    instances: () => [],
    blockInstances: () => [],
    shuttingDown: () => false,
    invalidation: new Invalidation(),
  };
}

/** Options of `kubernetes ...` written as it would be in a `.` server block. */
export function optionsFrom(directive: string, ctx = fakeContext()): KubernetesOptions {
  const blocks = parseCorefile(`. {\n${directive}\n}\n`, ctx.corefile);
  const d = blocks[0]!.directives.find((x) => x.name === 'kubernetes')!;
  return parseOptions(d, ctx);
}

/** The events a source would send for these API objects. */
export function eventsFor(
  objects: Obj[],
  projection: ProjectionOptions = { endpointPodNames: false, warn: () => {} },
): ClusterEvent[] {
  const out: ClusterEvent[] = [];
  for (const o of objects) {
    const meta = o.metadata as { name: string; namespace?: string };
    switch (o.kind) {
      case 'Service': {
        const value = projectService(o, projection);
        if (value) out.push({ op: 'upsert', kind: 'Service', key: recordKey(value.namespace, value.name), value });
        break;
      }
      case 'EndpointSlice': {
        const value = projectEndpointSlice(o, projection);
        if (value)
          out.push({ op: 'upsert', kind: 'EndpointSlice', key: recordKey(value.namespace, value.name), value });
        break;
      }
      case 'Namespace': {
        const value = projectNamespace(o, projection);
        if (value) out.push({ op: 'upsert', kind: 'Namespace', key: value.name, value });
        break;
      }
      case 'Pod': {
        const value = projectPod(o, projection);
        if (value) out.push({ op: 'upsert', kind: 'Pod', key: recordKey(value.namespace, meta.name), value });
        break;
      }
    }
  }
  return out;
}

const CLIENT: ClientInfo = {
  proto: 'udp',
  remoteAddress: '127.0.0.1',
  remotePort: 5353,
  family: 1,
  localAddress: '127.0.0.1',
  localPort: 53,
};

export function makeRequest(name: string, type: number, o: { edns?: number; tcp?: boolean } = {}): Request {
  const m = emptyMessage(0x1234);
  m.rd = true;
  m.questions.push({ name, type, class: QClass.IN });
  if (o.edns !== undefined) m.edns = { udpSize: o.edns, version: 0, do: false, zflags: 0, options: [] };
  const raw = encodeMessage(m);
  const q = parseQuery(raw);
  if (typeof q === 'number') throw new Error(`bad test query ${name}`);
  return new Request(raw, q, o.tcp ? { ...CLIENT, proto: 'tcp' } : CLIENT);
}

export interface Rig {
  index: ClusterIndex;
  handler: KubernetesHandler;
  apply(objects: Obj[]): void;
  /** The reply bytes as the server would send them, decoded. */
  ask(name: string, type: number, o?: { edns?: number; tcp?: boolean }): Promise<Message>;
  /** Raw reply bytes (for the hot path, no decoding). */
  serve(req: Request): HandlerResult;
}

export function rig(
  directive: string,
  objects: Obj[] = [],
  localIPs: string[] = ['127.0.0.1'],
  invalidation = new Invalidation(),
): Rig {
  const o = optionsFrom(directive);
  const index = new ClusterIndex();
  const handler = new KubernetesHandler(
    o,
    index,
    () => Response.rcode(Rcode.SERVFAIL, ''),
    () => localIPs,
    invalidation,
  );
  handler.open();
  const next = () => Response.rcode(Rcode.SERVFAIL, 'next');
  const r: Rig = {
    index,
    handler,
    apply(objs) {
      for (const ev of eventsFor(objs)) index.apply(ev);
    },
    async ask(name, type, opts) {
      const req = makeRequest(name, type, opts);
      const res = await handler.serveDNS(req, next);
      return decodeMessage(finalizeReply(req, res));
    },
    serve: (req) => handler.serveDNS(req, next),
  };
  r.apply(objects);
  index.apply({ op: 'synced' });
  return r;
}
