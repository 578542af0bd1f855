// A second test reporter for scripts/run-tests.mjs: it prints nothing until the run ends, then
// one block per failed test (file:line, name, the first lines of its error). CI keeps only the
// tail of a long TAP log, and a failure deep inside it was otherwise out of sight.
const MAX_LINES = 12;

function describeError(error) {
  const e = error?.cause ?? error;
  const text = e instanceof Error ? (e.stack ?? `${e.name}: ${e.message}`) : String(e);
  return text.split('\n').slice(0, MAX_LINES);
}

export default async function* failuresReporter(source) {
  const failed = [];
  for await (const event of source) {
    if (event.type !== 'test:fail') continue;
    const d = event.data;
    // A suite fails because a test in it failed; that test has its own block.
    if (d.details?.type === 'suite' && /subtests? failed$/.test(String(d.details?.error?.message ?? ''))) {
      continue;
    }
    failed.push(d);
  }
  if (failed.length === 0) return;
  let out = `\n# ---- ${failed.length} failed (repeated from above) ----\n`;
  for (const d of failed) {
    const where = d.file ? `${d.file}:${d.line ?? '?'}` : '(no file)';
    out += `# FAILED ${where} › ${d.name}\n`;
    for (const line of describeError(d.details?.error)) out += `#   ${line}\n`;
  }
  yield out;
}
