// Runs the OS tools connect drives (resolvectl, ip, dscacheutil, powershell) with execFile and an
// argument array: no shell ever parses a string built from flags or cluster data.
import { execFile } from 'node:child_process';

export interface ExecResult {
  /** Exit code; 127 when the program is not installed. */
  code: number;
  stdout: string;
  stderr: string;
}

export interface CommandRunner {
  run(file: string, args: readonly string[]): Promise<ExecResult>;
}

export function execRunner(timeoutMs = 15_000): CommandRunner {
  return {
    run: (file, args) =>
      new Promise((resolve) => {
        execFile(
          file,
          [...args],
          { timeout: timeoutMs, windowsHide: true, maxBuffer: 4 * 1024 * 1024 },
          (err, stdout, stderr) => {
            if (!err) return resolve({ code: 0, stdout, stderr });
            const e = err as NodeJS.ErrnoException & { code?: string | number; killed?: boolean };
            if (e.code === 'ENOENT') return resolve({ code: 127, stdout: '', stderr: `${file}: not found` });
            const code = typeof e.code === 'number' ? e.code : 1;
            resolve({ code, stdout, stderr: stderr || e.message });
          },
        );
      }),
  };
}

/**
 * For another OS's commands (`--os darwin` on Linux, in tests and dry runs): records them and
 * reports success without running anything.
 */
export function recordingRunner(sink: (file: string, args: readonly string[]) => void): CommandRunner {
  return {
    run: async (file, args) => {
      sink(file, args);
      return { code: 0, stdout: '', stderr: '' };
    },
  };
}

/** `file arg arg` for logs, with arguments that need it in single quotes. */
export function formatCommand(file: string, args: readonly string[]): string {
  return [file, ...args].map((a) => (/^[\w@%+=:,./~-]+$/.test(a) ? a : `'${a.replace(/'/g, `'\\''`)}'`)).join(' ');
}
