// The metadata plugin through the real binary: the kubernetes plugin's labels, read by log's
// {/LABEL} placeholders, template's .Meta and rewrite's edns0 variables; and nothing of it in a
// server block without `metadata`.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import dgram from 'node:dgram';
import { startServer, type RunningServer } from '../helpers/server.js';
import { dig } from '../helpers/dns.js';
import { decodeMessage, emptyMessage, encodeMessage, type Message } from '../../src/dns/message.js';

const CLUSTER = `
apiVersion: v1
kind: List
items:
  - { apiVersion: v1, kind: Namespace, metadata: { name: shop } }
  - apiVersion: v1
    kind: Service
    metadata: { name: cart, namespace: shop }
    spec: { clusterIP: 10.96.7.7, ports: [{ name: http, port: 80, protocol: TCP }] }
  - apiVersion: v1
    kind: Pod
    metadata: { name: client-1, namespace: shop }
    status: { phase: Running, podIP: 127.0.0.1 }
`;

const LABELS = [
  'client-namespace',
  'client-pod-name',
  'namespace',
  'service',
  'kind',
  'port-name',
  'protocol',
  'endpoint',
];

describe('metadata', () => {
  let s: RunningServer;
  let last: Message | null = null;
  const up = dgram.createSocket('udp4');

  before(async () => {
    up.on('message', (msg, r) => {
      const q = decodeMessage(msg);
      last = q;
      const a = emptyMessage(q.id);
      a.qr = true;
      a.questions = q.questions;
      up.send(encodeMessage(a), r.port, r.address);
    });
    await new Promise<void>((r) => up.bind(0, '127.0.0.1', () => r()));
    const fmt = LABELS.map((l) => `${l}={/kubernetes/${l}}`).join(' ');
    s = await startServer({
      corefile: `
cluster.local:PORT {
    bind 127.0.0.1
    metadata
    log . "META ${fmt}"
    kubernetes cluster.local {
        manifests cluster.yaml
        pods verified
    }
}
meta.test:PORT {
    bind 127.0.0.1
    metadata
    kubernetes cluster.local {
        manifests cluster.yaml
        pods verified
    }
    template IN TXT meta.test {
        answer "{{ .Name }} 5 IN TXT \\"ns={{ .Meta \\"kubernetes/client-namespace\\" }} pod={{ .Meta \\"kubernetes/client-pod-name\\" }}\\""
    }
    rewrite edns0 local set 0xffee {kubernetes/client-namespace}
    forward . 127.0.0.1:${up.address().port}
}
plain.test:PORT {
    bind 127.0.0.1
    log . "PLAIN {/kubernetes/client-namespace}"
    kubernetes cluster.local {
        manifests cluster.yaml
        pods verified
    }
    template IN TXT plain.test {
        answer "{{ .Name }} 5 IN TXT \\"ns=[{{ .Meta \\"kubernetes/client-namespace\\" }}]\\""
    }
}
`,
      files: { 'cluster.yaml': CLUSTER },
    });
  });

  after(async () => {
    await s?.stop();
    up.close();
  });

  test("log's {/kubernetes/...} placeholders show the client's pod and the parts of the name asked", async () => {
    const r = await dig(s.port, ['_http._tcp.cart.shop.svc.cluster.local', 'SRV']);
    assert.equal(r.status, 'NOERROR');
    await s.waitFor(
      /META client-namespace=shop client-pod-name=client-1 namespace=shop service=cart kind=svc port-name=http protocol=tcp endpoint=(\n|$)/,
    );
  });

  test("template's .Meta reads the same labels", async () => {
    const r = await dig(s.port, ['x.meta.test', 'TXT']);
    assert.deepEqual(r.answer, ['x.meta.test. 5 IN TXT "ns=shop pod=client-1"']);
  });

  test("rewrite's edns0 local data can be a metadata label", async () => {
    await dig(s.port, ['y.meta.test', 'A']);
    const opt = last?.edns?.options.find((o) => o.code === 0xffee);
    assert.equal(opt?.data.toString(), 'shop');
  });

  test('without `metadata` in the block there are no labels: log prints "-", .Meta is empty', async () => {
    const r = await dig(s.port, ['x.plain.test', 'TXT']);
    assert.deepEqual(r.answer, ['x.plain.test. 5 IN TXT "ns=[]"']);
    await s.waitFor(/PLAIN -/);
  });
});
