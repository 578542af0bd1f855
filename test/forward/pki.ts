// A throw-away certificate authority made with the openssl CLI at test time: a CA, a server
// certificate for `dns.test` and 127.0.0.1, and a client certificate.

import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface TestPki {
  dir: string;
  caCert: string;
  serverCert: string;
  serverKey: string;
  clientCert: string;
  clientKey: string;
  /** A second CA that signed nothing here: verifying against it must fail. */
  otherCaCert: string;
  read(path: string): Buffer;
}

function openssl(dir: string, args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
}

const EC = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

function makeCa(dir: string, name: string): void {
  openssl(dir, [
    'req',
    '-x509',
    ...EC,
    '-keyout',
    `${name}.key`,
    '-out',
    `${name}.pem`,
    '-days',
    '2',
    '-subj',
    `/CN=clusterdns ${name}`,
  ]);
}

function makeLeaf(dir: string, name: string, ext: string): void {
  openssl(dir, ['req', ...EC, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${name}`]);
  writeFileSync(join(dir, `${name}.ext`), ext);
  openssl(dir, [
    'x509',
    '-req',
    '-in',
    `${name}.csr`,
    '-CA',
    'ca.pem',
    '-CAkey',
    'ca.key',
    '-CAcreateserial',
    '-out',
    `${name}.pem`,
    '-days',
    '2',
    '-extfile',
    `${name}.ext`,
  ]);
}

export function opensslAvailable(): boolean {
  try {
    execFileSync('openssl', ['version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

export function makePki(): TestPki {
  const dir = mkdtempSync(join(tmpdir(), 'clusterdns-pki-'));
  makeCa(dir, 'ca');
  makeCa(dir, 'other-ca');
  makeLeaf(dir, 'server', 'subjectAltName=DNS:dns.test,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n');
  makeLeaf(dir, 'client', 'extendedKeyUsage=clientAuth\n');
  return {
    dir,
    caCert: join(dir, 'ca.pem'),
    serverCert: join(dir, 'server.pem'),
    serverKey: join(dir, 'server.key'),
    clientCert: join(dir, 'client.pem'),
    clientKey: join(dir, 'client.key'),
    otherCaCert: join(dir, 'other-ca.pem'),
    read: (p) => readFileSync(p),
  };
}
