import { test } from 'node:test';
import assert from 'node:assert/strict';

import {
  cidrToReverseZones,
  formatIPv6,
  ipToReverseName,
  isReverseZone,
  parseIPv4,
  parseIPv6,
  reverseNameToIp,
} from '../../src/dns/reverse.js';

function urlCanonical(ip: string): string {
  return new URL(`http://[${ip}]/`).hostname.slice(1, -1);
}

test('ipToReverseName: IPv4', () => {
  assert.equal(ipToReverseName('1.2.3.4'), '4.3.2.1.in-addr.arpa.');
  assert.equal(ipToReverseName('10.0.0.1'), '1.0.0.10.in-addr.arpa.');
  assert.equal(ipToReverseName('255.255.255.255'), '255.255.255.255.in-addr.arpa.');
});

test('ipToReverseName: IPv6 gives 32 nibbles under ip6.arpa.', () => {
  assert.equal(
    ipToReverseName('2001:db8::567:89ab'),
    'b.a.9.8.7.6.5.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa.',
  );
  assert.equal(ipToReverseName('::1'), `1.${'0.'.repeat(31)}ip6.arpa.`);
  assert.equal(ipToReverseName('::'), `${'0.'.repeat(32)}ip6.arpa.`);
  assert.equal(ipToReverseName('::ffff:1.2.3.4'), `4.0.3.0.2.0.1.0.f.f.f.f.${'0.'.repeat(20)}ip6.arpa.`);
  assert.equal(ipToReverseName('FD00::ABCD'), ipToReverseName('fd00::abcd'));
});

test('ipToReverseName throws on invalid input', () => {
  for (const bad of [
    '',
    '1.2.3',
    '1.2.3.256',
    '01.2.3.4',
    '1.2.3.4.5',
    'a.b.c.d',
    '1::2::3',
    '12345::',
    'fe80::1%eth0',
    'g::1',
    '1:2:3:4:5:6:7:8:9',
    '1:2:3:4:5:6:7::8',
  ]) {
    assert.throws(() => ipToReverseName(bad), /invalid IP address/, bad);
  }
});

test('reverseNameToIp: IPv4 and IPv6 round trips', () => {
  assert.equal(reverseNameToIp('4.3.2.1.in-addr.arpa.'), '1.2.3.4');
  assert.equal(reverseNameToIp('4.3.2.1.IN-ADDR.ARPA'), '1.2.3.4');
  const samples = [
    '1234:abcd::1',
    '::1',
    '::',
    '2001:db8::567:89ab',
    'fd00:1:2:3:4:5:6:7',
    '1:0:0:1::1',
    '1::1:1:0:0:1',
    '1:0:1:1:1:1:1:1',
    '0:1::',
    '::ffff:102:304',
    'fe80::',
  ];
  for (const ip of samples) {
    const back = reverseNameToIp(ipToReverseName(ip));
    assert.equal(back, ip, ip);
    assert.equal(back, urlCanonical(ip), `URL canonical form of ${ip}`);
  }
  // Non-canonical inputs come back canonical (as WHATWG URL formats them).
  for (const ip of [
    '1234:ABCD:0:0:0:0:0:0001',
    '2001:0db8:0000:0000:0000:ff00:0042:8329',
    '0:0:0:0:0:ffff:1.2.3.4',
    '1:0:0:0:1:0:0:0',
  ]) {
    assert.equal(reverseNameToIp(ipToReverseName(ip)), urlCanonical(ip), ip);
  }
  assert.equal(reverseNameToIp(ipToReverseName('1234:ABCD:0:0:0:0:0:0001')), '1234:abcd::1');
});

test('reverseNameToIp: null for anything that is not a full reverse name', () => {
  for (const n of [
    '3.2.1.in-addr.arpa.',
    '5.4.3.2.1.in-addr.arpa.',
    'in-addr.arpa.',
    'x.3.2.1.in-addr.arpa.',
    '256.3.2.1.in-addr.arpa.',
    '04.3.2.1.in-addr.arpa.',
    'example.org.',
    '1.0.ip6.arpa.',
    `${'0.'.repeat(31)}ip6.arpa.`,
    `g.${'0.'.repeat(31)}ip6.arpa.`,
    `10.${'0.'.repeat(31)}ip6.arpa.`,
    `${'0.'.repeat(33)}ip6.arpa.`,
    '',
  ]) {
    assert.equal(reverseNameToIp(n), null, n);
  }
});

test('isReverseZone', () => {
  assert.equal(isReverseZone('in-addr.arpa.'), true);
  assert.equal(isReverseZone('in-addr.arpa'), true);
  assert.equal(isReverseZone('0.0.10.in-addr.arpa.'), true);
  assert.equal(isReverseZone('IP6.ARPA.'), true);
  assert.equal(isReverseZone('d.f.ip6.arpa'), true);
  assert.equal(isReverseZone('arpa.'), false);
  assert.equal(isReverseZone('xin-addr.arpa.'), false);
  assert.equal(isReverseZone('cluster.local.'), false);
  assert.equal(isReverseZone('.'), false);
});

test('cidrToReverseZones: IPv4 on octet boundaries', () => {
  assert.deepEqual(cidrToReverseZones('10.0.0.0/24'), ['0.0.10.in-addr.arpa.']);
  assert.deepEqual(cidrToReverseZones('10.0.0.0/8'), ['10.in-addr.arpa.']);
  assert.deepEqual(cidrToReverseZones('172.16.0.0/16'), ['16.172.in-addr.arpa.']);
  assert.deepEqual(cidrToReverseZones('1.2.3.4/32'), ['4.3.2.1.in-addr.arpa.']);
  assert.deepEqual(cidrToReverseZones('0.0.0.0/0'), ['in-addr.arpa.']);
  // Host bits are masked.
  assert.deepEqual(cidrToReverseZones('10.1.2.3/24'), ['2.1.10.in-addr.arpa.']);
});

test('cidrToReverseZones: IPv4 not on an octet boundary splits', () => {
  const z17 = cidrToReverseZones('10.0.0.0/17');
  assert.equal(z17.length, 128);
  assert.equal(z17[0], '0.0.10.in-addr.arpa.');
  assert.equal(z17[1], '1.0.10.in-addr.arpa.');
  assert.equal(z17[127], '127.0.10.in-addr.arpa.');
  assert.deepEqual(cidrToReverseZones('10.0.128.0/17').slice(0, 2), [
    '128.0.10.in-addr.arpa.',
    '129.0.10.in-addr.arpa.',
  ]);
  assert.deepEqual(cidrToReverseZones('192.168.0.0/23'), ['0.168.192.in-addr.arpa.', '1.168.192.in-addr.arpa.']);
  assert.deepEqual(cidrToReverseZones('10.0.0.0/30'), [
    '0.0.0.10.in-addr.arpa.',
    '1.0.0.10.in-addr.arpa.',
    '2.0.0.10.in-addr.arpa.',
    '3.0.0.10.in-addr.arpa.',
  ]);
  assert.deepEqual(cidrToReverseZones('128.0.0.0/1').length, 128);
});

test('cidrToReverseZones: IPv6 on nibble boundaries', () => {
  assert.deepEqual(cidrToReverseZones('fd00::/64'), ['0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa.']);
  assert.deepEqual(cidrToReverseZones('2001:db8::/32'), ['8.b.d.0.1.0.0.2.ip6.arpa.']);
  assert.deepEqual(cidrToReverseZones('::/0'), ['ip6.arpa.']);
  assert.deepEqual(cidrToReverseZones('fd00::/7'), ['c.f.ip6.arpa.', 'd.f.ip6.arpa.']);
  assert.deepEqual(cidrToReverseZones('2001:db8::/33'), [
    '0.8.b.d.0.1.0.0.2.ip6.arpa.',
    '1.8.b.d.0.1.0.0.2.ip6.arpa.',
    '2.8.b.d.0.1.0.0.2.ip6.arpa.',
    '3.8.b.d.0.1.0.0.2.ip6.arpa.',
    '4.8.b.d.0.1.0.0.2.ip6.arpa.',
    '5.8.b.d.0.1.0.0.2.ip6.arpa.',
    '6.8.b.d.0.1.0.0.2.ip6.arpa.',
    '7.8.b.d.0.1.0.0.2.ip6.arpa.',
  ]);
  assert.equal(cidrToReverseZones('::1/128')[0], ipToReverseName('::1'));
});

test('cidrToReverseZones throws on invalid input', () => {
  for (const bad of [
    '10.0.0.0',
    '10.0.0.0/33',
    '10.0.0.0/',
    '10.0.0/24',
    'fd00::/129',
    'x/8',
    '10.0.0.0/-1',
    '10.0.0.0/08',
    'fd00::/64/1',
  ]) {
    assert.throws(() => cidrToReverseZones(bad), /invalid CIDR/, bad);
  }
});

test('parse/format helpers', () => {
  assert.deepEqual(Array.from(parseIPv4('192.168.1.2') ?? []), [192, 168, 1, 2]);
  assert.equal(parseIPv4('1.2.3.4 '), null);
  const b = parseIPv6('1:2:3:4:5:6:7:8');
  assert.ok(b);
  assert.equal(formatIPv6(b), '1:2:3:4:5:6:7:8');
  assert.equal(parseIPv6('1:2:3:4:5:6:1.2.3.4') !== null, true);
  assert.equal(parseIPv6('1.2.3.4::'), null);
  assert.equal(parseIPv6(':1'), null);
  assert.equal(parseIPv6('1:'), null);
});
