// Operating-system errors in the words a user can act on, with the address or file they concern
// (Node's own text says "null:8181" inside a cluster worker and "ENOENT" to everyone).

import { readFileSync } from 'node:fs';

const TEXT: Record<string, string> = {
  ENOENT: 'no such file or directory',
  EACCES: 'permission denied',
  EPERM: 'operation not permitted',
  EISDIR: 'is a directory',
  ENOTDIR: 'not a directory',
  EADDRINUSE: 'address already in use',
  EADDRNOTAVAIL: 'cannot assign requested address (no interface has it)',
};

/** "no such file or directory" for an ENOENT error; the error's own message otherwise. */
export function systemErrorText(e: unknown): string {
  const code = (e as NodeJS.ErrnoException | null)?.code;
  return (code !== undefined && TEXT[code]) || (e as Error).message;
}

/** Go's wording of common socket errors, so log lines read like CoreDNS's. */
export function goErrorText(e: NodeJS.ErrnoException): string {
  switch (e.code) {
    case 'ECONNREFUSED':
      return 'connection refused';
    case 'ECONNRESET':
      return 'connection reset by peer';
    case 'EPIPE':
      return 'broken pipe';
    case 'EHOSTUNREACH':
      return 'no route to host';
    case 'ENETUNREACH':
      return 'network is unreachable';
    default:
      return e.message;
  }
}

/** "HOST:PORT" as a user types it: [::]:8181, 0.0.0.0:53, 127.0.0.1:53. */
export function formatHostPort(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

function unprivilegedPortStart(): number {
  try {
    return Number(readFileSync('/proc/sys/net/ipv4/ip_unprivileged_port_start', 'utf8').trim());
  } catch {
    return 1024;
  }
}

/**
 * Why a socket could not listen on `what` (e.g. "udp 0.0.0.0:53"), with what to do about a
 * privileged port: CoreDNS's image grants CAP_NET_BIND_SERVICE for the same reason.
 */
export function listenErrorMessage(what: string, port: number, e: unknown): string {
  const code = (e as NodeJS.ErrnoException | null)?.code;
  let msg = `cannot listen on ${what}: ${systemErrorText(e)}`;
  if ((code === 'EACCES' || code === 'EPERM') && port > 0 && port < unprivilegedPortStart()) {
    msg +=
      `; ports below ${unprivilegedPortStart()} need root or the CAP_NET_BIND_SERVICE capability ` +
      `(e.g. setcap cap_net_bind_service=+ep "$(command -v node)", or securityContext.capabilities.add: [NET_BIND_SERVICE]), ` +
      `or lower sysctl net.ipv4.ip_unprivileged_port_start to ${port}`;
  }
  return msg;
}

/** An error whose message is already fit for the user (start-up prints it once, as it is). */
export class ListenError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ListenError';
  }
}
