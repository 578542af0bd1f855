// Free loopback ports for tests (UDP and TCP both free on the same number).
import dgram from 'node:dgram';
import net from 'node:net';

async function tryPort(port: number, host: string): Promise<number | null> {
  const udp = dgram.createSocket('udp4');
  const ok = await new Promise<number | null>((resolve) => {
    udp.once('error', () => resolve(null));
    udp.bind({ port, address: host, exclusive: true }, () => resolve(udp.address().port));
  });
  if (ok === null) {
    udp.close();
    return null;
  }
  const tcp = net.createServer();
  const tcpOk = await new Promise<boolean>((resolve) => {
    tcp.once('error', () => resolve(false));
    tcp.listen({ port: ok, host, exclusive: true }, () => resolve(true));
  });
  udp.close();
  if (tcpOk) await new Promise<void>((r) => tcp.close(() => r()));
  return tcpOk ? ok : null;
}

/** A port number free for both UDP and TCP on `host`. */
export async function freePort(host = '127.0.0.1'): Promise<number> {
  for (let i = 0; i < 50; i++) {
    // Stay out of the ephemeral range the kernel hands to clients.
    const candidate = 20000 + Math.floor(Math.random() * 12000);
    const p = await tryPort(candidate, host);
    if (p !== null) return p;
  }
  throw new Error('no free port found');
}
