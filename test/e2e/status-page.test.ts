// The /status page in headless Chromium (Debian's chromium driven by playwright-core): it
// loads with nothing from elsewhere, and under dnsperf load its QPS rises above zero and its
// query count grows between two reads of the DOM. The screenshot is kept in
// test-artifacts/status.png.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { startServer } from '../helpers/server.js';
import { buildQuery, sendUdp } from '../helpers/dns.js';
import { freePort } from '../helpers/ports.js';
import { QType } from '../../src/dns/constants.js';
import { FakeUpstream } from '../forward/upstreams.js';

const CHROMIUM = '/usr/bin/chromium';
const DNSPERF = '/usr/bin/dnsperf';
const SCREENSHOT = 'test-artifacts/status.png';
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

const skip = existsSync(CHROMIUM) ? false : `Chromium is not installed at ${CHROMIUM} (apt-get install -y chromium)`;

/** The number an element shows ("1,234.5" → 1234.5). */
async function shown(page: Page, selector: string): Promise<number> {
  const text = (await page.textContent(selector)) ?? '';
  return Number(text.replace(/,/g, ''));
}

/** Load at up to `qps` until stopped: dnsperf, or a query loop where dnsperf is missing. */
function startLoad(port: number, dir: string, qps: number): { stop(): Promise<void> } {
  const names = [
    'a.test A',
    'a.test AAAA',
    'b.test A',
    'kubernetes.default.svc.cluster.local A',
    'missing.default.svc.cluster.local A',
    'www.up.test A',
  ];
  if (existsSync(DNSPERF)) {
    const data = join(dir, 'queries.txt');
    writeFileSync(data, names.join('\n') + '\n');
    const p = spawn(
      DNSPERF,
      ['-s', '127.0.0.1', '-p', String(port), '-d', data, '-l', '20', '-Q', String(qps), '-c', '4'],
      { stdio: 'ignore' },
    );
    const exited = new Promise<void>((resolve) => p.on('exit', () => resolve()));
    return {
      stop() {
        p.kill('SIGINT');
        return exited;
      },
    };
  }
  let running = true;
  const loop = (async () => {
    while (running)
      await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          sendUdp(port, buildQuery(names[i % names.length]!.split(' ')[0]!, QType.A)).catch(() => null),
        ),
      );
  })();
  return {
    stop() {
      running = false;
      return loop;
    },
  };
}

test(
  'status page: loads self-contained, and its QPS and total move under dnsperf load',
  { skip, timeout: 40000 },
  async () => {
    const healthPort = await freePort();
    const upstream = await FakeUpstream.start();
    const s = await startServer({
      corefile: `.:PORT {
  bind 127.0.0.1
  health 127.0.0.1:${healthPort} {
    status
  }
  cache 30
  kubernetes cluster.local {
    manifests cluster.yaml
  }
  hosts {
    10.0.0.1 a.test
    10.0.0.2 b.test
    fallthrough
  }
  forward . 127.0.0.1:${upstream.port}
}
`,
      files: { 'cluster.yaml': readFileSync('examples/demo/cluster.yaml', 'utf8') },
      workers: 2,
    });
    const profile = mkdtempSync(join(tmpdir(), 'clusterdns-chromium-'));
    let context: BrowserContext | undefined;
    let load: { stop(): Promise<void> } | undefined;
    try {
      // A name a client chose, HTML included: the page must show it as text.
      for (let i = 0; i < 3; i++)
        await sendUdp(s.port, buildQuery('<img src=x onerror=alert(1)>.test.', QType.A)).catch(() => null);

      context = await chromium.launchPersistentContext(profile, {
        executablePath: CHROMIUM,
        headless: true,
        args: CHROMIUM_ARGS,
        viewport: { width: 1280, height: 900 },
      });
      const page = context.pages()[0] ?? (await context.newPage());
      const requests: string[] = [];
      const problems: string[] = [];
      page.on('request', (r) => requests.push(r.url()));
      page.on('console', (m) => {
        if (m.type() === 'error') problems.push(m.text());
      });
      page.on('pageerror', (e) => problems.push(e.message));
      page.on('dialog', (d) => {
        problems.push(`dialog: ${d.message()}`);
        void d.dismiss();
      });

      await page.goto(`http://127.0.0.1:${healthPort}/status`);
      await page.waitForSelector('#live.ok', { timeout: 5000 });
      assert.equal(await page.title(), 'clusterdns status');
      assert.match((await page.textContent('#meta')) ?? '', /2 workers/);

      load = startLoad(s.port, s.dir, 3000);
      // First read once the rate shows the load, the second a couple of seconds later.
      const deadline = Date.now() + 5000;
      while ((await shown(page, '#qps')) <= 0) {
        assert.ok(Date.now() < deadline, 'QPS did not rise above 0 under load');
        await page.waitForTimeout(200);
      }
      const first = { qps: await shown(page, '#qps'), total: await shown(page, '#total') };
      await page.waitForTimeout(2200);
      const second = { qps: await shown(page, '#qps'), total: await shown(page, '#total') };
      assert.ok(first.qps > 0 && second.qps > 0, `QPS ${first.qps}, then ${second.qps}`);
      assert.ok(second.total > first.total, `total ${first.total}, then ${second.total}`);

      // Everything else a glance needs is filled in.
      assert.match((await page.textContent('#p50')) ?? '', /^\d+(\.\d+)? ms$/);
      assert.match((await page.textContent('#p99')) ?? '', /^\d+(\.\d+)? ms$/);
      assert.match((await page.textContent('#hit-ratio')) ?? '', /^\d+(\.\d+)?%$/);
      assert.match((await page.textContent('#rcode-legend')) ?? '', /NOERROR/);
      assert.match((await page.textContent('#top-names')) ?? '', /a\.test\./);
      assert.match((await page.textContent('#top-nx')) ?? '', /missing\.default\.svc\.cluster\.local\./);
      assert.match((await page.textContent('#upstreams')) ?? '', new RegExp(`127\\.0\\.0\\.1:${upstream.port}\\s*up`));
      assert.match((await page.textContent('#kube')) ?? '', /cluster\.local\.\s*up\s*6/);
      assert.ok((await page.locator('#spark polyline').count()) === 1, 'the sparkline is drawn');
      // The client-chosen name is text, not markup.
      assert.match((await page.textContent('#top-names')) ?? '', /<img\\ src=x/);
      assert.equal(await page.locator('#top-names img').count(), 0);

      mkdirSync('test-artifacts', { recursive: true });
      await page.screenshot({ path: SCREENSHOT, fullPage: true });
      assert.ok(readFileSync(SCREENSHOT).length > 10_000);
      await load.stop();

      const origin = `http://127.0.0.1:${healthPort}/`;
      const elsewhere = requests.filter((u) => !u.startsWith(origin));
      assert.deepEqual(elsewhere, [], "no request leaves the page's origin");
      assert.deepEqual([...new Set(requests.map((u) => new URL(u).pathname))].sort(), ['/status', '/status.json']);
      assert.deepEqual(problems, [], 'no script errors, CSP violations or dialogs');
    } finally {
      await load?.stop();
      await context?.close();
      rmSync(profile, { recursive: true, force: true });
      await s.stop();
      await upstream.close();
    }
  },
);
