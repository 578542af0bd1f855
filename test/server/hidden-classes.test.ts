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

/** Runs `script` in a Node child that may use V8's natives syntax; its last line of output, parsed. */
function runChild(script: string): Record<string, unknown> {
  const r = spawnSync(process.execPath, ['--allow-natives-syntax', '--input-type=module', '-e', script], {
    encoding: 'utf8',
    timeout: 60_000,
  });
  assert.equal(r.status, 0, r.stderr);
  return JSON.parse(r.stdout.trim().split('\n').pop() as string) as Record<string, unknown>;
}

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
  const out = runChild(child);
  // All optimized first; the control's code goes with its hidden class, so the check can fail.
  assert.deepEqual(out.control, { before: true, after: false }, 'control');
  for (const name of ['Request', 'Response', 'AnswerWriter', 'WireWriter']) {
    assert.deepEqual(out[name], { before: true, after: true }, name);
  }
});

// A cache refresh writes the fetched records into the entry's kept answer (PreparedAnswer.refill).
// A field whose value only its class-field initializer ever stored is a constant to V8, and the
// first change of it, in any instance, throws away every optimized function that read it: under
// load, the reply writers, compiled again on the server's core. prepared-reply.ts assigns those
// fields in the constructor instead; this keeps them so.
const refillChild = `
const { PreparedAnswer } = await import(${JSON.stringify(js('server/prepared-reply.js'))});
const answer = () => new PreparedAnswer('a.example.', 1, Buffer.alloc(16), 1, 0, 0, 0x8180, new Uint16Array(1), 27);
// The control: a field set by its initializer alone, then changed.
class Plain { constructor(a) { this.a = a; } b = -1; }
const answers = [answer(), answer(), answer()];
const plains = [new Plain(1), new Plain(2), new Plain(3)];
const readAnswer = (x) => x.an + x.ns + x.ar + x.flags + x.body.length + x.questionEnd + x.serialAt + x.zone.length +
  (x.zoneAt === null ? 1 : 0) + x.minTtl + (x.hasSoa ? 1 : 0) + x.negativeTtl + x.nsInAuthority +
  (x.answerHasQtype ? 1 : 0) + (x.expiredSignature ? 1 : 0) + x.ttlOffsets.length;
const readPlain = (x) => x.a + x.b;
const optimized = (f) => (%GetOptimizationStatus(f) & 16) !== 0;
const out = {};
for (const [name, f, xs] of [['answer', readAnswer, answers], ['control', readPlain, plains]]) {
  %PrepareFunctionForOptimization(f);
  for (let i = 0; i < 1000; i++) f(xs[i % 3]);
  %OptimizeFunctionOnNextCall(f);
  f(xs[0]);
  out[name] = { before: optimized(f) };
}
const fetched = answer();
fetched.serialAt = 4; fetched.zoneAt = [2]; fetched.zone = 'example.'; fetched.minTtl = 30; fetched.hasSoa = true;
fetched.negativeTtl = 30; fetched.nsInAuthority = 1; fetched.answerHasQtype = true; fetched.expiredSignature = true;
const refilled = answers[0].refill(fetched);
plains[0].b = 7;
out.answer.after = optimized(readAnswer);
out.control.after = optimized(readPlain);
out.refilled = refilled && answers[0].minTtl === 30 && answers[0].zone === 'example.';
console.log(JSON.stringify(out));
`;

test('hidden classes: a cache refresh refilling an answer keeps the code that reads answers optimized', () => {
  const out = runChild(refillChild);
  assert.deepEqual(out.control, { before: true, after: false }, 'control: an initializer-only field changed');
  assert.equal(out.refilled, true, 'refill took the fetched facts');
  assert.deepEqual(out.answer, { before: true, after: true }, 'the reader of answers stays optimized');
});

// The cache's first refresh of an expired entry (issue 23 point 3, BENCHMARKS.md "The first
// refresh wave"): in the latency bench every entry of the warm-up expires at once ~30 s in, and
// any code on that path V8 had never run threw away the optimized code around it, which was
// compiled again on the server's core in the same second. serveDNS now sends a dead entry the
// miss's way by the test every hit makes, and the refresh is its own method, so serveDNS and
// keep stay optimized; settle, which calls it, is small and may be compiled again.
const refreshChild = `
const distTest = (p) => ${JSON.stringify(pathToFileURL(resolve('dist/test')).href)} + '/' + p;
const clock = await import(${JSON.stringify(js('server/clock.js'))});
clock.freezeClock(1_000_000);
const { QType } = await import(${JSON.stringify(js('dns/constants.js'))});
const { CacheHandler } = await import(${JSON.stringify(js('plugins/cache/handler.js'))});
const h = await import(distTest('cache/harness.js'));
const { query } = await import(distTest('helpers/dns.js'));
const up = await h.startUpstream((q) => {
  const m = h.answerTo(q);
  m.answers.push(h.rr(q.questions[0].name, QType.A, 30, { address: '10.0.0.1' }));
  return m;
});
const rig = await h.startRig('cache 3600', h.forwardTo(up.port));
const ask = async (i) => (await query(rig.port, 'n' + i + '.example.org.', QType.A)).answers[0].data.address;
const P = CacheHandler.prototype;
const fns = { serveDNS: P.serveDNS, keep: P.keep };
for (const f of Object.values(fns)) %PrepareFunctionForOptimization(f);
for (let i = 0; i < 40; i++) await ask(i); // misses: each stored by keep
for (let r = 0; r < 3; r++) for (let i = 0; i < 40; i++) await ask(i); // hits
for (const f of Object.values(fns)) %OptimizeFunctionOnNextCall(f);
await ask(0);
await ask(100);
const optimized = (f) => (%GetOptimizationStatus(f) & 16) !== 0;
const out = { before: {}, after: {}, answers: [] };
for (const [k, f] of Object.entries(fns)) out.before[k] = optimized(f);
clock.advanceClock(31_000); // every entry past its TTL: the next asks refresh them
for (let i = 0; i < 40; i++) out.answers.push(await ask(i));
for (const [k, f] of Object.entries(fns)) out.after[k] = optimized(f);
await rig.close();
await up.close();
console.log(JSON.stringify(out));
`;

test("the cache's first refresh of an expired entry keeps serveDNS and keep optimized", () => {
  const out = runChild(refreshChild) as {
    before: Record<string, boolean>;
    after: Record<string, boolean>;
    answers: string[];
  };
  assert.deepEqual(out.before, { serveDNS: true, keep: true }, 'optimized before the refresh');
  assert.deepEqual(new Set(out.answers), new Set(['10.0.0.1']), 'every refresh answered');
  assert.equal(out.answers.length, 40);
  assert.deepEqual(out.after, { serveDNS: true, keep: true }, 'still optimized after the first refreshes');
});
