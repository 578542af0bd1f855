// The `cache` directive: CoreDNS's syntax, defaults and error messages.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { CorefileError } from '../../src/corefile/errors.js';
import { cacheOptionsFrom } from './harness.js';

function parseError(directive: string): string {
  try {
    cacheOptionsFrom(directive);
  } catch (e) {
    assert.ok(e instanceof CorefileError, `expected a CorefileError, got ${String(e)}`);
    return e.message;
  }
  assert.fail(`"${directive}" was accepted`);
}

describe('cache syntax and defaults', () => {
  test('defaults match CoreDNS: 3600 s success, 1800 s denial, min 5 s, 9984 entries each, SERVFAIL 5 s', () => {
    const o = cacheOptionsFrom('cache');
    assert.deepEqual(o.success, { capacity: 9984, maxTtl: 3600, minTtl: 5 });
    assert.deepEqual(o.denial, { capacity: 9984, maxTtl: 1800, minTtl: 5 });
    assert.equal(o.servfailMs, 5000);
    assert.equal(o.prefetch, null);
    assert.equal(o.staleMs, 0);
    assert.equal(o.keepTtl, false);
    assert.deepEqual(o.zones, ['.']);
  });

  test('max_bytes (ours) bounds the bytes held: 32 MiB by default, bytes or K/M/G, never zero', () => {
    assert.equal(cacheOptionsFrom('cache').maxBytes, 32 * 1024 * 1024);
    assert.equal(cacheOptionsFrom('cache {\n max_bytes 65536\n}').maxBytes, 65536);
    assert.equal(cacheOptionsFrom('cache {\n max_bytes 512K\n}').maxBytes, 512 * 1024);
    assert.equal(cacheOptionsFrom('cache {\n max_bytes 64M\n}').maxBytes, 64 * 1024 * 1024);
    assert.equal(cacheOptionsFrom('cache {\n max_bytes 1g\n}').maxBytes, 1024 * 1024 * 1024);
    assert.match(
      parseError('cache {\n max_bytes 0\n}'),
      /:\d+ - Error during parsing: max_bytes: "0" is not a size above zero/,
    );
    assert.match(
      parseError('cache {\n max_bytes lots\n}'),
      /:\d+ - Error during parsing: max_bytes: "lots" is not a size above zero/,
    );
    assert.match(parseError('cache {\n max_bytes\n}'), /Wrong argument count/);
  });

  test('cache 30 caps both success and denial at 30 s', () => {
    const o = cacheOptionsFrom('cache 30');
    assert.equal(o.success.maxTtl, 30);
    assert.equal(o.denial.maxTtl, 30);
    assert.equal(o.success.minTtl, 5);
  });

  test('zones come from the arguments, else from the server block', () => {
    assert.deepEqual(cacheOptionsFrom('cache 30 Example.ORG example.net.').zones, ['example.org.', 'example.net.']);
    assert.deepEqual(cacheOptionsFrom('cache example.org').zones, ['example.org.']);
    assert.equal(cacheOptionsFrom('cache example.org').success.maxTtl, 3600);
    assert.deepEqual(cacheOptionsFrom('cache', 'cluster.local example.org').zones, ['cluster.local.', 'example.org.']);
  });

  test('success and denial take CAPACITY [TTL [MINTTL]]; capacity is what 256 shards hold', () => {
    const o = cacheOptionsFrom('cache {\n success 5000 300 10\n denial 2500 60 0\n}');
    assert.deepEqual(o.success, { capacity: 4864, maxTtl: 300, minTtl: 10 });
    assert.deepEqual(o.denial, { capacity: 2304, maxTtl: 60, minTtl: 0 });
    // Shards hold at least 4 entries: the smallest cache is 1024.
    assert.equal(cacheOptionsFrom('cache {\n success 10\n}').success.capacity, 1024);
    assert.equal(cacheOptionsFrom('cache {\n success 10\n}').success.maxTtl, 3600);
  });

  test('prefetch AMOUNT [[DURATION] [PERCENTAGE%]] defaults to 1m and 10%', () => {
    assert.deepEqual(cacheOptionsFrom('cache {\n prefetch 10\n}').prefetch, {
      amount: 10,
      durationMs: 60000,
      percentage: 10,
    });
    assert.deepEqual(cacheOptionsFrom('cache {\n prefetch 2 30s 50%\n}').prefetch, {
      amount: 2,
      durationMs: 30000,
      percentage: 50,
    });
    assert.equal(cacheOptionsFrom('cache {\n prefetch 0\n}').prefetch, null);
  });

  test('serve_stale [DURATION] [immediate|verify] defaults to 1h, immediate', () => {
    const a = cacheOptionsFrom('cache {\n serve_stale\n}');
    assert.equal(a.staleMs, 3_600_000);
    assert.equal(a.verifyStale, false);
    const b = cacheOptionsFrom('cache {\n serve_stale 30s verify\n}');
    assert.equal(b.staleMs, 30_000);
    assert.equal(b.verifyStale, true);
    assert.equal(cacheOptionsFrom('cache {\n serve_stale 2m IMMEDIATE\n}').verifyStale, false);
  });

  test('servfail DURATION, 0 disables, keepttl, disable success|denial [ZONES]', () => {
    assert.equal(cacheOptionsFrom('cache {\n servfail 0\n}').servfailMs, 0);
    assert.equal(cacheOptionsFrom('cache {\n servfail 10s\n}').servfailMs, 10_000);
    assert.equal(cacheOptionsFrom('cache {\n keepttl\n}').keepTtl, true);
    const o = cacheOptionsFrom('cache {\n disable success Cluster.Local\n disable denial cluster.local example.org\n}');
    assert.deepEqual(o.disableSuccess, ['cluster.local.']);
    assert.deepEqual(o.disableDenial, ['cluster.local.', 'example.org.']);
    assert.deepEqual(cacheOptionsFrom('cache {\n disable denial\n}').disableDenial, ['.']);
  });

  test("kubeadm's default cache block parses", () => {
    const o = cacheOptionsFrom('cache 30 {\n    disable success cluster.local\n    disable denial cluster.local\n}');
    assert.equal(o.success.maxTtl, 30);
    assert.deepEqual(o.disableSuccess, ['cluster.local.']);
    assert.deepEqual(o.disableDenial, ['cluster.local.']);
  });

  const bad: Array<[string, RegExp]> = [
    ['cache 0', /^Corefile:2 - Error during parsing: cache TTL can not be zero or negative: 0$/],
    ['cache -5', /cache TTL can not be zero or negative: -5/],
    [
      'cache {\n success\n}',
      /^Corefile:3 - Error during parsing: Wrong argument count or unexpected line ending after 'success'$/,
    ],
    ['cache {\n success lots\n}', /strconv.Atoi: parsing "lots": invalid syntax/],
    ['cache {\n success 100 0\n}', /cache TTL can not be zero or negative: 0/],
    ['cache {\n denial 100 10 -1\n}', /cache min TTL can not be negative: -1/],
    ['cache {\n success 1 2 3 4\n}', /Wrong argument count/],
    ['cache {\n prefetch\n}', /Wrong argument count or unexpected line ending after 'prefetch'/],
    ['cache {\n prefetch -1\n}', /prefetch amount should be positive: -1/],
    ['cache {\n prefetch 1 1m 50\n}', /last character of percentage should be `%`/],
    ['cache {\n prefetch 1 1m 5%\n}', /percentage should fall in range \[10, 90\]: 5/],
    ['cache {\n prefetch 1 soon\n}', /invalid duration "soon"/],
    ['cache {\n serve_stale 1h sometimes\n}', /invalid value for serve_stale refresh mode: sometimes/],
    ['cache {\n serve_stale 1h verify 5s\n}', /Wrong argument count/],
    ['cache {\n servfail 6m\n}', /caching SERVFAIL responses over 5 minutes is not permitted/],
    ['cache {\n servfail\n}', /Wrong argument count/],
    ['cache {\n disable\n}', /Wrong argument count/],
    ['cache {\n disable everything\n}', /cache type for disable must be "success" or "denial"/],
    ['cache {\n keepttl please\n}', /Wrong argument count/],
    ['cache {\n lru\n}', /^Corefile:3 - Error during parsing: cache: unknown property 'lru'$/],
    ['cache\ncache 30', /^Corefile:3 - Error during parsing: plugin 'cache' can only be used once per Server Block$/],
  ];
  for (const [text, want] of bad) {
    test(`rejects ${JSON.stringify(text)} with FILE:LINE - Error during parsing`, () => {
      assert.match(parseError(text), want);
    });
  }
});
