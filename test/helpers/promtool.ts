// `promtool check metrics` (Debian's prometheus package) on a scraped /metrics text.

import { spawn } from 'node:child_process';

/** promtool's complaints about an exposition text; empty when it passes. */
export function promtoolProblems(text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const p = spawn('promtool', ['check', 'metrics'], { stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    p.stdout.on('data', (d: Buffer) => (out += d.toString()));
    p.stderr.on('data', (d: Buffer) => (out += d.toString()));
    p.on('error', reject);
    p.on('close', (code) => resolve(code === 0 ? '' : out || `promtool exited ${code}`));
    p.stdin.end(text);
  });
}
