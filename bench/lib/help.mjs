// `--help` for the bench scripts: the script's opening comment block, without the `//`.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export function printHeaderHelp(scriptUrl) {
  const lines = readFileSync(fileURLToPath(scriptUrl), 'utf8').split('\n').slice(1);
  const end = lines.findIndex((l) => !l.startsWith('//'));
  process.stdout.write(
    lines
      .slice(0, end === -1 ? lines.length : end)
      .map((l) => l.replace(/^\/\/ ?/, ''))
      .join('\n') + '\n',
  );
}
