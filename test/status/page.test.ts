// The page is self-contained: no URL outside this origin, and a CSP that admits exactly its
// own inline script and style.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { STATUS_PAGE_CSP, STATUS_PAGE_HTML } from '../../src/status/page.js';

test('the page loads nothing from elsewhere and its CSP hashes match its script and style', () => {
  assert.doesNotMatch(STATUS_PAGE_HTML, /\b(src|href)\s*=\s*["']?(https?:)?\/\//i);
  assert.doesNotMatch(STATUS_PAGE_HTML, /@import|url\(/i);
  assert.match(STATUS_PAGE_HTML, /fetch\('status\.json'/);
  assert.doesNotMatch(
    STATUS_PAGE_HTML,
    /innerHTML|outerHTML|insertAdjacentHTML|document\.write/,
    'client-chosen names are only ever set as text',
  );
  for (const tag of ['script', 'style']) {
    const body = new RegExp(`<${tag}>([\\s\\S]*?)</${tag}>`).exec(STATUS_PAGE_HTML)![1]!;
    const hash = createHash('sha256').update(body).digest('base64');
    assert.ok(STATUS_PAGE_CSP.includes(`${tag}-src 'sha256-${hash}'`), `${tag} hash in CSP`);
  }
  assert.match(STATUS_PAGE_CSP, /default-src 'none'/);
  assert.match(STATUS_PAGE_CSP, /connect-src 'self'/);
});
