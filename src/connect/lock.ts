// A lock file created with O_EXCL holding the owner's pid, so two clusterdns processes never
// edit /etc/hosts at once. A lock whose pid is gone (the holder crashed) is taken over.
import fs, { constants as C } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';

export class LockTimeoutError extends Error {
  readonly code = 'CONNECT_ERR_LOCKED';
  constructor(path: string, holder: string) {
    super(`${path} is held by ${holder}; if that process is gone, remove the lock file`);
    this.name = 'LockTimeoutError';
  }
}

/** True when a process with this pid exists (EPERM: it exists but is not ours to signal). */
export function pidAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function readHolder(path: string): { pid: number; ageMs: number } | null {
  try {
    const text = fs.readFileSync(path, 'utf8');
    const ageMs = Date.now() - fs.statSync(path).mtimeMs;
    const pid = /^\d+$/.test(text.trim()) ? Number(text.trim()) : 0;
    return { pid, ageMs };
  } catch {
    return null;
  }
}

function tryCreate(path: string): boolean {
  let fd: number;
  try {
    fd = fs.openSync(path, C.O_WRONLY | C.O_CREAT | C.O_EXCL | C.O_NOFOLLOW, 0o644);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw err;
  }
  try {
    fs.writeSync(fd, `${process.pid}\n`);
  } catch (err) {
    // A full disk can refuse even the pid: an empty lock would make the next writer wait
    // emptyStaleMs, so the file we just created goes again and the caller gets the error.
    fs.closeSync(fd);
    fs.rmSync(path, { force: true });
    throw err;
  }
  fs.closeSync(fd);
  return true;
}

/**
 * Removes a lock whose holder is dead. It is first renamed aside, so that of two processes
 * finding the same stale lock only one removes it, and a fresh lock is never deleted.
 */
function breakStale(path: string, stalePid: number): void {
  const aside = `${path}.stale-${process.pid}`;
  try {
    fs.renameSync(path, aside);
  } catch {
    return;
  }
  const moved = readHolder(aside);
  if (moved && moved.pid !== stalePid && pidAlive(moved.pid)) {
    // We moved a lock someone took meanwhile: put it back unless another appeared.
    try {
      fs.linkSync(aside, path);
    } catch {
      // A newer lock exists; ours to drop is only the moved copy.
    }
  }
  fs.rmSync(aside, { force: true });
}

export interface LockOptions {
  timeoutMs?: number;
  /** A lock file with no pid yet (holder died between create and write) counts as stale after this. */
  emptyStaleMs?: number;
}

/** Runs `fn` holding the lock at `path`. */
export async function withLock<T>(path: string, fn: () => T | Promise<T>, opts: LockOptions = {}): Promise<T> {
  const deadline = Date.now() + (opts.timeoutMs ?? 10_000);
  const emptyStaleMs = opts.emptyStaleMs ?? 5_000;
  for (;;) {
    if (tryCreate(path)) break;
    const holder = readHolder(path);
    if (holder) {
      const stale =
        holder.pid === 0 ? holder.ageMs > emptyStaleMs : holder.pid !== process.pid && !pidAlive(holder.pid);
      if (stale) {
        breakStale(path, holder.pid);
        continue;
      }
    }
    if (Date.now() > deadline)
      throw new LockTimeoutError(path, holder ? `pid ${holder.pid || '(unknown)'}` : 'another process');
    await sleep(25 + Math.floor(Math.random() * 25));
  }
  try {
    return await fn();
  } finally {
    fs.rmSync(path, { force: true });
  }
}
