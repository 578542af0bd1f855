// A query's objects (Request, Response, kubernetes's AnswerWriter, the WireWriter) keep their
// hidden classes through a memory-reducing collection (issue 23 point 3): server/request.ts
// `latest`. V8's memory reducer, which runs when JavaScript allocates little (a quiet spell, or
// a load the native answer table serves), keeps no hidden class that no object uses, and
// optimized code built for one is thrown away with it; the query path was then compiled again
// on the server's core.
// A heap snapshot makes the same kind of collection (all available garbage, reducing memory)
// on demand, so a child process with --allow-natives-syntax can check the optimized code stays.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const js = (path: string): string => pathToFileURL(resolve('dist/src', path)).href;

const child = `
import v8 from 'node:v8';
const { Request, Response } = await import(${JSON.stringify(js('server/request.js'))});
const { WireWriter } = await import(${JSON.stringify(js('dns/message.js'))});
const { AnswerWriter } = await import(${JSON.stringify(js('plugins/kubernetes/answer.js'))});
const q = { id: 1, flags: 0x100, opcode: 0, qname: 'a.example.', qnameLower: 'a.example.', qtype: 1, qclass: 1, questionEnd: 27, edns: null };
const client = { remoteAddress: '127.0.0.1', remotePort: 53000, transport: 'udp' };
const raw = Buffer.alloc(27);
// The control: a class nothing keeps an instance of. Each object escapes (to sink), as a
// query's do, so that the optimized code allocates it and is built for its hidden class.
let sink = null;
class Plain { constructor(a) { this.a = a; this.b = a + 1; } }
// One function per class a query makes, each built for that class alone.
const makers = {
  control: (n) => { for (let i = 0; i < n; i++) sink = new Plain(i); },
  Request: (n) => { for (let i = 0; i < n; i++) sink = new Request(raw, q, client); },
  Response: (n) => { for (let i = 0; i < n; i++) sink = Response.rcode(0, 'test'); },
  AnswerWriter: (n) => { for (let i = 0; i < n; i++) { const a = new AnswerWriter(27, 'example.', 5); sink = a.an; } },
  WireWriter: (n) => { for (let i = 0; i < n; i++) { const w = new WireWriter(64); w.u16(i); sink = w; } },
};
const optimized = (f) => (%GetOptimizationStatus(f) & 16) !== 0;
const out = {};
for (const [name, f] of Object.entries(makers)) {
  %PrepareFunctionForOptimization(f);
  f(500); f(500);
  %OptimizeFunctionOnNextCall(f);
  f(50);
  out[name] = { before: optimized(f) };
}
sink = null;
v8.getHeapSnapshot().resume();
for (const [name, f] of Object.entries(makers)) out[name].after = optimized(f);
console.log(JSON.stringify(out));
`;

test('hidden classes: a memory-reducing collection with no query in flight keeps the query path optimized', () => {
  const r = spawnSync(process.execPath, ['--allow-natives-syntax', '--input-type=module', '-e', child], {
    encoding: 'utf8',
    timeout: 60_000,
  });
  assert.equal(r.status, 0, r.stderr);
  const out = JSON.parse(r.stdout.trim().split('\n').pop() as string);
  // All optimized first; the control's code goes with its hidden class, so the check can fail.
  assert.deepEqual(out.control, { before: true, after: false }, 'control');
  for (const name of ['Request', 'Response', 'AnswerWriter', 'WireWriter']) {
    assert.deepEqual(out[name], { before: true, after: true }, name);
  }
});
