// DNS over TLS upstreams with a CA made by the openssl CLI at test time.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { QType, Rcode } from '../../src/dns/constants.js';
import { forwardChain } from './harness.js';
import { makePki, opensslAvailable, type TestPki } from './pki.js';
import { answerAll, FakeUpstream } from './upstreams.js';

const skip = opensslAvailable() ? false : 'the openssl CLI is not installed';

describe('forward to tls:// upstreams', { skip }, () => {
  let pki: TestPki;
  let up: FakeUpstream;
  let mutual: FakeUpstream;
  before(async () => {
    pki = makePki();
    up = await FakeUpstream.start({
      tls: { cert: pki.read(pki.serverCert), key: pki.read(pki.serverKey) },
      behaviour: answerAll,
    });
    mutual = await FakeUpstream.start({
      tls: {
        cert: pki.read(pki.serverCert),
        key: pki.read(pki.serverKey),
        ca: pki.read(pki.caCert),
        requestCert: true,
        rejectUnauthorized: true,
      },
      behaviour: answerAll,
    });
  });
  after(async () => {
    await up?.close();
    await mutual?.close();
  });

  it('verifies the server against `tls CA` and `tls_servername`, and reuses the connection', async () => {
    up.reset();
    up.accepted = 0;
    const h = forwardChain(`forward . tls://127.0.0.1:${up.port} {\n tls ${pki.caCert}\n tls_servername dns.test\n}`);
    try {
      for (const proto of [false, true, false]) {
        const r = await h.ask('www.example.org.', QType.A, { tcp: proto });
        assert.equal(r.msg.rcode, Rcode.NOERROR);
        assert.equal(r.msg.answers.length, 1);
      }
      assert.deepEqual(
        up.queries.map((q) => q.proto),
        ['tls', 'tls', 'tls'],
      );
      assert.equal(up.accepted, 1);
    } finally {
      h.stop();
    }
  });

  it('takes the server name from tls://IP%NAME:PORT, and checks the IP address without one', async () => {
    const named = forwardChain(`forward . tls://127.0.0.1%dns.test:${up.port} {\n tls ${pki.caCert}\n}`);
    const byIp = forwardChain(`forward . tls://127.0.0.1:${up.port} {\n tls ${pki.caCert}\n}`);
    try {
      assert.equal((await named.ask('a.example.org.', QType.A)).msg.rcode, Rcode.NOERROR);
      assert.equal((await byIp.ask('b.example.org.', QType.A)).msg.rcode, Rcode.NOERROR);
    } finally {
      named.stop();
      byIp.stop();
    }
  });

  it('refuses a server whose certificate does not verify (wrong CA, wrong name): SERVFAIL with a tls error', async () => {
    const wrongCa = forwardChain(
      `forward . tls://127.0.0.1:${up.port} {\n tls ${pki.otherCaCert}\n tls_servername dns.test\n max_connect_attempts 1\n}`,
    );
    const wrongName = forwardChain(
      `forward . tls://127.0.0.1:${up.port} {\n tls ${pki.caCert}\n tls_servername other.test\n max_connect_attempts 1\n}`,
    );
    try {
      up.reset();
      const a = await wrongCa.ask('x.example.org.', QType.A);
      assert.equal(a.msg.rcode, Rcode.SERVFAIL);
      assert.match(a.res.error ?? '', /^dial tcp 127\.0\.0\.1:\d+: tls: /);
      const b = await wrongName.ask('y.example.org.', QType.A);
      assert.equal(b.msg.rcode, Rcode.SERVFAIL);
      assert.match(b.res.error ?? '', /tls: .*(altnames|does not match)/i);
      assert.equal(up.queries.length, 0, 'no query was sent over an unverified connection');
    } finally {
      wrongCa.stop();
      wrongName.stop();
    }
  });

  it('presents a client certificate with `tls CERT KEY CA`', async () => {
    const withCert = forwardChain(
      `forward . tls://127.0.0.1:${mutual.port} {\n tls ${pki.clientCert} ${pki.clientKey} ${pki.caCert}\n tls_servername dns.test\n}`,
    );
    const without = forwardChain(
      `forward . tls://127.0.0.1:${mutual.port} {\n tls ${pki.caCert}\n tls_servername dns.test\n max_connect_attempts 1\n read_timeout 500ms\n}`,
    );
    try {
      assert.equal((await withCert.ask('m.example.org.', QType.A)).msg.rcode, Rcode.NOERROR);
      assert.equal((await without.ask('n.example.org.', QType.A)).msg.rcode, Rcode.SERVFAIL);
    } finally {
      withCert.stop();
      without.stop();
    }
  });
});
