// Shows from the upstream's side that a client socket is gone: a datagram sent from a
// connected socket to a closed port comes back as ICMP port unreachable, which Node reports
// as ECONNREFUSED on that socket.

import dgram from 'node:dgram';

/** True when nothing listens on UDP address:port any more. */
export function udpPortClosed(address: string, port: number, waitMs = 300): Promise<boolean> {
  return new Promise((resolve) => {
    const s = dgram.createSocket(address.includes(':') ? 'udp6' : 'udp4');
    let done = false;
    const finish = (closed: boolean) => {
      if (done) return;
      done = true;
      clearTimeout(t);
      try {
        s.close();
      } catch {
        // Already closed.
      }
      resolve(closed);
    };
    const t = setTimeout(() => finish(false), waitMs);
    s.on('error', (e: NodeJS.ErrnoException) => finish(e.code === 'ECONNREFUSED'));
    s.connect(port, address, () => {
      // Sent twice: the refusal of the first may only be reported with the second.
      s.send(Buffer.alloc(12), () => setTimeout(() => !done && s.send(Buffer.alloc(12), () => {}), 50));
    });
  });
}
