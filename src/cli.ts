// `clusterdns`: CoreDNS's flags for the server role (src/serve.ts), and subcommands for the
// other roles (src/subcommands.ts). Kept small: each role loads only what it needs.

import { autoWorkers } from './server/workercount.js';
import { parseArgs } from 'node:util';
import { normalizeArgv } from './cli-flags.js';

const USAGE = `Usage of clusterdns:
  -conf string
        Corefile to load (default "Corefile")
  -dns.port string
        Default port (default "53")
  -pidfile string
        Path to write pid file
  -plugins
        List installed plugins
  -quiet
        Quiet mode (no initialization output)
  -validate
        Check the Corefile (every plugin's setup, no socket, no API call), print each problem, exit 0 only if it would load
  -version
        Show version
  -workers auto|int
        Worker processes sharing the sockets (also CLUSTERDNS_WORKERS; default auto:
        the CPUs this process may use, capped by its cgroup CPU quota)

Other roles: clusterdns nodecache|connect|disconnect|autoscale|diagnose ... (see README)
`;

interface Flags {
  conf?: string;
  port: number;
  plugins: boolean;
  version: boolean;
  quiet: boolean;
  pidfile?: string;
  help: boolean;
  validate: boolean;
  workers: number;
}

/** CLUSTERDNS_CGROUP_ROOT: where the cgroup file system is mounted, when not /sys/fs/cgroup. */
function cgroupPaths() {
  return { root: process.env['CLUSTERDNS_CGROUP_ROOT'] || '/sys/fs/cgroup', self: '/proc/self/cgroup' };
}

function parseFlags(argv: string[]): Flags {
  const { values } = parseArgs({
    args: normalizeArgv(argv),
    options: {
      conf: { type: 'string' },
      'dns.port': { type: 'string' },
      plugins: { type: 'boolean' },
      version: { type: 'boolean' },
      quiet: { type: 'boolean' },
      pidfile: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
      validate: { type: 'boolean' },
      workers: { type: 'string' },
    },
    strict: true,
    allowPositionals: false,
  });
  const port = values['dns.port'] === undefined ? 53 : Number(values['dns.port']);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`invalid -dns.port "${values['dns.port']}"`);
  const envWorkers = process.env['CLUSTERDNS_WORKERS'];
  const w = values.workers ?? envWorkers;
  const workers = w === undefined || w === 'auto' || w === '' ? autoWorkers(cgroupPaths()) : Number(w);
  if (!Number.isInteger(workers) || workers < 1 || workers > 64) throw new Error(`invalid -workers "${w}"`);
  return {
    conf: values.conf,
    port,
    plugins: values.plugins === true,
    version: values.version === true,
    quiet: values.quiet === true,
    pidfile: values.pidfile,
    help: values.help === true,
    validate: values.validate === true,
    workers,
  };
}

function fail(msg: string): never {
  process.stderr.write(msg.endsWith('\n') ? msg : msg + '\n');
  process.exit(1);
}

/**
 * CLUSTERDNS_EXIT_WITH_PARENT=1: stop (as on SIGTERM) once the process that started us is
 * gone. Test harnesses set it so a killed test run leaves no servers behind.
 */
function watchParent(): void {
  if (process.env['CLUSTERDNS_EXIT_WITH_PARENT'] !== '1') return;
  const parent = process.ppid;
  const t = setInterval(() => {
    if (process.ppid !== parent) {
      clearInterval(t);
      process.kill(process.pid, 'SIGTERM');
    }
  }, 1000);
  t.unref();
}

export async function main(argv: string[]): Promise<void> {
  watchParent();
  const sub = argv[0];
  if (sub !== undefined && !sub.startsWith('-')) {
    const { runSubcommand } = await import('./subcommands.js');
    await runSubcommand(sub, argv.slice(1));
    return;
  }
  let flags: Flags;
  try {
    flags = parseFlags(argv);
  } catch (e) {
    fail(`${(e as Error).message}\n${USAGE}`);
  }
  if (flags.help) {
    process.stdout.write(USAGE);
    return;
  }
  const serve = await import('./serve.js');
  if (flags.version) {
    process.stdout.write(serve.versionText());
    return;
  }
  if (flags.plugins) {
    process.stdout.write(serve.pluginsText());
    return;
  }
  if (flags.validate) {
    const { validateCorefile } = await import('./validate.js');
    process.exit(await validateCorefile(flags.conf, flags.port));
  }
  await serve.runServer(flags);
}

void main(process.argv.slice(2));
