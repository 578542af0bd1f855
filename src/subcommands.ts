// Dispatch for the roles other than the cluster DNS server. Each role registers here.

type Command = (argv: string[]) => Promise<void>;

const commands = new Map<string, () => Promise<Command>>();

export function registerCommand(name: string, load: () => Promise<Command>): void {
  commands.set(name, load);
}

export async function runSubcommand(name: string, argv: string[]): Promise<void> {
  const load = commands.get(name);
  if (!load) {
    process.stderr.write(
      `clusterdns: unknown command "${name}" (known: ${[...commands.keys()].sort().join(', ') || 'none yet'}); run clusterdns -h\n`,
    );
    process.exit(2);
  }
  const cmd = await load();
  await cmd(argv);
}

registerCommand('autoscale', async () => (await import('./autoscale/command.js')).run);
registerCommand('diagnose', async () => (await import('./diagnose/command.js')).run);
registerCommand('nodecache', async () => (await import('./nodecache/command.js')).run);
registerCommand('connect', async () => (await import('./connect/command.js')).run);
registerCommand('disconnect', async () => (await import('./connect/command.js')).runDisconnect);
