// The native UDP path's batch callback (NativeUdp), driven through a stand-in for the addon:
// answers made during the batch land in the send slab, each for its own datagram; answers
// worked out later go to their own client; and the path copies without Buffer#copy, whose
// view and TypedArray#set per call cost more than the copy at these sizes.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { QType } from '../../src/dns/constants.js';
import { decodeMessage } from '../../src/dns/message.js';
import { Dispatcher } from '../../src/server/dispatcher.js';
import { DnsListener, listenerKey } from '../../src/server/listeners.js';
import { recordsReply } from '../../src/server/reply.js';
import { Response, type HandlerResult, type Request } from '../../src/server/request.js';
import { Router } from '../../src/server/router.js';
import { META_INTS, OUT_INTS, type UdpBatchAddon, type UdpBatchSocket } from '../../src/server/udp-native.js';
import { buildQuery } from '../helpers/dns.js';

const SLOTS = 16;
const SLOT_SIZE = 512;

/** One A record for the question (owner: the pointer to it), TTL 30, address 10.0.0.N with N = the first label's length. */
function answerFor(req: Request): Buffer {
  const rr = Buffer.from([0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 30, 0, 4, 10, 0, 0, req.qname.indexOf('.')]);
  return recordsReply(req, 0, 0x0400, rr, 1, 0, 0);
}

interface Rig {
  onBatch: (n: number) => number;
  /** Writes queries for `names` into the receive slab, from ports 40000 + i. */
  fill(names: string[]): void;
  /** The answers of the last batch, by the datagram they answer. */
  batchAnswers(count: number): Map<number, Buffer>;
  /** Datagrams sent outside a batch: [port, bytes]. */
  late: Array<[number, Buffer]>;
}

function rig(chain: (req: Request) => HandlerResult): Rig {
  const dispatcher = new Dispatcher();
  const router = new Router();
  router.add({ zone: 'example.', serverLabel: 'dns://:53', chain });
  const key = listenerKey('127.0.0.1', 53);
  dispatcher.routers.set(key, router);
  const sock: UdpBatchSocket = {
    port: 53,
    address: '127.0.0.1',
    in: new ArrayBuffer(SLOTS * SLOT_SIZE),
    meta: new ArrayBuffer(SLOTS * META_INTS * 4),
    out: new ArrayBuffer(64 * 1024),
    outMeta: new ArrayBuffer(SLOTS * OUT_INTS * 4),
    slots: SLOTS,
    slotSize: SLOT_SIZE,
  };
  let onBatch: ((n: number) => number) | null = null;
  const late: Array<[number, Buffer]> = [];
  const addon = {
    start: (_s: UdpBatchSocket, cb: (n: number) => number) => (onBatch = cb),
    pause() {},
    close() {},
    sendTo: (_s: UdpBatchSocket, data: Uint8Array, _af: number, port: number) => {
      late.push([port, Buffer.from(data)]);
      return 0;
    },
    ntop: () => '127.0.0.1',
  } as unknown as UdpBatchAddon;
  const listener = new DnsListener({ host: '127.0.0.1', port: 53, routerKey: key }, dispatcher);
  (listener as unknown as { startNative(a: UdpBatchAddon, s: UdpBatchSocket): void }).startNative(addon, sock);
  const inBuf = Buffer.from(sock.in);
  const meta = new Int32Array(sock.meta);
  const out = Buffer.from(sock.out);
  const outMeta = new Int32Array(sock.outMeta);
  return {
    onBatch: (n) => onBatch!(n),
    fill(names) {
      names.forEach((name, i) => {
        const q = buildQuery(name, QType.A, { id: 1000 + i });
        q.copy(inBuf, i * SLOT_SIZE);
        const m = i * META_INTS;
        meta[m] = q.length;
        meta[m + 1] = 0;
        meta[m + 2] = 4;
        meta[m + 3] = 40000 + i;
        meta[m + 4] = 0;
        meta[m + 5] = 0x7f000001;
      });
    },
    batchAnswers(count) {
      const got = new Map<number, Buffer>();
      for (let k = 0; k < count; k++) {
        const o = k * OUT_INTS;
        got.set(outMeta[o + 2]!, Buffer.from(out.subarray(outMeta[o], outMeta[o]! + outMeta[o + 1]!)));
      }
      return got;
    },
    late,
  };
}

const names = ['a.example.', 'bb.example.', 'ccc.example.', 'DdDd.Example.', 'eeeee.example.'];

describe('NativeUdp batch callback', () => {
  test('answers made during the batch go into the send slab, one per datagram, each its own', () => {
    const r = rig((req) => Response.wire(answerFor(req), 'test'));
    r.fill(names);
    const n = r.onBatch(names.length);
    assert.equal(n, names.length);
    const got = r.batchAnswers(n);
    names.forEach((name, i) => {
      const m = decodeMessage(got.get(i)!);
      assert.equal(m.id, 1000 + i);
      assert.equal(m.questions[0]!.name, name, 'the question as asked, letter case kept');
      assert.equal(m.answers.length, 1);
      assert.equal((m.answers[0]!.data as { address: string }).address, `10.0.0.${name.indexOf('.')}`);
    });
    assert.equal(r.late.length, 0);
  });

  test('answers worked out after the batch go to their own client, in whatever order they finish', async () => {
    const resolvers: Array<() => void> = [];
    const r = rig(
      (req) => new Promise<Response>((resolve) => resolvers.push(() => resolve(Response.wire(answerFor(req), 'test')))),
    );
    r.fill(names);
    assert.equal(r.onBatch(names.length), 0, 'nothing answered during the batch');
    // A second batch reuses the slots before the first one's answers are ready.
    r.fill(['zz.example.']);
    r.onBatch(1);
    for (let i = resolvers.length - 1; i >= 0; i--) resolvers[i]!();
    await new Promise((res) => setImmediate(res));
    assert.equal(r.late.length, names.length + 1);
    const got = r.late.map(([port, bytes]) => {
      const m = decodeMessage(bytes);
      return `${port} ${m.id} ${m.questions[0]!.name} ${(m.answers[0]!.data as { address: string }).address}`;
    });
    const want = [
      ...names.map((name, i) => [40000 + i, 1000 + i, name] as const),
      [40000, 1000, 'zz.example.'] as const,
    ].map(([port, id, name]) => `${port} ${id} ${name} 10.0.0.${name.indexOf('.')}`);
    assert.deepEqual(got.sort(), want.sort());
  });

  test('the path copies without Buffer#copy (a view and TypedArray#set per call)', () => {
    const r = rig((req) => Response.wire(answerFor(req), 'test'));
    r.fill(names);
    r.onBatch(names.length); // warm
    r.fill(names);
    // Buffer.prototype is typed `any` by @types/node: name it as what it is.
    const proto = Buffer.prototype as Buffer;
    const copy = proto.copy;
    let calls = 0;
    proto.copy = function (this: Buffer, ...args: Parameters<Buffer['copy']>): number {
      calls++;
      return copy.apply(this, args);
    };
    try {
      assert.equal(r.onBatch(names.length), names.length);
    } finally {
      proto.copy = copy;
    }
    assert.equal(calls, 0);
  });
});
