// An upstream that answers every A query with one address after a delay, so a query is still
// inside `forward` when the test does something to the server (a shutdown, a reload).
import dgram from 'node:dgram';
import * as dnsPacket from 'dns-packet';

export interface SlowUpstream {
  port: number;
  close(): void;
}

export async function slowUpstream(address: string, delayMs: number): Promise<SlowUpstream> {
  const upstream = dgram.createSocket('udp4');
  await new Promise<void>((r) => upstream.bind(0, '127.0.0.1', () => r()));
  upstream.on('message', (msg, rinfo) => {
    const q = dnsPacket.decode(msg);
    const reply = dnsPacket.encode({
      id: q.id,
      type: 'response',
      flags: dnsPacket.RECURSION_DESIRED | dnsPacket.RECURSION_AVAILABLE,
      questions: q.questions,
      answers: [{ name: q.questions![0]!.name, type: 'A', class: 'IN', ttl: 30, data: address }],
    });
    setTimeout(() => upstream.send(reply, rinfo.port, rinfo.address), delayMs);
  });
  return { port: upstream.address().port, close: () => upstream.close() };
}
