// `clusterdns nodecache ...`: the NodeLocal DNSCache agent (k8s-dns-node-cache's flags).
// Exit codes: 2 bad flags, 1 cannot start, 0 after SIGTERM/SIGINT.

import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { exitWith, roleLogger, type Logger } from '../log.js';
import { roleFlags } from '../cli-flags.js';
import { VERSION } from '../version.js';
import { NodeCacheAgent } from './agent.js';
import { execRunner, execRunnerSync } from '../sys/exec.js';
import { NodeCacheFlagError, parseNodeCacheFlags, USAGE } from './flags.js';

const nodecacheLogger = (): Logger => roleLogger('nodecache');

function die(code: number, message: string): never {
  return exitWith('nodecache', code, message);
}

export async function run(argv: string[]): Promise<void> {
  const flags = roleFlags('nodecache', USAGE, () => parseNodeCacheFlags(argv, existsSync), NodeCacheFlagError, die);
  if (flags === null) return;
  if (resolve(flags.corefile) === resolve(flags.baseCorefile)) {
    die(2, `-conf and -basecorefile are both ${flags.corefile}: the generated Corefile would overwrite its template`);
  }
  const log = nodecacheLogger();
  if (flags.reloadWithSignal)
    log.info('-reloadwithsignal: accepted; the Corefile is always reloaded in-process when it is regenerated');
  const agent = new NodeCacheAgent(flags, { run: execRunner, runSync: execRunnerSync, log, env: process.env });

  const stop = () => {
    void agent.stop().then(
      () => process.exit(0),
      (e: Error) => {
        log.error(`stopping: ${e.message}`);
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  process.on('SIGUSR1', () => void agent.server?.reload('SIGUSR1'));

  try {
    await agent.start();
  } catch (e) {
    // process.exit runs the agent's exit hook, which removes what start() already set up.
    log.fatal((e as Error).message);
    process.exit(1);
  }
  if (!flags.quiet)
    process.stdout.write(
      `${flags.localIPs.map((ip) => `${ip}:${flags.dnsPort}`).join('\n')}\nclusterdns-${VERSION} nodecache\n`,
    );
}
