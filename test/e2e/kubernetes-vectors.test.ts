// CoreDNS's kubernetes plugin test vectors (handler_test.go, reverse_test.go), table-driven,
// against the real binary fed by the test API server over list+watch. Every row is one query:
// rcode, answer, additional, and for negative answers the zone SOA in the authority section,
// with AA set and RA clear. Together they cover the NXDOMAIN/NODATA matrix of the README.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { KubeApiServer } from '../helpers/kubeapi.js';
import { startServer, type RunningServer } from '../helpers/server.js';
import { query } from '../helpers/dns.js';
import { freePort } from '../helpers/ports.js';
import { type Rcode, rcodeToString, typeFromString } from '../../src/dns/constants.js';
import { externalService, namespace, pod, sectionText, service, slice, soaText } from '../kubernetes/fixtures.js';

interface Vector {
  id: string;
  /** Which server block answers: the options of each are in the Corefile below. */
  block?: 'main' | 'disabled' | 'insecure' | 'verified' | 'ignore' | 'reverse';
  name: string;
  type: string;
  rcode: keyof typeof Rcode;
  /** Expected answer (sorted); absent = empty answer, and then the authority must be the SOA. */
  answer?: string[];
  extra?: string[];
  /** Zone of the SOA in the authority section, as spelled in the answer. */
  soa?: string;
  tcp?: boolean;
}

const Z = 'cluster.local.';
const soaRow = (zone = Z) => soaText(zone);

/** F1, from CoreDNS's plugin/kubernetes/handler_test.go and its siblings. */
const F1: Vector[] = [
  {
    id: 'A1',
    name: `svc1.testns.svc.${Z}`,
    type: 'A',
    rcode: 'NOERROR',
    answer: [`svc1.testns.svc.${Z} 5 A 10.0.0.1`],
  },
  {
    id: 'A2',
    name: `svcempty.testns.svc.${Z}`,
    type: 'A',
    rcode: 'NOERROR',
    answer: [`svcempty.testns.svc.${Z} 5 A 10.0.0.1`],
  },
  { id: 'A3', name: `svc1.testns.svc.${Z}`, type: 'AAAA', rcode: 'NOERROR' },
  { id: 'A4', name: `svc0.testns.svc.${Z}`, type: 'A', rcode: 'NXDOMAIN' },
  { id: 'A4b', name: `svc0.testns.svc.${Z}`, type: 'AAAA', rcode: 'NXDOMAIN' },
  { id: 'A5', name: `svc0.svc-nons.svc.${Z}`, type: 'A', rcode: 'NXDOMAIN' },
  { id: 'A6', name: `svc1.unexposedns.svc.${Z}`, type: 'A', rcode: 'NXDOMAIN' },
  {
    id: 'A7',
    name: `svc6.testns.svc.${Z}`,
    type: 'AAAA',
    rcode: 'NOERROR',
    answer: [`svc6.testns.svc.${Z} 5 AAAA 1234:abcd::1`],
  },
  { id: 'A8', name: `svc6.testns.svc.${Z}`, type: 'A', rcode: 'NOERROR' },
  {
    id: 'A9',
    name: `svc-dual-stack.testns.svc.${Z}`,
    type: 'A',
    rcode: 'NOERROR',
    answer: [`svc-dual-stack.testns.svc.${Z} 5 A 10.0.0.3`],
  },
  {
    id: 'A10',
    name: `svc-dual-stack.testns.svc.${Z}`,
    type: 'AAAA',
    rcode: 'NOERROR',
    answer: [`svc-dual-stack.testns.svc.${Z} 5 AAAA 10::3`],
  },
  {
    id: 'A11',
    name: `ep1a.svc1.testns.svc.${Z}`,
    type: 'A',
    rcode: 'NOERROR',
    answer: [`ep1a.svc1.testns.svc.${Z} 5 A 172.0.0.1`],
  },
  { id: 'A12', name: `172-0-0-1.svc1.testns.svc.${Z}`, type: 'A', rcode: 'NXDOMAIN' },
  { id: 'A13', name: `*.testns.svc.${Z}`, type: 'A', rcode: 'NXDOMAIN' },
  { id: 'A14', name: `a.b.c.svc1.testns.svc.${Z}`, type: 'A', rcode: 'NXDOMAIN' },
  {
    id: 'B1',
    name: `svc1.testns.svc.${Z}`,
    type: 'SRV',
    rcode: 'NOERROR',
    answer: [`svc1.testns.svc.${Z} 5 SRV 0 100 80 svc1.testns.svc.${Z}`],
    extra: [`svc1.testns.svc.${Z} 5 A 10.0.0.1`],
  },
  {
    id: 'B2',
    name: `_http._tcp.svc1.testns.svc.${Z}`,
    type: 'SRV',
    rcode: 'NOERROR',
    answer: [`_http._tcp.svc1.testns.svc.${Z} 5 SRV 0 100 80 svc1.testns.svc.${Z}`],
    extra: [`svc1.testns.svc.${Z} 5 A 10.0.0.1`],
  },
  {
    id: 'B3',
    name: `_http._tcp.svcempty.testns.svc.${Z}`,
    type: 'SRV',
    rcode: 'NOERROR',
    answer: [`_http._tcp.svcempty.testns.svc.${Z} 5 SRV 0 100 80 svcempty.testns.svc.${Z}`],
    extra: [`svcempty.testns.svc.${Z} 5 A 10.0.0.1`],
  },
  { id: 'B4', name: `_https._tcp.svc1.testns.svc.${Z}`, type: 'SRV', rcode: 'NXDOMAIN' },
  { id: 'B4b', name: `_http._udp.svc1.testns.svc.${Z}`, type: 'SRV', rcode: 'NXDOMAIN' },
  {
    id: 'B5',
    name: `_http._tcp.svc6.testns.svc.${Z}`,
    type: 'SRV',
    rcode: 'NOERROR',
    answer: [`_http._tcp.svc6.testns.svc.${Z} 5 SRV 0 100 80 svc6.testns.svc.${Z}`],
    extra: [`svc6.testns.svc.${Z} 5 AAAA 1234:abcd::1`],
  },
  {
    id: 'B6',
    name: `svc-dual-stack.testns.svc.${Z}`,
    type: 'SRV',
    rcode: 'NOERROR',
    answer: [`svc-dual-stack.testns.svc.${Z} 5 SRV 0 50 80 svc-dual-stack.testns.svc.${Z}`],
    extra: [`svc-dual-stack.testns.svc.${Z} 5 A 10.0.0.3`, `svc-dual-stack.testns.svc.${Z} 5 AAAA 10::3`],
  },
  {
    id: 'B7',
    name: `_http._tcp.svc1.testns.svc.${Z}`,
    type: 'A',
    rcode: 'NOERROR',
    answer: [`_http._tcp.svc1.testns.svc.${Z} 5 A 10.0.0.1`],
  },
  {
    id: 'C1',
    name: `hdls1.testns.svc.${Z}`,
    type: 'A',
    rcode: 'NOERROR',
    answer: ['172.0.0.2', '172.0.0.3', '172.0.0.4', '172.0.0.5'].map((ip) => `hdls1.testns.svc.${Z} 5 A ${ip}`),
  },
  {
    id: 'C2',
    name: `hdls1.testns.svc.${Z}`,
    type: 'AAAA',
    rcode: 'NOERROR',
    answer: ['5678:abcd::1', '5678:abcd::2'].map((ip) => `hdls1.testns.svc.${Z} 5 AAAA ${ip}`),
  },
  {
    id: 'C3',
    name: `_http._tcp.hdls1.testns.svc.${Z}`,
    type: 'SRV',
    rcode: 'NOERROR',
    answer: ['172-0-0-2', '172-0-0-3', '5678-abcd--1', '5678-abcd--2', 'dup-name'].map(
      (h) => `_http._tcp.hdls1.testns.svc.${Z} 5 SRV 0 16 80 ${h}.hdls1.testns.svc.${Z}`,
    ),
    extra: [
      `172-0-0-2.hdls1.testns.svc.${Z} 5 A 172.0.0.2`,
      `172-0-0-3.hdls1.testns.svc.${Z} 5 A 172.0.0.3`,
      `5678-abcd--1.hdls1.testns.svc.${Z} 5 AAAA 5678:abcd::1`,
      `5678-abcd--2.hdls1.testns.svc.${Z} 5 AAAA 5678:abcd::2`,
      `dup-name.hdls1.testns.svc.${Z} 5 A 172.0.0.4`,
      `dup-name.hdls1.testns.svc.${Z} 5 A 172.0.0.5`,
    ],
  },
  {
    id: 'C4',
    name: `172-0-0-2.hdls1.testns.svc.${Z}`,
    type: 'A',
    rcode: 'NOERROR',
    answer: [`172-0-0-2.hdls1.testns.svc.${Z} 5 A 172.0.0.2`],
  },
  {
    id: 'C5',
    name: `dup-name.hdls1.testns.svc.${Z}`,
    type: 'A',
    rcode: 'NOERROR',
    answer: [`dup-name.hdls1.testns.svc.${Z} 5 A 172.0.0.4`, `dup-name.hdls1.testns.svc.${Z} 5 A 172.0.0.5`],
  },
  {
    id: 'C6',
    name: `5678-abcd--1.hdls1.testns.svc.${Z}`,
    type: 'AAAA',
    rcode: 'NOERROR',
    answer: [`5678-abcd--1.hdls1.testns.svc.${Z} 5 AAAA 5678:abcd::1`],
  },
  { id: 'C7', name: `bogusendpoint.hdls1.testns.svc.${Z}`, type: 'A', rcode: 'NXDOMAIN' },
  { id: 'C8', name: `bogusendpoint.svc0.testns.svc.${Z}`, type: 'A', rcode: 'NXDOMAIN' },
  {
    id: 'C9',
    name: `hdlsprtls.testns.svc.${Z}`,
    type: 'A',
    rcode: 'NOERROR',
    answer: [`hdlsprtls.testns.svc.${Z} 5 A 172.0.0.20`],
  },
  {
    id: 'C9b',
    name: `172-0-0-20.hdlsprtls.testns.svc.${Z}`,
    type: 'A',
    rcode: 'NOERROR',
    answer: [`172-0-0-20.hdlsprtls.testns.svc.${Z} 5 A 172.0.0.20`],
  },
  { id: 'C10', name: `hdlsprtls.testns.svc.${Z}`, type: 'SRV', rcode: 'NOERROR' },
  {
    id: 'D1',
    name: `external.testns.svc.${Z}`,
    type: 'CNAME',
    rcode: 'NOERROR',
    answer: [`external.testns.svc.${Z} 5 CNAME ext.interwebs.test.`],
  },
  {
    id: 'D2',
    name: `external.testns.svc.${Z}`,
    type: 'A',
    rcode: 'NOERROR',
    answer: [`external.testns.svc.${Z} 5 CNAME ext.interwebs.test.`, 'ext.interwebs.test. 3600 A 1.2.3.4'],
  },
  {
    id: 'D3',
    name: `external-to-service.testns.svc.${Z}`,
    type: 'A',
    rcode: 'NOERROR',
    answer: [`external-to-service.testns.svc.${Z} 5 CNAME svc1.testns.svc.${Z}`, `svc1.testns.svc.${Z} 5 A 10.0.0.1`],
  },
  { id: 'D4', name: `endpoint.external.testns.svc.${Z}`, type: 'CNAME', rcode: 'NXDOMAIN' },
  { id: 'D4b', name: `subdomain.subdomain.external.testns.svc.${Z}`, type: 'CNAME', rcode: 'NXDOMAIN' },
  { id: 'D5', name: `external.testns.svc.${Z}`, type: 'SRV', rcode: 'NOERROR' },
  { id: 'E1', name: `dns-version.${Z}`, type: 'TXT', rcode: 'NOERROR', answer: [`dns-version.${Z} 28800 TXT "1.1.0"`] },
  { id: 'E2', name: `svc1.testns.svc.${Z}`, type: 'TXT', rcode: 'NOERROR' },
  { id: 'E3', name: `svc0.svc-nons.svc.${Z}`, type: 'TXT', rcode: 'NXDOMAIN' },
  { id: 'E4', name: `dns-version.${Z}`, type: 'A', rcode: 'NXDOMAIN' },
  { id: 'E5', name: Z, type: 'TXT', rcode: 'NXDOMAIN' },
  { id: 'E5b', name: `testns.svc.${Z}`, type: 'TXT', rcode: 'NXDOMAIN' },
  { id: 'F1', name: `svc.${Z}`, type: 'A', rcode: 'NOERROR' },
  { id: 'F1b', name: `pod.${Z}`, type: 'A', rcode: 'NOERROR' },
  { id: 'F1c', name: `testns.svc.${Z}`, type: 'A', rcode: 'NOERROR' },
  { id: 'F2', name: `svc.${Z}`, type: 'NS', rcode: 'NOERROR' },
  { id: 'F2b', name: `testns.svc.${Z}`, type: 'NS', rcode: 'NOERROR' },
  { id: 'F3', name: `foo.${Z}`, type: 'NS', rcode: 'NXDOMAIN' },
  { id: 'F3b', name: `foo.svc.${Z}`, type: 'NS', rcode: 'NXDOMAIN' },
  { id: 'F4', name: `svc1.testns.svc.${Z}`, type: 'SOA', rcode: 'NOERROR' },
  { id: 'F4b', name: `nothing.here.${Z}`, type: 'SOA', rcode: 'NOERROR' },
  { id: 'F5', name: Z, type: 'SOA', rcode: 'NOERROR', answer: [soaRow()] },
  {
    id: 'F6',
    name: Z,
    type: 'NS',
    rcode: 'NOERROR',
    answer: [`${Z} 5 NS ns.dns.${Z}`],
    extra: [`ns.dns.${Z} 5 A 127.0.0.1`],
  },
  { id: 'F6b', name: `ns.dns.${Z}`, type: 'A', rcode: 'NOERROR', answer: [`ns.dns.${Z} 5 A 127.0.0.1`] },
  { id: 'F7', name: Z, type: 'A', rcode: 'NOERROR' },
  { id: 'F7b', name: Z, type: 'AAAA', rcode: 'NOERROR' },
  { id: 'F7c', name: Z, type: 'SRV', rcode: 'NOERROR' },
  { id: 'F7d', name: Z, type: 'HINFO', rcode: 'NOERROR' },
  { id: 'F8', name: `svc1.testns.svc.${Z}`, type: 'AXFR', rcode: 'REFUSED', tcp: true },
  {
    id: 'G1',
    name: 'SvC1.TeStNs.SvC.cLuStEr.LoCaL.',
    type: 'A',
    rcode: 'NOERROR',
    answer: ['SvC1.TeStNs.SvC.cLuStEr.LoCaL. 5 A 10.0.0.1'],
  },
  {
    id: 'G2',
    name: '_HtTp._TcP.sVc1.TeStNs.SvC.cLuStEr.LoCaL.',
    type: 'SRV',
    rcode: 'NOERROR',
    answer: ['_HtTp._TcP.sVc1.TeStNs.SvC.cLuStEr.LoCaL. 5 SRV 0 100 80 svc1.testns.svc.cLuStEr.LoCaL.'],
    extra: ['svc1.testns.svc.cLuStEr.LoCaL. 5 A 10.0.0.1'],
  },
  { id: 'G3', name: 'not-a-service.testns.svc.ClUsTeR.lOcAl.', type: 'A', rcode: 'NXDOMAIN', soa: 'ClUsTeR.lOcAl.' },
  { id: 'H2', block: 'ignore', name: `svcempty.testns.svc.${Z}`, type: 'A', rcode: 'NXDOMAIN' },
  {
    id: 'H2b',
    block: 'ignore',
    name: `svc1.testns.svc.${Z}`,
    type: 'A',
    rcode: 'NOERROR',
    answer: [`svc1.testns.svc.${Z} 5 A 10.0.0.1`],
  },
  {
    id: 'H2c',
    block: 'ignore',
    name: `external.testns.svc.${Z}`,
    type: 'CNAME',
    rcode: 'NOERROR',
    answer: [`external.testns.svc.${Z} 5 CNAME ext.interwebs.test.`],
  },
  { id: 'P1', block: 'disabled', name: `10-240-0-1.podns.pod.${Z}`, type: 'A', rcode: 'NXDOMAIN' },
  { id: 'P1b', block: 'disabled', name: `podns.pod.${Z}`, type: 'A', rcode: 'NXDOMAIN' },
  {
    id: 'P2',
    block: 'insecure',
    name: `10-240-0-1.podns.pod.${Z}`,
    type: 'A',
    rcode: 'NOERROR',
    answer: [`10-240-0-1.podns.pod.${Z} 5 A 10.240.0.1`],
  },
  {
    id: 'P2b',
    block: 'insecure',
    name: `172-0-0-2.podns.pod.${Z}`,
    type: 'A',
    rcode: 'NOERROR',
    answer: [`172-0-0-2.podns.pod.${Z} 5 A 172.0.0.2`],
  },
  { id: 'P2c', block: 'insecure', name: `10-240-0-1.podns.pod.${Z}`, type: 'AAAA', rcode: 'NOERROR' },
  { id: 'P3', block: 'insecure', name: `blah.podns.pod.${Z}`, type: 'A', rcode: 'NXDOMAIN' },
  { id: 'P3b', block: 'insecure', name: `blah.podns.pod.${Z}`, type: 'AAAA', rcode: 'NXDOMAIN' },
  { id: 'P3c', block: 'insecure', name: `blah.podns.pod.${Z}`, type: 'HINFO', rcode: 'NXDOMAIN' },
  { id: 'P4', block: 'insecure', name: `blah.pod-nons.pod.${Z}`, type: 'A', rcode: 'NXDOMAIN' },
  { id: 'P4b', block: 'insecure', name: `podns.pod.${Z}`, type: 'A', rcode: 'NOERROR' },
  { id: 'P4c', block: 'verified', name: `podns.pod.${Z}`, type: 'A', rcode: 'NOERROR' },
  {
    id: 'P5',
    block: 'verified',
    name: `10-240-0-1.podns.pod.${Z}`,
    type: 'A',
    rcode: 'NOERROR',
    answer: [`10-240-0-1.podns.pod.${Z} 5 A 10.240.0.1`],
  },
  { id: 'P5b', block: 'verified', name: `172-0-0-2.podns.pod.${Z}`, type: 'A', rcode: 'NXDOMAIN' },
  { id: 'P5c', block: 'verified', name: `pod-nons.pod.${Z}`, type: 'A', rcode: 'NXDOMAIN' },
];

/** F2, from CoreDNS's plugin/kubernetes/reverse_test.go. */
const F2: Vector[] = [
  {
    id: 'R1',
    block: 'reverse',
    name: '100.0.0.10.in-addr.arpa.',
    type: 'PTR',
    rcode: 'NOERROR',
    answer: [`100.0.0.10.in-addr.arpa. 5 PTR ep1a.svc1.testns.svc.${Z}`],
  },
  {
    id: 'R2',
    block: 'reverse',
    name: '100.1.168.192.in-addr.arpa.',
    type: 'PTR',
    rcode: 'NOERROR',
    answer: [`100.1.168.192.in-addr.arpa. 5 PTR svc1.testns.svc.${Z}`],
  },
  {
    id: 'R3',
    block: 'reverse',
    name: `1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.c.b.a.4.3.2.1.ip6.arpa.`,
    type: 'PTR',
    rcode: 'NOERROR',
    answer: [
      `1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.c.b.a.4.3.2.1.ip6.arpa. 5 PTR ep1b.svc1.testns.svc.${Z}`,
    ],
  },
  {
    id: 'R4',
    block: 'reverse',
    name: '6.a.b.9.2.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.3.0.0.7.7.0.0.0.0.d.f.ip6.arpa.',
    type: 'PTR',
    rcode: 'NOERROR',
    answer: [
      `6.a.b.9.2.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.3.0.0.7.7.0.0.0.0.d.f.ip6.arpa. 5 PTR ip6svc1in.svc1.testns.svc.${Z}`,
    ],
  },
  {
    id: 'R5',
    block: 'reverse',
    name: '99.0.0.10.in-addr.arpa.',
    type: 'PTR',
    rcode: 'NOERROR',
    answer: [
      `99.0.0.10.in-addr.arpa. 5 PTR double-ep.svc1.testns.svc.${Z}`,
      `99.0.0.10.in-addr.arpa. 5 PTR double-ep.svc2.testns.svc.${Z}`,
    ],
  },
  {
    id: 'R6',
    block: 'reverse',
    name: '101.0.0.10.in-addr.arpa.',
    type: 'PTR',
    rcode: 'NXDOMAIN',
    soa: '0.10.in-addr.arpa.',
  },
  { id: 'R7', block: 'reverse', name: `example.org.${Z}`, type: 'PTR', rcode: 'NXDOMAIN' },
  { id: 'R7b', block: 'reverse', name: `100.0.0.10.${Z}`, type: 'PTR', rcode: 'NXDOMAIN' },
  { id: 'R8', block: 'reverse', name: `svc1.testns.svc.${Z}`, type: 'PTR', rcode: 'NOERROR' },
  {
    id: 'R9',
    block: 'reverse',
    name: 'svc1.testns.svc.0.10.in-addr.arpa.',
    type: 'A',
    rcode: 'NXDOMAIN',
    soa: '0.10.in-addr.arpa.',
  },
];

function fixtureF1(api: KubeApiServer): void {
  for (const ns of ['testns', 'kube-system', 'unexposedns', 'podns', 'svc-nons']) api.apply(namespace(ns));
  api.apply(service('kube-system', 'kubedns', ['10.0.0.10'], [['dns', 'UDP', 53]]));
  api.apply(slice('kube-system', 'kubedns-1', 'kubedns', 'IPv4', [{ ip: '172.0.0.100' }], [['dns', 'UDP', 53]]));
  api.apply(service('testns', 'svc1', ['10.0.0.1'], [['http', 'TCP', 80]]));
  api.apply(slice('testns', 'svc1-1', 'svc1', 'IPv4', [{ ip: '172.0.0.1', hostname: 'ep1a' }], [['http', 'TCP', 80]]));
  api.apply(service('testns', 'svcempty', ['10.0.0.1'], [['http', 'TCP', 80]]));
  api.apply(
    slice('testns', 'svcempty-1', 'svcempty', 'IPv4', [{ ip: '172.0.0.99', ready: false }], [['http', 'TCP', 80]]),
  );
  api.apply(service('testns', 'svc6', ['1234:abcd::1'], [['http', 'TCP', 80]]));
  api.apply(service('testns', 'svc-dual-stack', ['10.0.0.3', '10::3'], [['http', 'TCP', 80]]));
  api.apply(service('testns', 'hdls1', 'None'));
  api.apply(
    slice(
      'testns',
      'hdls1-v4',
      'hdls1',
      'IPv4',
      [
        { ip: '172.0.0.2' },
        { ip: '172.0.0.3' },
        { ip: '172.0.0.4', hostname: 'dup-name' },
        { ip: '172.0.0.5', hostname: 'dup-name' },
      ],
      [['http', 'TCP', 80]],
    ),
  );
  api.apply(
    slice(
      'testns',
      'hdls1-v6',
      'hdls1',
      'IPv6',
      [{ ip: '5678:abcd::1' }, { ip: '5678:abcd::2' }],
      [['http', 'TCP', 80]],
    ),
  );
  api.apply(service('testns', 'hdlsprtls', 'None'));
  api.apply(slice('testns', 'hdlsprtls-1', 'hdlsprtls', 'IPv4', [{ ip: '172.0.0.20' }]));
  api.apply(externalService('testns', 'external', 'ext.interwebs.test'));
  api.apply(externalService('testns', 'external-to-service', 'svc1.testns.svc.cluster.local.'));
  api.apply(service('unexposedns', 'svc1', ['10.0.0.2'], [['http', 'TCP', 80]]));
  api.apply(pod('podns', 'foo', '10.240.0.1'));
}

function fixtureF2(api: KubeApiServer): void {
  api.apply(namespace('testns'));
  api.apply(service('testns', 'svc1', ['192.168.1.100'], [['http', 'TCP', 80]]));
  api.apply(service('testns', 'svc2', ['192.168.1.200'], [['http', 'TCP', 80]]));
  api.apply(
    slice(
      'testns',
      'svc1-a',
      'svc1',
      'IPv4',
      [
        { ip: '10.0.0.100', hostname: 'ep1a' },
        { ip: '10.0.0.99', hostname: 'double-ep' },
      ],
      [['http', 'TCP', 80]],
    ),
  );
  api.apply(slice('testns', 'svc1-b', 'svc1', 'IPv4', [{ ip: '10.0.0.100', hostname: 'ep1a' }], [['http', 'TCP', 80]]));
  api.apply(
    slice(
      'testns',
      'svc1-v6',
      'svc1',
      'IPv6',
      [
        { ip: '1234:abcd::1', hostname: 'ep1b' },
        { ip: 'fd00:77:30::a', hostname: 'ip6svc1ex' },
        { ip: 'fd00:77:30::2:9ba6', hostname: 'ip6svc1in' },
      ],
      [['http', 'TCP', 80]],
    ),
  );
  api.apply(
    slice('testns', 'svc2-a', 'svc2', 'IPv4', [{ ip: '10.0.0.99', hostname: 'double-ep' }], [['http', 'TCP', 80]]),
  );
}

describe("kubernetes: CoreDNS's handler and reverse test vectors through the binary and the test API server", () => {
  let api1: KubeApiServer;
  let api2: KubeApiServer;
  let server: RunningServer;
  const ports: Record<NonNullable<Vector['block']>, number> = {
    main: 0,
    disabled: 0,
    insecure: 0,
    verified: 0,
    ignore: 0,
    reverse: 0,
  };

  before(async () => {
    api1 = await KubeApiServer.create();
    api2 = await KubeApiServer.create();
    fixtureF1(api1);
    fixtureF2(api2);
    for (const k of ['disabled', 'insecure', 'verified', 'ignore', 'reverse'] as const) ports[k] = await freePort();
    const k8s = (api: KubeApiServer, zones: string, opts: string) =>
      `kubernetes ${zones} {\n        endpoint ${api.url}\n        ${opts}\n    }`;
    const block = (port: string | number, body: string) => `.:${port} {\n    bind 127.0.0.1\n    ${body}\n}\n`;
    server = await startServer({
      corefile: [
        block(
          'PORT',
          `hosts {\n        1.2.3.4 ext.interwebs.test\n        fallthrough\n    }\n    ${k8s(api1, 'cluster.local', 'namespaces testns')}`,
        ),
        block(ports.disabled, k8s(api1, 'cluster.local', 'pods disabled')),
        block(ports.insecure, k8s(api1, 'cluster.local', 'pods insecure')),
        block(ports.verified, k8s(api1, 'cluster.local', 'pods verified')),
        block(ports.ignore, k8s(api1, 'cluster.local', 'namespaces testns\n        ignore empty_service')),
        block(
          ports.reverse,
          k8s(api2, 'cluster.local 0.10.in-addr.arpa 168.192.in-addr.arpa 1234:abcd::/64 fd00:77:30::/64', 'ttl 5'),
        ),
      ].join(''),
    });
    ports.main = server.port;
  });

  after(async () => {
    await server?.stop();
    await api1?.close();
    await api2?.close();
  });

  for (const v of [...F1, ...F2]) {
    const block = v.block ?? 'main';
    test(`${v.id}: ${v.name} ${v.type} → ${v.rcode}${v.answer ? ` with ${v.answer.length} answer(s)` : v.rcode === 'NOERROR' ? ' (NODATA)' : ''} [${block}]`, async () => {
      const qtype = typeFromString(v.type)!;
      const m = await query(ports[block], v.name, qtype, { tcp: v.tcp, edns: 1232 });
      assert.equal(rcodeToString(m.rcode), v.rcode, `rcode of ${v.name} ${v.type}`);
      if (v.rcode === 'REFUSED') return;
      assert.equal(m.aa, true, 'AA is set');
      assert.equal(m.ra, false, 'RA is clear');
      assert.deepEqual(sectionText(m.answers), (v.answer ?? []).slice().sort(), 'answer section');
      if (v.extra) assert.deepEqual(sectionText(m.additionals), v.extra.slice().sort(), 'additional section');
      if (v.answer === undefined)
        assert.deepEqual(sectionText(m.authorities), [soaRow(v.soa ?? Z)], 'the zone SOA in the authority section');
      else assert.deepEqual(m.authorities, [], 'no authority section in a positive answer');
    });
  }
});
