// Runs diagnose for each conformance scenario in one process (inside the test's namespace),
// writing a marker line to the DNS server's query log before each, and each report to OUTDIR.
// `node conformance-driver.js LOGFILE OUTDIR KEY=NAME=RESOLV_CONF...`
import { appendFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { diagnose, parseDiagnoseArgs } from '../../src/diagnose/command.js';

const [logFile, outDir, ...scenarios] = process.argv.slice(2);
if (!logFile || !outDir) {
  process.stderr.write('usage: conformance-driver LOGFILE OUTDIR KEY=NAME=RESOLV_CONF...\n');
  process.exit(2);
}
for (const s of scenarios) {
  const [key, name, conf] = s.split('=');
  const opts = parseDiagnoseArgs([name!, '--resolv-conf', conf!]);
  if (opts === 'help' || opts === 'version') throw new Error('unexpected help');
  appendFileSync(logFile, JSON.stringify({ mark: `ours ${key}` }) + '\n');
  writeFileSync(join(outDir, `${key}.json`), JSON.stringify(await diagnose(opts, {})));
}
appendFileSync(logFile, JSON.stringify({ mark: 'end' }) + '\n');
