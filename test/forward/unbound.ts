// Runs a real unbound on 127.0.0.1 with local data only, for forward tests.

import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildQuery, sendUdp } from '../helpers/dns.js';
import { freePort } from '../helpers/ports.js';

export const UNBOUND = '/usr/sbin/unbound';

export function unboundAvailable(): boolean {
  return existsSync(UNBOUND);
}

export interface Unbound {
  port: number;
  proc: ChildProcess;
  stop(): Promise<void>;
}

/** Starts unbound answering `local-data` lines for zone `zone` (static) and waits until it answers. */
export async function startUnbound(zone: string, localData: string[]): Promise<Unbound> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'clusterdns-unbound-'));
  const conf = join(dir, 'unbound.conf');
  writeFileSync(
    conf,
    [
      'server:',
      `  interface: 127.0.0.1@${port}`,
      '  do-daemonize: no',
      '  username: ""',
      '  chroot: ""',
      '  pidfile: ""',
      '  use-syslog: no',
      '  logfile: ""',
      '  verbosity: 0',
      `  directory: "${dir}"`,
      '  module-config: "iterator"',
      '  do-ip6: no',
      '  num-threads: 1',
      '  outgoing-range: 32',
      '  access-control: 127.0.0.0/8 allow',
      `  local-zone: "${zone}" static`,
      ...localData.map((l) => (l.includes('"') ? `  local-data: '${l}'` : `  local-data: "${l}"`)),
      '',
    ].join('\n'),
  );
  const proc = spawn(UNBOUND, ['-d', '-c', conf], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  proc.stdout.on('data', (d: Buffer) => (out += d.toString()));
  proc.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const deadline = Date.now() + 10_000;
  for (;;) {
    try {
      await sendUdp(port, buildQuery(zone, 6), 200);
      break;
    } catch {
      if (proc.exitCode !== null || Date.now() > deadline) {
        proc.kill('SIGKILL');
        throw new Error(`unbound did not start: ${out}`);
      }
    }
  }
  return {
    port,
    proc,
    stop: () =>
      new Promise<void>((r) => {
        if (proc.exitCode !== null) return r();
        proc.once('exit', () => r());
        proc.kill('SIGTERM');
      }),
  };
}
