// Run as a program (inside `unshare --mount` with the hosts file bind-mounted, like Docker's):
// node hosts-write-main.js HOSTS ENTRIES_JSON → adds the block, removes it, printing each write method.
import { syncHostsBlock } from '../../src/connect/hosts-file.js';

const [path, json] = process.argv.slice(2);
const entries = JSON.parse(json ?? '[]') as string[];
async function main(): Promise<void> {
  const added = await syncHostsBlock({ path: path ?? '/nonexistent', addedNewline: false, created: false }, entries);
  process.stdout.write(`${added.method ?? 'unchanged'}\n`);
  const removed = await syncHostsBlock(added.record, null);
  process.stdout.write(`${removed.method ?? 'unchanged'}\n`);
}
main().catch((err: Error) => {
  process.stderr.write(`${err.message}\n`);
  process.exit(1);
});
