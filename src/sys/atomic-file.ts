// Writes a system file so that a crash or a reader never sees it empty or half written: a
// temporary file in the same directory, fsync, the original's mode and owner, then rename.
// Docker and WSL bind-mount /etc/hosts, where rename fails (EBUSY/EXDEV): there we overwrite in
// place without truncating first, then cut the file to its new length.
import { randomBytes } from 'node:crypto';
import fs, { constants as C } from 'node:fs';
import { basename, dirname, isAbsolute, join, resolve } from 'node:path';

/** The file operations that differ when a file is bind-mounted; tests inject failures here. */
export interface FileOps {
  rename(from: string, to: string): void;
}

export const realFileOps: FileOps = {
  rename: (from, to) => fs.renameSync(from, to),
};

/** A file we refuse to write (a symlink leaving its directory, a directory, a device). */
export class UnsafeFileError extends Error {
  readonly code = 'CONNECT_ERR_UNSAFE_FILE';
  constructor(message: string) {
    super(message);
    this.name = 'UnsafeFileError';
  }
}

export interface FileTarget {
  /** The path we read and replace: `path` itself, or the target of a symlink in the same directory. */
  realPath: string;
  exists: boolean;
  mode: number;
  uid: number;
  gid: number;
}

/**
 * Where a write to `path` lands. A symlink is followed only to a regular file in the same
 * directory (e.g. hosts -> hosts.real); one pointing anywhere else is refused.
 */
export function resolveTarget(path: string, defaultMode = 0o644): FileTarget {
  let st: fs.Stats;
  try {
    st = fs.lstatSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') {
      return { realPath: path, exists: false, mode: defaultMode, uid: -1, gid: -1 };
    }
    throw err;
  }
  let realPath = path;
  if (st.isSymbolicLink()) {
    const link = fs.readlinkSync(path);
    const target = isAbsolute(link) ? link : resolve(dirname(path), link);
    if (fs.realpathSync(dirname(target)) !== fs.realpathSync(dirname(path))) {
      throw new UnsafeFileError(`${path} is a symlink to ${link}, outside its directory; not following it`);
    }
    try {
      st = fs.lstatSync(target);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT')
        throw new UnsafeFileError(`${path} is a dangling symlink to ${link}`);
      throw err;
    }
    if (st.isSymbolicLink()) throw new UnsafeFileError(`${path} is a chain of symlinks; not following it`);
    realPath = target;
  }
  if (!st.isFile()) throw new UnsafeFileError(`${realPath} is not a regular file`);
  return { realPath, exists: true, mode: st.mode & 0o7777, uid: st.uid, gid: st.gid };
}

export interface WriteResult {
  /** How the bytes got there. */
  method: 'rename' | 'in-place';
}

/** Replaces the file at `target.realPath` with `data`, keeping its mode and owner. */
export function writeFileAtomic(target: FileTarget, data: string | Buffer, ops: FileOps = realFileOps): WriteResult {
  const dir = dirname(target.realPath);
  const tmp = join(
    dir,
    `.${basename(target.realPath)}.clusterdns-${process.pid}-${randomBytes(4).toString('hex')}.tmp`,
  );
  const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
  // O_EXCL|O_NOFOLLOW: never write through a symlink someone planted under our temporary name.
  const fd = fs.openSync(tmp, C.O_WRONLY | C.O_CREAT | C.O_EXCL | C.O_NOFOLLOW, 0o600);
  try {
    try {
      writeAll(fd, bytes);
      fs.fchmodSync(fd, target.mode);
      if (target.uid >= 0 && typeof process.getuid === 'function' && process.getuid() === 0)
        fs.fchownSync(fd, target.uid, target.gid);
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    try {
      ops.rename(tmp, target.realPath);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (!target.exists || (code !== 'EBUSY' && code !== 'EXDEV')) throw err;
      writeInPlace(target.realPath, bytes);
      fs.rmSync(tmp, { force: true });
      return { method: 'in-place' };
    }
  } catch (err) {
    fs.rmSync(tmp, { force: true });
    throw err;
  }
  fsyncDir(dir);
  return { method: 'rename' };
}

/**
 * Overwrites from offset 0, then truncates: the file is never empty in between. What lies past
 * the old end is written first, so a full disk fails before an old byte is overwritten.
 */
function writeInPlace(path: string, bytes: Buffer): void {
  const fd = fs.openSync(path, C.O_WRONLY | C.O_NOFOLLOW);
  try {
    const oldSize = fs.fstatSync(fd).size;
    if (bytes.length > oldSize) {
      try {
        writeAll(fd, bytes, oldSize);
      } catch (err) {
        fs.ftruncateSync(fd, oldSize);
        throw err;
      }
    }
    writeAll(fd, bytes, 0, Math.min(oldSize, bytes.length));
    fs.ftruncateSync(fd, bytes.length);
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

/** Writes bytes[from, to) at the same offsets in the file. */
function writeAll(fd: number, bytes: Buffer, from = 0, to = bytes.length): void {
  let off = from;
  while (off < to) off += fs.writeSync(fd, bytes, off, to - off, off);
}

function fsyncDir(dir: string): void {
  let fd: number | undefined;
  try {
    fd = fs.openSync(dir, C.O_RDONLY);
    fs.fsyncSync(fd);
  } catch {
    // Some filesystems (and Windows) cannot fsync a directory; the rename itself is still atomic.
  } finally {
    if (fd !== undefined) fs.closeSync(fd);
  }
}
