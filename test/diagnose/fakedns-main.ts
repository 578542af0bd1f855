// The scripted DNS server as a process, for tests that must run it inside their own network
// namespace: `node fakedns-main.js RULES_JSON HOST PORT LOGFILE`. Prints "ready" once both
// sockets listen; appends each query to LOGFILE as a JSON line when it arrives, so a script
// can write its own marker lines between the programs it runs.
import { appendFileSync } from 'node:fs';
import { startFakeDns, type Rule } from './fakedns.js';

const [rulesJson, host, port, logFile] = process.argv.slice(2);
if (!rulesJson || !host || !port || !logFile) {
  process.stderr.write('usage: fakedns-main RULES_JSON HOST PORT LOGFILE\n');
  process.exit(2);
}
const server = await startFakeDns(JSON.parse(rulesJson) as Rule[], {
  host,
  port: Number(port),
  onQuery: (q) => appendFileSync(logFile, JSON.stringify({ ...q, at: Date.now() }) + '\n'),
});
process.on('SIGTERM', () => void server.close().then(() => process.exit(0)));
process.stdout.write('ready\n');
