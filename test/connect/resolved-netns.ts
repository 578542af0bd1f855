// A real systemd-resolved for tests, cut off from the host: `unshare` gives it its own network,
// mount and PID namespaces, a private dbus-daemon (socket in a temporary directory) for its
// system bus, and tmpfs over /run/systemd and /run/netns. Inside, link kdns0 (10.250.0.1/24) is
// one end of a veth pair whose other end sits in a second namespace ("peer") at 10.250.0.53,
// where a real clusterdns answers on port 5353. Killing `unshare` ends the PID namespace and
// with it every process inside.
import { execFile, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const RESOLVED_BINARIES = ['/lib/systemd/systemd-resolved', '/usr/lib/systemd/systemd-resolved'];

export const SERVER_IP = '10.250.0.53';
export const SERVER_PORT = 5353;
export const LINK = 'kdns0';

function onPath(tool: string): boolean {
  return spawnSync('sh', ['-c', 'command -v "$1"', 'sh', tool]).status === 0;
}

/** Why a real systemd-resolved cannot run here, or null when it can. */
export function resolvedUnavailable(): string | null {
  if (process.platform !== 'linux') return 'not Linux';
  if (typeof process.getuid !== 'function' || process.getuid() !== 0) return 'needs root for namespaces';
  if (!RESOLVED_BINARIES.some((p) => fs.existsSync(p)))
    return 'systemd-resolved is not installed (apt-get install systemd-resolved)';
  for (const tool of ['resolvectl', 'dbus-daemon', 'unshare', 'nsenter', 'ip'])
    if (!onPath(tool)) return `${tool} is not installed`;
  const probe = spawnSync('unshare', [
    '--net',
    '--mount',
    '--pid',
    '--fork',
    'sh',
    '-c',
    'ip link add t0 type veth peer name t1',
  ]);
  if (probe.status !== 0) return `cannot create namespaces and veth links here: ${probe.stderr.toString().trim()}`;
  return null;
}

const BUS_CONFIG = (socket: string) => `<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path=${socket}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_type="*"/>
    <allow send_destination="*"/>
    <allow receive_type="*"/>
    <allow receive_sender="*"/>
  </policy>
</busconfig>
`;

const COREFILE = `cluster.local:${SERVER_PORT} {
  bind ${SERVER_IP}
  log
  hosts {
    10.96.120.15 backend.default.svc.cluster.local
  }
}
.:${SERVER_PORT} {
  bind ${SERVER_IP}
  log
  whoami
}
`;

// $1 = work dir, $2 = node, $3 = clusterdns launcher, $4 = systemd-resolved binary.
const SANDBOX = String.raw`set -e
ip link set lo up
mkdir -p /run/netns /run/systemd
mount -t tmpfs tmpfs /run/netns
mount -t tmpfs tmpfs /run/systemd
ip netns add peer
ip link add kdns0 type veth peer name kdns1
ip link set kdns1 netns peer
ip addr add 10.250.0.1/24 dev kdns0
ip link set kdns0 up
ip netns exec peer ip link set lo up
ip netns exec peer ip addr add 10.250.0.53/24 dev kdns1
ip netns exec peer ip link set kdns1 up
dbus-daemon --config-file="$1/bus.conf" --nofork --nopidfile >"$1/dbus.log" 2>&1 &
while [ ! -S "$1/bus.sock" ]; do sleep 0.05; done
DBUS_SYSTEM_BUS_ADDRESS="unix:path=$1/bus.sock" "$4" >"$1/resolved.log" 2>&1 &
ip netns exec peer "$2" "$3" -conf "$1/Corefile" -workers 1 >"$1/dns.log" 2>&1 &
echo ready
wait
`;

export interface CmdResult {
  code: number;
  stdout: string;
  stderr: string;
}

export class ResolvedSandbox {
  readonly dir: string;
  private unshare: ChildProcess | null = null;
  private innerPid = 0;

  constructor() {
    this.dir = fs.mkdtempSync(join(tmpdir(), 'connect-resolved-'));
    // resolved drops to the systemd-resolve user before it connects to the bus socket in here.
    fs.chmodSync(this.dir, 0o755);
  }

  get busAddress(): string {
    return `unix:path=${join(this.dir, 'bus.sock')}`;
  }

  env(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
    return { ...process.env, DBUS_SYSTEM_BUS_ADDRESS: this.busAddress, ...extra };
  }

  /** Prefix that runs a command inside the sandbox's network and mount namespaces. */
  wrap(): string[] {
    return ['nsenter', '--target', String(this.innerPid), '--net', '--mount', '--'];
  }

  async start(): Promise<void> {
    fs.writeFileSync(join(this.dir, 'bus.conf'), BUS_CONFIG(join(this.dir, 'bus.sock')));
    fs.writeFileSync(join(this.dir, 'Corefile'), COREFILE);
    fs.writeFileSync(join(this.dir, 'sandbox.sh'), SANDBOX);
    const resolvedBin = RESOLVED_BINARIES.find((p) => fs.existsSync(p))!;
    const u = spawn(
      'unshare',
      [
        '--net',
        '--mount',
        '--pid',
        '--fork',
        '--kill-child',
        'sh',
        join(this.dir, 'sandbox.sh'),
        this.dir,
        process.execPath,
        resolve('bin/clusterdns'),
        resolvedBin,
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    this.unshare = u;
    let out = '';
    u.stdout.on('data', (d: Buffer) => (out += d.toString()));
    u.stderr.on('data', (d: Buffer) => (out += d.toString()));
    await this.poll(
      'the sandbox to start',
      () => out.includes('ready'),
      () => out,
      15_000,
    );
    this.innerPid = Number(fs.readFileSync(`/proc/${u.pid}/task/${u.pid}/children`, 'utf8').trim().split(/\s+/)[0]);
    let last: CmdResult = { code: -1, stdout: '', stderr: '' };
    await this.poll(
      'systemd-resolved on the private bus',
      async () => (last = await this.run('resolvectl', ['dns', LINK])).code === 0,
      () => last.stderr,
      15_000,
    );
    await this.poll(
      'the cluster DNS server in the peer namespace',
      () => this.dnsLog().includes('clusterdns-'),
      () => this.dnsLog(),
      15_000,
    );
  }

  private async poll(
    what: string,
    cond: () => boolean | Promise<boolean>,
    detail: () => string,
    timeoutMs: number,
  ): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      let ok: boolean;
      try {
        ok = await cond();
      } catch {
        ok = false;
      }
      if (ok) return;
      if (this.unshare?.exitCode !== null && this.unshare?.exitCode !== undefined)
        throw new Error(`sandbox exited waiting for ${what}: ${detail()}`);
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${detail()}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** Runs a command inside the sandbox (network and mount namespaces, private bus). */
  run(file: string, args: string[], env: NodeJS.ProcessEnv = {}): Promise<CmdResult> {
    const argv = [...this.wrap(), file, ...args];
    return new Promise((res) => {
      execFile(argv[0]!, argv.slice(1), { env: this.env(env), timeout: 30_000 }, (err, stdout, stderr) => {
        res({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr });
      });
    });
  }

  /** `resolvectl dns|domain|default-route kdns0` as words. */
  async link(verb: 'dns' | 'domain' | 'default-route'): Promise<string[]> {
    const r = await this.run('resolvectl', [verb, LINK]);
    if (r.code !== 0) throw new Error(`resolvectl ${verb} ${LINK}: ${r.stderr}`);
    const line = r.stdout.split('\n').find((l) => l.startsWith('Link ')) ?? '';
    return line
      .slice(line.indexOf('):') + 2)
      .trim()
      .split(/\s+/)
      .filter((s) => s !== '');
  }

  dnsLog(): string {
    try {
      return fs.readFileSync(join(this.dir, 'dns.log'), 'utf8');
    } catch {
      return '';
    }
  }

  async stop(): Promise<void> {
    const u = this.unshare;
    if (!u || u.exitCode !== null) return;
    // unshare ignores SIGTERM while it waits; SIGKILL ends it, --kill-child its child, and the
    // PID namespace's init going away ends everything inside.
    const exited = new Promise<void>((r) => u.on('exit', () => r()));
    u.kill('SIGKILL');
    await exited;
  }
}
