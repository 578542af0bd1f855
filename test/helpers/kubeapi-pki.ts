// A throwaway PKI for TLS tests, made with the openssl CLI: a CA, a server cert for
// 127.0.0.1/localhost and a client cert, all signed by that CA, in a temp directory.
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface TestPki {
  dir: string;
  caFile: string;
  serverCertFile: string;
  serverKeyFile: string;
  clientCertFile: string;
  clientKeyFile: string;
  ca: Buffer;
  serverCert: Buffer;
  serverKey: Buffer;
  clientCert: Buffer;
  clientKey: Buffer;
  remove(): Promise<void>;
}

const CONFIG = `[req]
distinguished_name = dn
prompt = no
[dn]
CN = clusterdns-test-ca
[ca]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash
[server]
basicConstraints = CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
# clientAuth too: etcd's JSON gateway dials its own gRPC port with the server's certificate.
extendedKeyUsage = serverAuth,clientAuth
subjectAltName = IP:127.0.0.1,DNS:localhost
[client]
basicConstraints = CA:FALSE
keyUsage = critical,digitalSignature,keyEncipherment
extendedKeyUsage = clientAuth
`;

const EC = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

export async function makeTestPki(): Promise<TestPki> {
  const dir = await mkdtemp(join(tmpdir(), 'clusterdns-pki-'));
  const f = (name: string) => join(dir, name);
  await writeFile(f('openssl.cnf'), CONFIG);
  await run('openssl', [
    'req',
    '-x509',
    '-config',
    f('openssl.cnf'),
    '-extensions',
    'ca',
    ...EC,
    '-keyout',
    f('ca.key'),
    '-out',
    f('ca.crt'),
    '-days',
    '2',
  ]);
  for (const [who, cn] of [
    ['server', 'kube-apiserver'],
    ['client', 'clusterdns'],
  ] as const) {
    await run('openssl', [
      'req',
      '-new',
      '-config',
      f('openssl.cnf'),
      ...EC,
      '-subj',
      `/CN=${cn}`,
      '-keyout',
      f(`${who}.key`),
      '-out',
      f(`${who}.csr`),
    ]);
    await run('openssl', [
      'x509',
      '-req',
      '-in',
      f(`${who}.csr`),
      '-CA',
      f('ca.crt'),
      '-CAkey',
      f('ca.key'),
      '-CAcreateserial',
      '-out',
      f(`${who}.crt`),
      '-days',
      '2',
      '-extfile',
      f('openssl.cnf'),
      '-extensions',
      who,
    ]);
  }
  const [ca, serverCert, serverKey, clientCert, clientKey] = await Promise.all([
    readFile(f('ca.crt')),
    readFile(f('server.crt')),
    readFile(f('server.key')),
    readFile(f('client.crt')),
    readFile(f('client.key')),
  ]);
  return {
    dir,
    caFile: f('ca.crt'),
    serverCertFile: f('server.crt'),
    serverKeyFile: f('server.key'),
    clientCertFile: f('client.crt'),
    clientKeyFile: f('client.key'),
    ca,
    serverCert,
    serverKey,
    clientCert,
    clientKey,
    remove: () => rm(dir, { recursive: true, force: true }),
  };
}
