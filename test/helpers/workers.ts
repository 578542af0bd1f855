// What the several-workers tests ask of a running server: its /metrics, a metric's total, and
// whether every one of many fresh-socket queries gets the same answer.
import assert from 'node:assert/strict';
import { query } from './dns.js';
import { QType } from '../../src/dns/constants.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The /metrics text; a status other than 200 throws with its body (an error text is no reading). */
export async function scrape(port: number): Promise<string> {
  const r = await fetch(`http://127.0.0.1:${port}/metrics`);
  const text = await r.text();
  if (r.status !== 200) throw new Error(`/metrics: HTTP ${r.status}: ${text.slice(0, 300)}`);
  return text;
}

/** The sum of every sample of `name` in an exposition text. */
export function total(text: string, name: string): number {
  let sum = 0;
  for (const line of text.split('\n'))
    if (line.startsWith(name + '{') || line.startsWith(name + ' '))
      sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  return sum;
}

export function addressOf(m: { answers: Array<{ data: unknown }> }): string | undefined {
  return (m.answers[0]?.data as { address?: string } | undefined)?.address;
}

export async function until(what: string, ms: number, check: () => Promise<boolean>): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await check().catch(() => false)) return;
    await sleep(100);
  }
  assert.fail(`timed out: ${what}`);
}

/** Every one of `n` queries, each from a fresh socket, answers `ip`. */
export async function allAnswer(port: number, name: string, ip: string, n = 30): Promise<boolean> {
  for (let i = 0; i < n; i++) if (addressOf(await query(port, name, QType.A, { timeoutMs: 1000 })) !== ip) return false;
  return true;
}
