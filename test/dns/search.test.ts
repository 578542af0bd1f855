// The names a glibc resolver tries, in its order (res_search's rules).
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { planCandidates } from '../../src/dns/search.js';

const POD = ['default.svc.cluster.local', 'svc.cluster.local', 'cluster.local'];
const names = (input: string, search: string[], ndots: number, noTldQuery = false) =>
  planCandidates(input, { search, ndots, noTldQuery }).candidates.map((c) => c.name);
const phases = (input: string, search: string[], ndots: number) =>
  planCandidates(input, { search, ndots, noTldQuery: false }).candidates.map((c) => c.phase);

describe('candidate ordering', () => {
  test('a short name in a pod (ndots:5): the three search domains, then the name itself', () => {
    assert.deepEqual(names('backend', POD, 5), [
      'backend.default.svc.cluster.local.',
      'backend.svc.cluster.local.',
      'backend.cluster.local.',
      'backend.',
    ]);
    assert.deepEqual(phases('backend', POD, 5), ['search', 'search', 'search', 'as-is-last']);
  });

  test('service.namespace: still fewer dots than ndots, so the search list comes first', () => {
    assert.deepEqual(names('backend.prod', POD, 5), [
      'backend.prod.default.svc.cluster.local.',
      'backend.prod.svc.cluster.local.',
      'backend.prod.cluster.local.',
      'backend.prod.',
    ]);
  });

  test("an external name with ndots:5 walks the whole search list before itself (the seed article's api.example.com)", () => {
    const plan = planCandidates('api.example.com', { search: POD, ndots: 5, noTldQuery: false });
    assert.equal(plan.dots, 2);
    assert.deepEqual(
      plan.candidates.map((c) => c.name),
      [
        'api.example.com.default.svc.cluster.local.',
        'api.example.com.svc.cluster.local.',
        'api.example.com.cluster.local.',
        'api.example.com.',
      ],
    );
    assert.match(plan.rule, /2 dots, fewer than ndots:5/);
  });

  test('as many dots as ndots: the name itself first, then the search list, and not again at the end', () => {
    assert.deepEqual(names('api.example.com', POD, 2), [
      'api.example.com.',
      'api.example.com.default.svc.cluster.local.',
      'api.example.com.svc.cluster.local.',
      'api.example.com.cluster.local.',
    ]);
    assert.deepEqual(phases('api.example.com', POD, 2), ['as-is-first', 'search', 'search', 'search']);
    assert.deepEqual(names('a.b.c.d.e.f', POD, 5)[0], 'a.b.c.d.e.f.');
  });

  test('a trailing dot: only the name, whatever ndots and the search list say', () => {
    const plan = planCandidates('backend.default.svc.cluster.local.', { search: POD, ndots: 5, noTldQuery: false });
    assert.deepEqual(
      plan.candidates.map((c) => c.name),
      ['backend.default.svc.cluster.local.'],
    );
    assert.equal(plan.trailingDot, true);
    assert.match(plan.rule, /absolute/);
    assert.deepEqual(names('backend.', POD, 1), ['backend.']);
  });

  test('the default ndots:1: a dotted name goes as it is first, a single label searches first', () => {
    assert.deepEqual(names('www.example.com', ['corp.example'], 1), [
      'www.example.com.',
      'www.example.com.corp.example.',
    ]);
    assert.deepEqual(names('intranet', ['corp.example'], 1), ['intranet.corp.example.', 'intranet.']);
  });

  test('ndots:0: even a single label goes as it is first', () => {
    assert.deepEqual(names('backend', POD, 0), [
      'backend.',
      'backend.default.svc.cluster.local.',
      'backend.svc.cluster.local.',
      'backend.cluster.local.',
    ]);
  });

  test('no search list: only the name itself', () => {
    assert.deepEqual(names('backend', [], 5), ['backend.']);
    assert.deepEqual(names('a.b', [], 1), ['a.b.']);
  });

  test('no-tld-query: a single label is never asked for as it is; a dotted name still is', () => {
    assert.deepEqual(names('backend', POD, 5, true), [
      'backend.default.svc.cluster.local.',
      'backend.svc.cluster.local.',
      'backend.cluster.local.',
    ]);
    assert.deepEqual(names('backend.prod', POD, 5, true).at(-1), 'backend.prod.');
  });

  test('the root in the search list stands for the name itself, which is then not repeated', () => {
    assert.deepEqual(names('backend', ['.', 'cluster.local'], 5), ['backend.', 'backend.cluster.local.']);
  });

  test('a candidate too long for DNS is marked, not dropped (glibc gives up on it)', () => {
    const long = 'x'.repeat(60);
    const input = [long, long, long, long].join('.');
    const plan = planCandidates(input, {
      search: ['a-rather-long-search-domain.example'],
      ndots: 5,
      noTldQuery: false,
    });
    assert.ok(plan.candidates[0]!.invalid);
    assert.equal(plan.candidates[1]!.invalid, undefined);
  });
});
