// Stand-ins for `resolvectl` and `ip` that a test puts first on PATH: they answer like the real
// tools, keep systemd-resolved's per-link state in files, and log every argument vector.
// POSIX sh, so a call costs a few milliseconds. Used where a real systemd-resolved cannot be
// started (test/e2e/connect-resolved.test.ts runs the real one in a namespace).
import fs from 'node:fs';
import { join } from 'node:path';

export interface FakeLink {
  index: number;
  dns: string[];
  domains: string[];
  defaultRoute: boolean | null;
}

// Arguments are logged separated by \037 (unit separator), one call per line.
const LOG_ARGS = String.raw`{ sep=''; for a in "$@"; do printf '%s%s' "$sep" "$a"; sep=$(printf '\037'); done; printf '\n'; }`;

const RESOLVECTL = String.raw`#!/bin/sh
d="${'$'}{0%/bin/*}"
${LOG_ARGS} >> "$d/resolvectl.log"
if [ -e "$d/down" ]; then echo 'Failed to get global data: Unit dbus-org.freedesktop.resolve1.service not found.' >&2; exit 1; fi
verb="$1"; link="$2"
if [ "$verb" = flush-caches ]; then exit 0; fi
l="$d/links/$link"
if [ -z "$link" ] || [ ! -d "$l" ]; then echo "Failed to resolve interface \"$link\": No such device" >&2; exit 1; fi
shift 2
show() { printf 'Link %s (%s): %s\n' "$(cat "$l/index")" "$link" "$1"; }
case "$verb" in
  dns|domain) if [ $# -gt 0 ]; then echo "$*" > "$l/$verb"; else show "$(cat "$l/$verb")"; fi ;;
  default-route) if [ $# -gt 0 ]; then echo "$1" > "$l/default-route"; elif [ "$(cat "$l/default-route")" = false ]; then show no; else show yes; fi ;;
  revert) : > "$l/dns"; : > "$l/domain"; : > "$l/default-route" ;;
  *) echo "Unknown command verb $verb." >&2; exit 1 ;;
esac
`;

const IP = String.raw`#!/bin/sh
d="${'$'}{0%/bin/*}"
${LOG_ARGS} >> "$d/ip.log"
if [ "$1" = route ] && [ "$2" = get ] && [ -n "$3" ]; then
  printf '%s dev %s src 10.250.0.1 uid 0 \n    cache \n' "$3" "$(cat "$d/route-dev")"
else
  echo 'fake ip: unsupported' >&2; exit 1
fi
`;

function readWords(path: string): string[] {
  return fs
    .readFileSync(path, 'utf8')
    .trim()
    .split(/\s+/)
    .filter((s) => s !== '');
}

export class FakeResolved {
  readonly bin: string;

  constructor(
    readonly dir: string,
    links: Record<string, number> = { kdns0: 3 },
    routeDev = 'kdns0',
  ) {
    this.bin = join(dir, 'bin');
    fs.mkdirSync(this.bin, { recursive: true });
    fs.writeFileSync(join(this.bin, 'resolvectl'), RESOLVECTL, { mode: 0o755 });
    fs.writeFileSync(join(this.bin, 'ip'), IP, { mode: 0o755 });
    for (const [name, index] of Object.entries(links)) {
      const l = join(dir, 'links', name);
      fs.mkdirSync(l, { recursive: true });
      fs.writeFileSync(join(l, 'index'), `${index}\n`);
      for (const f of ['dns', 'domain', 'default-route']) fs.writeFileSync(join(l, f), '');
    }
    fs.writeFileSync(join(dir, 'route-dev'), routeDev);
  }

  /** Makes every resolvectl call fail as when systemd-resolved is not running. */
  setDown(down: boolean): void {
    if (down) fs.writeFileSync(join(this.dir, 'down'), '');
    else fs.rmSync(join(this.dir, 'down'), { force: true });
  }

  /** Gives a link settings of its own (another manager's). */
  setLink(name: string, dns: string[], domains: string[]): void {
    const l = join(this.dir, 'links', name);
    fs.writeFileSync(join(l, 'dns'), dns.join(' ') + '\n');
    fs.writeFileSync(join(l, 'domain'), domains.join(' ') + '\n');
  }

  link(name = 'kdns0'): FakeLink {
    const l = join(this.dir, 'links', name);
    const dr = fs.readFileSync(join(l, 'default-route'), 'utf8').trim();
    return {
      index: Number(fs.readFileSync(join(l, 'index'), 'utf8')),
      dns: readWords(join(l, 'dns')),
      domains: readWords(join(l, 'domain')),
      defaultRoute: dr === '' ? null : dr === 'true' || dr === 'yes',
    };
  }

  /** Every resolvectl argument vector so far, in order. */
  calls(): string[][] {
    try {
      return fs
        .readFileSync(join(this.dir, 'resolvectl.log'), 'utf8')
        .split('\n')
        .filter((l) => l !== '')
        .map((l) => l.split('\x1f'));
    } catch {
      return [];
    }
  }

  /** Calls that change something (not the reads connect does first). */
  changes(): string[][] {
    return this.calls().filter((c) => c[0] === 'revert' || c.length > 2);
  }

  /** PATH with the fakes first, for a child process's environment. */
  path(): string {
    return `${this.bin}:${process.env['PATH'] ?? ''}`;
  }
}
